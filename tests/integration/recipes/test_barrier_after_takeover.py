"""A barrier arrival of a deployment that was stopped while another one took its epoch over and sealed it
(issue 36's takeover, where the stopped deployment's run then failed): the arrival is skipped, naming who
sealed the epoch, as the open task skips a sealed epoch; on an open epoch the same arrival is recorded."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowSkipException

from airflow_epochs.coordination import PipelineConfig
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.operators.epoch import ArriveAtBarrierOperator

pytestmark = [pytest.mark.integration]


def _arrive(attempt: object, participant: str) -> object:
    operator = ArriveAtBarrierOperator(task_id=f"{participant}_arrives", barrier="ingested", participant=participant,
                                       attempt_task_id="open", zookeeper_conn_id="zk_takeover", wait=False)
    # the context's one use here: the open task's XCom, the attempt this deployment's run works under
    ti = SimpleNamespace(xcom_pull=lambda task_ids: attempt.to_dict())  # type: ignore[attr-defined]
    return operator.execute({"ti": ti})  # type: ignore[arg-type]


def test_an_arrival_at_an_epoch_sealed_meanwhile_is_skipped_naming_who_sealed_it(monkeypatch, zk_server, zk_chroot,
                                                                                   airflow_home):
    monkeypatch.setenv("AIRFLOW_CONN_ZK_TAKEOVER", zk_server.connection_json(zk_chroot))
    with ZooKeeperHook("zk_takeover") as hook:
        ledger = hook.ledger("takeover", owner="first")
        ledger.create_pipeline(PipelineConfig({"out": ("join",)}, barriers={"ingested": ("flights", "weather")}))
        first = ledger.open_epoch(1)
        # the epoch is carried to its seal without this deployment's arrival (it was stopped meanwhile)
        ledger.vote(first, "out", "join")
        ledger.close_epoch(first)
        assert ledger.epoch_info(1).state == "sealed"
    skipped = re.escape("epoch 1 is already sealed by first (attempt 1); flights has no barrier")
    with pytest.raises(AirflowSkipException, match=skipped):
        _arrive(first, "flights")

    with ZooKeeperHook("zk_takeover") as hook:  # the control: on an open epoch the arrival is recorded
        second = hook.ledger("takeover", owner="first").open_epoch(2)
    assert _arrive(second, "flights") == {"arrived": "flights", "index": 1, "decision": None}
