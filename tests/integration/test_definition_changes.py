"""The DAG's definition against the stored one, at open time, on a real ZooKeeper
(:func:`~airflow_epochs.operators.opening.create_if_missing`,
:func:`~airflow_epochs.operators.opening.apply_definition`): a pipeline created with it when missing; a
stored configuration that differs is said in one warning naming each difference, and the stored one
applies; with ``from_epoch`` the definition becomes one configuration version from that epoch, however
many opens (and deployments) apply it, and a ``from_epoch`` already opened is refused in a warning."""

from __future__ import annotations

import logging

import pytest

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.operators.opening import Opening, apply_definition, create_if_missing

pytestmark = pytest.mark.integration
STORED = {"partitions": {"orders": ["orders_eu"]}}
DEFINED = {"partitions": {"orders": ["orders_eu", "orders_us"], "refunds": ["refunds"]}}


def test_a_missing_pipeline_is_created_with_the_dags_definition(zk, caplog):
    ledger = EpochLedger(zk, "defined", owner="a")
    opening = Opening(pipeline="defined", config=DEFINED)
    create_if_missing(ledger, opening)  # before the epoch is chosen (the frontier's next reads the pipeline)
    assert ledger.frontier() == 0
    apply_definition(ledger, opening, 1, logging.getLogger("t"))
    assert ledger.config_for(1).config == PipelineConfig.from_json(DEFINED)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_stored_configuration_that_differs_is_said_and_applies(zk, caplog):
    ledger = EpochLedger(zk, "differs", owner="a")
    ledger.create_pipeline(PipelineConfig.from_json(STORED))
    with caplog.at_level(logging.INFO, logger="t"):
        apply_definition(ledger, Opening(pipeline="differs", config=DEFINED), 1, logging.getLogger("t"))
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    text = warning.getMessage()
    assert "epoch 1 runs under the stored configuration version 0 (from epoch 1)" in text
    assert "partition 'refunds' added (with producers ['refunds']); partition 'orders': producers ['orders_us'] " \
           "added" in text
    assert "from_epoch=N" in text
    assert ledger.config_for(1).config == PipelineConfig.from_json(STORED)
    assert len(ledger.config_versions()) == 1


def test_from_epoch_schedules_the_definition_once_whoever_opens(zk, caplog):
    ledger = EpochLedger(zk, "scheduled", owner="a")
    ledger.create_pipeline(PipelineConfig.from_json(STORED))
    ledger.vote(ledger.open_epoch(1), "orders", "orders_eu", {})
    opening = Opening(pipeline="scheduled", config=DEFINED, from_epoch=3)
    with caplog.at_level(logging.INFO, logger="t"):
        apply_definition(ledger, opening, 2, logging.getLogger("t"))
    assert [(v.version, v.from_epoch) for v in ledger.config_versions()] == [(0, 1), (1, 3)]
    assert ledger.config_for(3).config == PipelineConfig.from_json(DEFINED)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # epoch 2 is before it: said as info
    assert any("applies from epoch 3" in r.getMessage() for r in caplog.records)
    # another deployment's open of the same DAG, and the next epoch's: the version is there once
    for owner, epoch in (("b", 2), ("a", 3)):
        apply_definition(EpochLedger(zk, "scheduled", owner=owner), opening, epoch, logging.getLogger("t"))
    assert len(ledger.config_versions()) == 2


def test_a_from_epoch_already_opened_is_refused_in_a_warning(zk, caplog):
    ledger = EpochLedger(zk, "late", owner="a")
    ledger.create_pipeline(PipelineConfig.from_json(STORED))
    ledger.vote(ledger.open_epoch(1), "orders", "orders_eu", {})
    ledger.open_epoch(2)
    apply_definition(ledger, Opening(pipeline="late", config=DEFINED, from_epoch=2), 2, logging.getLogger("t"))
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("cannot start at from_epoch=2" in m and "newest opened epoch 2" in m for m in messages), messages
    assert len(ledger.config_versions()) == 1
