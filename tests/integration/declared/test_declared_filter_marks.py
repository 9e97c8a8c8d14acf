"""The host's filter of declared producers against a real ZooKeeper: a declaration stored after the
filter was cached is honoured by the very next task (the filter's marks no longer match), and a
filter whose marks still match decides without the declarations being read again.

The listener is driven as Airflow's task process drives it (``vote_for_outlets`` with the task
instance and its outlet events); the votes land in the real ZooKeeper of the session.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from declared_sales import DECLARED
from kazoo.client import KazooClient

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.coordination.declared.votes import declaration_mark
from airflow_epochs.coordination.wire.declared import DeclaredProducers, TaskProducer
from airflow_epochs.listeners import declared_producers as listener
from airflow_epochs.listeners.declared_filter import ProducerFilter, load, store

pytestmark = pytest.mark.integration


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, zk_connection: str) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("AIRFLOW__EPOCHS__DECLARED_PIPELINES", "declared")
    monkeypatch.setenv("AIRFLOW__EPOCHS__DECLARED_CACHE_DIR", str(folder))
    return folder


def _task(dag_id: str, uri: str, key: str) -> tuple[SimpleNamespace, dict[str, object]]:
    outlet = SimpleNamespace(uri=uri, name=uri.rsplit("/", 1)[-1])
    ti = SimpleNamespace(dag_id=dag_id, task_id="load", run_id=f"manual__{key}", map_index=-1,
                         task=SimpleNamespace(outlets=[outlet]))
    event = SimpleNamespace(partition_keys=[key])

    class Recorded:
        def __getitem__(self, asset: object) -> object:
            assert asset is outlet
            return event

    return ti, {"outlet_events": Recorded(), "dag_run": SimpleNamespace(partition_key=None)}


def _statuses(dag_id: str, uri: str, key: str) -> list[tuple[str, str]]:
    ti, context = _task(dag_id, uri, key)
    return [(o.producer, o.status) for o in listener.vote_for_outlets(ti, context)]


def test_a_pipeline_created_after_the_filter_was_cached_is_honoured_by_the_next_task(cache: Path, zk: KazooClient):
    assert _statuses("prod_other", "file:///data/sales/other", "2026-01-01") == []
    cached = load(cache)
    assert cached is not None and cached.declarations == {"declared": None} and cached.marks == {"declared": None}
    EpochLedger(zk, "declared", owner="setup").create_pipeline(DECLARED.pipeline_config())
    # the cached filter is seconds old (a time-to-live would still trust it): the mark tells it changed
    assert _statuses("prod_eu", "file:///data/sales/eu", "2026-01-01") == [("eu", "staged")]
    renewed = load(cache)
    assert renewed is not None and renewed.declarations["declared"] is not None
    assert renewed.marks["declared"] is not None


def test_a_producer_declared_by_a_new_configuration_votes_on_its_next_task(cache: Path, zk: KazooClient):
    ledger = EpochLedger(zk, "declared", owner="setup")
    ledger.create_pipeline(DECLARED.pipeline_config())
    assert _statuses("prod_other", "file:///data/sales/other", "2026-01-05") == []  # not declared yet: cached
    before = declaration_mark(ledger)
    producers = (*DECLARED.partitions["sales"], TaskProducer("prod_other", "load", name="other"))
    wider = DeclaredProducers({"sales": producers}, DECLARED.keys)
    ledger.set_config(wider.pipeline_config(), from_epoch=5)
    after = declaration_mark(ledger)
    assert before is not None and after is not None and after != before
    assert _statuses("prod_other", "file:///data/sales/other", "2026-01-05") == [("other", "staged")]


def test_a_filter_with_the_current_marks_decides_without_reading_the_declarations(cache: Path, zk: KazooClient):
    ledger = EpochLedger(zk, "declared", owner="setup")
    ledger.create_pipeline(DECLARED.pipeline_config())
    # a filter that (wrongly) names nobody, written with the marks ZooKeeper shows now: trusted as is
    store(cache, ProducerFilter(listener.deployment_source(), {"declared": None}, 0.0,
                                {"declared": declaration_mark(ledger)}))
    assert _statuses("prod_eu", "file:///data/sales/eu", "2026-01-01") == []
    assert not zk.exists(f"{ledger.paths.base}/declared")
    # the same filter with another mark is read again, and the producer votes
    store(cache, ProducerFilter(listener.deployment_source(), {"declared": None}, 0.0, {"declared": (1, 0)}))
    assert _statuses("prod_eu", "file:///data/sales/eu", "2026-01-01") == [("eu", "staged")]
