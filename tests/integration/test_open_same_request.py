"""Two processes of one owner open the same epoch with the same request id at once (the declared producers'
drainers do): one attempt, never a second one that fences off votes cast under the first."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.coordination.protocol import opening as opening_module

pytestmark = pytest.mark.integration


def test_an_open_that_lost_the_race_after_its_look_up_answers_the_attempt_of_its_request(zk, monkeypatch):
    first = EpochLedger(zk, "same_request", owner="drainers")
    first.create_pipeline(PipelineConfig({"sales": ("us", "eu")}))
    second = EpochLedger(zk, "same_request", owner="drainers")
    # the race is injected between the look-up of the request id and the commit
    real_find = opening_module._find_opening
    opened: list[Any] = []

    def look_up_then_lose_the_race(call: Any, ctx: Any, epoch: int) -> Any:
        found = real_find(call, ctx, epoch)
        if not opened:  # the second's look-up found nothing; the first commits before the second's body runs
            opened.append(None)
            opened[0] = first.open_epoch(1, request_id="declared-open-1-g1")
        return found

    monkeypatch.setattr(opening_module, "_find_opening", look_up_then_lose_the_race)
    answer = second.open_epoch(1, request_id="declared-open-1-g1")

    assert opened[0] is not None and answer.token == opened[0].token == 1
    info = first.epoch_info(1)
    assert info is not None and info.attempt == 1 and info.attempt_state == "running"
    first.vote(opened[0], "sales", "us", {"rows": 1})  # the first's handle still votes
    second.vote(answer, "sales", "eu", {"rows": 2})
    sealed = first.epoch_info(1)
    assert sealed is not None and sealed.state == "sealed"
