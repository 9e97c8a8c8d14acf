"""Deadline alert callbacks for the tests: each appends the alert it got, as one JSON line, to ``out``
(a file, so that alerts from several processes, triggerers included, can be counted)."""

from __future__ import annotations

import json
import os
import time
from typing import Any


async def record_alert(*, out: str, alert: dict[str, Any], tag: str = "") -> None:
    """An ``AsyncCallback`` target, as Airflow's deadline alerts call theirs."""
    with open(out, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"alert": alert, "tag": tag, "pid": os.getpid(), "at": time.time()}) + "\n")


def record_alert_sync(*, out: str, alert: dict[str, Any]) -> None:
    """A plain callable (a ``SyncCallback`` target): the trigger runs it in a thread."""
    with open(out, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"alert": alert, "tag": "sync", "pid": os.getpid(), "at": time.time()}) + "\n")


async def hang_first_then_record(*, alert: dict[str, Any]) -> None:
    """For the triggerer crash test: every call is noted in ``<EPOCHS_TEST_ALERTS>.started``; the first
    one then hangs (the test kills its triggerer -9 meanwhile), a later one records the alert in
    ``EPOCHS_TEST_ALERTS`` (the delivered alerts)."""
    import asyncio

    out = os.environ["EPOCHS_TEST_ALERTS"]
    started = out + ".started"
    first = not os.path.exists(started)
    with open(started, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"alert": alert, "pid": os.getpid(), "at": time.time()}) + "\n")
    if first:
        await asyncio.sleep(3600)
    with open(out, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"alert": alert, "pid": os.getpid(), "at": time.time()}) + "\n")


async def fail_alert(*, out: str, alert: dict[str, Any], tag: str = "") -> None:
    """A callback that fails (its service is down): the alert is noted in ``out + '.failed'``, not in ``out``."""
    with open(out + ".failed", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"alert": alert, "tag": tag, "pid": os.getpid(), "at": time.time()}) + "\n")
    raise RuntimeError("the alerting service is down")
