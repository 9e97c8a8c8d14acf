"""The premise of inline stages: the first tasks of one run open their epoch at the same time, each as the
pipeline's leader, with the run's one opening request (``EpochGroup(inline_stages=True)``). On a real
ZooKeeper, two threads (the two first tasks) open each of five epochs at once, released together by a
barrier: both get the same attempt, the epoch has one attempt and one opening in its history, and the
votes both cast under it seal the epoch; the next epoch's openings wait for that seal."""

from __future__ import annotations

import datetime
import threading

import pytest

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.hooks.epoch_opening import open_epoch

pytestmark = pytest.mark.integration


def test_two_first_tasks_opening_at_once_share_one_attempt(zk_factory):
    config = PipelineConfig.from_json({"partitions": {"flights": ["clean_flights"], "weather": ["hourly_weather"]}})
    EpochLedger(zk_factory(), "inline", owner="deployment").create_pipeline(config)
    producers = {"clean_flights": "flights", "hourly_weather": "weather"}
    for epoch in range(1, 6):
        together = threading.Barrier(len(producers))
        answers: dict[str, object] = {}

        def first_task(producer: str, epoch: int = epoch, together: threading.Barrier = together,
                       answers: dict[str, object] = answers) -> None:
            ledger = EpochLedger(zk_factory(), "inline", owner="deployment")  # a process of its own each
            together.wait()
            decision = open_epoch(ledger, epoch, lease_duration=datetime.timedelta(seconds=30),
                                  request_id=f"ti-run-{epoch}-epoch.open", wait_in_worker=True)
            answers[producer] = decision.attempt
            ledger.vote(decision.attempt, producers[producer], producer, {"rows": epoch})

        threads = [threading.Thread(target=first_task, args=(p,)) for p in producers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not any(thread.is_alive() for thread in threads) and sorted(answers) == sorted(producers)
        assert len({(a.token, a.generation) for a in answers.values()}) == 1, answers  # type: ignore[attr-defined]
    ledger = EpochLedger(zk_factory(), "inline", owner="watcher")
    assert ledger.frontier() == 5
    events = [(e.event, e.detail.get("epoch")) for e in ledger.history()]
    for epoch in range(1, 6):
        assert events.count(("epoch_opened", epoch)) == 1
        assert ("attempt_started", epoch) not in events  # no second attempt superseded the first
        assert ledger.epoch_info(epoch).attempt == 1
