"""What a pipeline's recorded history says about each epoch (when it opened and sealed, its attempts),
kept up to date by reading only the events recorded since the last read."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_epochs.coordination import EpochLedger, Event
from airflow_epochs.coordination.wire.events import (
    AttemptAborted,
    AttemptStarted,
    EpochOpened,
    EpochSealed,
    ProducerRerun,
)
from airflow_epochs.views.model import AttemptView

log = logging.getLogger(__name__)



@dataclass
class EpochTimes:
    opened_at: float | None = None
    sealed_at: float | None = None
    attempts: list[AttemptView] = field(default_factory=list)


def _task_instance(ti: Mapping[str, Any]) -> str:
    return f"{ti.get('dag_id')}.{ti.get('task_id')} ({ti.get('run_id')})"


def _rerun_note(record: ProducerRerun) -> str:
    """What the Epochs page says of a declared producer's re-run after the seal."""
    how = (f"cleared after try {record.succeeded_try} succeeded (try {record.try_number})" if record.cleared
           else "another run")
    then = "the key was reopened" if record.reopened else "nothing changed (reopen_on_rerun is off)"
    return f"{record.partition}/{record.producer} key {record.key}: {how}; {then}"


class HistoryCache:
    """What the recorded history says about each epoch, kept up to date by reading only new events.

    The first read of a long history (tens of thousands of events) runs in a background thread;
    until it finishes, readers get ``loaded = False`` and no times, never a wait.

    :param keep_events: full events are kept for the newest this many epochs (the timeline).
    """

    def __init__(self, ledger: EpochLedger, *, keep_events: int = 60, min_interval: float = 2.0) -> None:
        self.ledger = ledger
        self.keep_events = keep_events
        self.min_interval = min_interval
        self.loaded = False
        self.error: str | None = None
        self._seq = -1
        self._epochs: dict[int, EpochTimes] = {}
        self._events: dict[int, list[Event]] = {}
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._refreshing = False
        self._refreshed_at = 0.0
        self._first_read = threading.Event()  # set once the first read finished (loaded, or failed)

    def refresh(self, *, wait: bool) -> None:
        """Read the events recorded since the last read.

        :param wait: once the first read is done, read now (an epoch's detail wants its newest
            events); otherwise read in the background, at most once per ``min_interval`` (polling).
        """
        if wait and self.loaded:
            if time.monotonic() - self._refreshed_at >= self.min_interval / 4:
                self._read()
                self._refreshed_at = time.monotonic()
            return
        with self._lock:
            if self._refreshing or time.monotonic() - self._refreshed_at < self.min_interval:
                return
            self._refreshing = True
        threading.Thread(target=self._background, name=f"epochs-ui-history-{self.ledger.pipeline}",
                         daemon=True).start()

    def wait_loaded(self, timeout: float) -> bool:
        """Start the first read if it has not started, and wait at most ``timeout`` seconds for it:
        whether the history is loaded (a view that must not show "nothing recorded" before it is)."""
        if not self.loaded:
            self.refresh(wait=True)
            self._first_read.wait(timeout)
        return self.loaded

    def _background(self) -> None:
        try:
            self._read()
        finally:
            with self._lock:
                self._refreshing = False
                self._refreshed_at = time.monotonic()

    def _read(self) -> None:
        with self._read_lock:  # one reader at a time: each continues from the sequence the last one reached
            try:
                events = self.ledger.history(since_seq=self._seq)
                with self._lock:
                    for event in events:
                        self._apply(event)
                    self._trim()
                    self.loaded = True
                    self.error = None
            except Exception as exc:  # noqa: BLE001 - shown on the page; the next refresh tries again
                log.warning("Epochs UI: reading the history of %s failed: %s", self.ledger.pipeline, exc)
                self.error = f"{type(exc).__name__}: {exc}"
            finally:
                self._first_read.set()

    def _apply(self, event: Event) -> None:
        self._seq = max(self._seq, event.seq)
        record = event.record
        if record.epoch is None:
            return
        self._events.setdefault(record.epoch, []).append(event)
        times = self._epochs.setdefault(record.epoch, EpochTimes())
        if isinstance(record, EpochOpened):
            times.opened_at, times.sealed_at = event.at, None
            times.attempts.append(AttemptView(record.attempt, record.owner, "opened", event.at,
                                              f"generation {record.generation}"))
        elif isinstance(record, AttemptStarted):
            times.attempts.append(AttemptView(record.attempt, record.owner, "started", event.at,
                                              f"superseded attempt {record.superseded} ({record.previous_state})"))
        elif isinstance(record, AttemptAborted):
            times.attempts.append(AttemptView(record.attempt, record.owner, "aborted", event.at, record.reason))
        elif isinstance(record, EpochSealed):
            times.sealed_at = event.at
            times.attempts.append(AttemptView(record.attempt, record.owner, "sealed", event.at))
        elif isinstance(record, ProducerRerun):
            times.attempts.append(AttemptView(0, _task_instance(record.task_instance), "producer re-run", event.at,
                                              _rerun_note(record)))

    def _trim(self) -> None:
        if len(self._events) > self.keep_events:
            for epoch in sorted(self._events)[: len(self._events) - self.keep_events]:
                del self._events[epoch]

    def times(self, epoch: int) -> EpochTimes | None:
        with self._lock:
            return self._epochs.get(epoch)

    def events(self, epochs: Iterable[int]) -> list[Event]:
        with self._lock:
            return [event for epoch in epochs for event in self._events.get(epoch, ())]
