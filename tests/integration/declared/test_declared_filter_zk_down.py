"""The declared-producers listener with ZooKeeper unreachable (a real refused connection, nothing
listening on the port): the cached filter, however old, decides for a task it does not name; with no usable
filter the task fails, saying why (a declared producer must never succeed without its vote). The unit
tier (tests/unit/declared/test_declared_filter.py) checks that a fresh filter never contacts ZooKeeper."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from declared_sales import DECLARED

from airflow_epochs.listeners import declared_producers as listener
from airflow_epochs.listeners.declared_filter import ProducerFilter, store


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("AIRFLOW__EPOCHS__DECLARED_PIPELINES", "declared,absent")
    monkeypatch.setenv("AIRFLOW__EPOCHS__DECLARED_ZOOKEEPER_CONN_ID", "zk_down")
    monkeypatch.setenv("AIRFLOW__EPOCHS__DECLARED_CACHE_DIR", str(folder))
    monkeypatch.setenv("AIRFLOW__EPOCHS__DECLARED_CHECK_TIMEOUT", "1")
    monkeypatch.setenv("AIRFLOW_CONN_ZK_DOWN", json.dumps(
        {"conn_type": "zookeeper", "host": "127.0.0.1", "port": _closed_port(), "extra": {"connection_timeout": 1}}))
    return folder


def _filter(fetched_at: float) -> ProducerFilter:
    return ProducerFilter(listener.deployment_source(), {"declared": DECLARED, "absent": None}, fetched_at)


def _task(dag_id: str, uri: str, key: str) -> tuple[SimpleNamespace, dict[str, object]]:
    outlet = SimpleNamespace(uri=uri, name=uri.rsplit("/", 1)[-1])
    ti = SimpleNamespace(dag_id=dag_id, task_id="load", run_id="manual__1", map_index=-1,
                         task=SimpleNamespace(outlets=[outlet]))
    event = SimpleNamespace(partition_keys=[key])

    class Recorded:
        def __getitem__(self, asset: object) -> object:
            assert asset is outlet
            return event

    return ti, {"outlet_events": Recorded(), "dag_run": SimpleNamespace(partition_key=None)}


def test_the_cached_filter_decides_while_zookeeper_is_down(deployment: Path) -> None:
    store(deployment, _filter(time.time() - 3600))  # however old
    ti, context = _task("prod_other", "file:///data/sales/other", "2026-01-01")
    started = time.monotonic()
    assert listener.vote_for_outlets(ti, context) == []  # tried ZooKeeper (refused), then the cached filter
    assert time.monotonic() - started < 10  # the check waits declared_check_timeout (1 s), not a vote budget


def test_no_filter_and_zookeeper_down_fails_saying_why(deployment: Path) -> None:
    ti, context = _task("prod_other", "file:///data/sales/other", "2026-01-01")
    with pytest.raises(listener.DeclaredVoteNotCast, match=r"cannot tell whether task prod_other\.load"):
        listener.vote_for_outlets(ti, context)


def test_a_filter_written_for_other_settings_is_not_used(deployment: Path) -> None:
    conn, root, pipelines = listener.deployment_source()
    assert conn.startswith("zk_down=127.0.0.1:")
    store(deployment, ProducerFilter((conn + "/elsewhere", root, pipelines), {}, time.time()))
    ti, context = _task("prod_other", "file:///data/sales/other", "2026-01-01")
    with pytest.raises(listener.DeclaredVoteNotCast, match="no filter cached"):
        listener.vote_for_outlets(ti, context)


def test_a_declared_producer_fails_naming_its_declaration(deployment: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__EPOCHS__DECLARED_VOTE_BUDGET", "2")
    store(deployment, _filter(time.time()))
    ti, context = _task("prod_eu", "file:///data/sales/eu", "2026-01-02")
    with pytest.raises(listener.DeclaredVoteNotCast) as failed:
        listener.vote_for_outlets(ti, context)
    assert "pipeline 'declared' partition 'sales' producer 'eu' key '2026-01-02'" in str(failed.value)
    assert "ZooKeeperUnreachable" in str(failed.value)
