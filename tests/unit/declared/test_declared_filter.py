"""The local filter of declared producers (airflow_epochs.listeners.declared_filter) and the listener's
decision with it: when the filter is current (same marks); a bad check timeout is refused before any
connection (this tier refuses every TCP connection). The checks against a real ZooKeeper are in
tests/integration/declared/test_declared_filter_marks.py and test_declared_filter_zk_down.py, and the scheduler
test tests/system/test_declared_zk_down.py runs a real ZooKeeper stopped."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from declared_sales import DECLARED

from airflow_epochs.listeners import declared_producers as listener
from airflow_epochs.listeners.declared_filter import FILE_NAME, FilterCacheError, ProducerFilter, load, store

SOURCE = ("zk_down", "/airflow-epochs", ("declared", "absent"))


def _filter(fetched_at: float | None = None, source: tuple[str, str, tuple[str, ...]] = SOURCE) -> ProducerFilter:
    return ProducerFilter(source, {"declared": DECLARED, "absent": None},
                          time.time() if fetched_at is None else fetched_at)


def test_the_filter_names_declared_tasks_and_assets_only() -> None:
    cached = _filter()
    eu = cached.matches("prod_eu", "load", [("file:///data/sales/eu", "2026-01-01")])
    assert [(m.partition, m.producer, m.key) for m in eu["declared"]] == [("sales", "eu", "2026-01-01")]
    assert list(cached.matches("prod_returns", "load", [("file:///data/returns", "2026-01-02")])) == ["declared"]
    assert cached.matches("prod_other", "load", [("file:///data/sales/other", "2026-01-01")]) == {}
    # the declared asset, from a DAG the declaration does not allow: not a producer
    assert cached.matches("prod_other", "load", [("file:///data/returns", "2026-01-01")]) == {}
    assert cached.matches("prod_eu", "other_task", [("file:///data/sales/eu", "2026-01-01")]) == {}


def test_current_only_with_the_same_mark_for_every_pipeline() -> None:
    marked = ProducerFilter(SOURCE, {"declared": DECLARED, "absent": None}, 1.0, {"declared": (7, 1), "absent": None})
    assert marked.current({"declared": (7, 1), "absent": None})
    assert not marked.current({"declared": (7, 2), "absent": None})  # a configuration version added
    assert not marked.current({"declared": (9, 1), "absent": None})  # the pipeline created again
    assert not marked.current({"declared": (7, 1), "absent": (12, 1)})  # created since
    assert not marked.current({"declared": (7, 1)})  # not every configured pipeline checked
    assert not _filter().current({"declared": (7, 1), "absent": None})  # a filter without marks: never


def test_store_and_load_round_trip_owner_only(tmp_path: Path) -> None:
    folder = tmp_path / "epochs"
    assert load(folder) is None
    path = store(folder, _filter(123.0))
    assert path == folder / FILE_NAME
    assert os.stat(folder).st_mode & 0o777 == 0o700 and os.stat(path).st_mode & 0o777 == 0o600
    loaded = load(folder)
    assert loaded is not None and loaded.source == SOURCE and loaded.fetched_at == 123.0 and loaded.marks == {}
    assert loaded.declarations["absent"] is None
    declared = loaded.declarations["declared"]
    assert declared is not None and declared.to_json() == DECLARED.to_json()
    assert list(loaded.matches("prod_us", "load", [("file:///data/sales/us", "2026-01-03")])) == ["declared"]
    assert [p.name for p in folder.iterdir()] == [FILE_NAME]  # no temporary file left
    store(folder, ProducerFilter(SOURCE, {"declared": DECLARED, "absent": None}, 1.0,
                                 {"declared": (7, 1), "absent": None}))
    marked = load(folder)
    assert marked is not None and marked.marks == {"declared": (7, 1), "absent": None}


def test_a_file_not_ours_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "epochs"
    store(folder, _filter())
    os.chmod(folder / FILE_NAME, 0o644)
    with pytest.raises(FilterCacheError, match="mode 644"):
        load(folder)
    os.chmod(folder / FILE_NAME, 0o600)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes((folder / FILE_NAME).read_bytes())
    os.chmod(elsewhere, 0o600)
    (folder / FILE_NAME).unlink()
    (folder / FILE_NAME).symlink_to(elsewhere)
    with pytest.raises(FilterCacheError, match="cannot open"):
        load(folder)
    linked = tmp_path / "linked"
    linked.symlink_to(folder)
    with pytest.raises(FilterCacheError, match="not a folder"):
        load(linked)
    (folder / FILE_NAME).unlink()
    store(folder, _filter())
    raw = (folder / FILE_NAME).read_bytes()
    (folder / FILE_NAME).write_bytes(raw.replace(b'"declarations":{', b'"declarations":{"x":3,'))
    with pytest.raises(FilterCacheError, match="not a declared-producers filter"):
        load(folder)
    (folder / FILE_NAME).write_bytes(raw.replace(b'"marks":{}', b'"marks":{"declared":[1,-2]}'))
    with pytest.raises(FilterCacheError, match="the mark of 'declared' is not"):
        load(folder)
    assert b'"marks":{},' in raw
    (folder / FILE_NAME).write_bytes(raw.replace(b'"marks":{},', b''))  # written before marks: loads, unmarked
    unmarked = load(folder)
    assert unmarked is not None and unmarked.marks == {} and not unmarked.current({"declared": None, "absent": None})


# -- the listener's decision, with ZooKeeper unreachable ----------------------------------------------


@pytest.fixture
def deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("AIRFLOW__EPOCHS__DECLARED_PIPELINES", "declared,absent")
    monkeypatch.setenv("AIRFLOW__EPOCHS__DECLARED_ZOOKEEPER_CONN_ID", "zk_down")
    monkeypatch.setenv("AIRFLOW__EPOCHS__DECLARED_CACHE_DIR", str(folder))
    monkeypatch.setenv("AIRFLOW_CONN_ZK_DOWN", json.dumps(
        {"conn_type": "zookeeper", "host": "127.0.0.1", "port": 9, "extra": {"connection_timeout": 1}}))
    return folder


def _task(dag_id: str, uri: str, key: str) -> tuple[SimpleNamespace, dict[str, object]]:
    outlet = SimpleNamespace(uri=uri, name=uri.rsplit("/", 1)[-1])
    task = SimpleNamespace(outlets=[outlet])
    ti = SimpleNamespace(dag_id=dag_id, task_id="load", run_id="manual__1", map_index=-1, task=task)
    events = {id(outlet): SimpleNamespace(partition_keys=[key])}

    class Recorded:
        def __getitem__(self, asset: object) -> object:
            return events[id(asset)]

    return ti, {"outlet_events": Recorded(), "dag_run": SimpleNamespace(partition_key=None)}


def test_a_bad_check_timeout_is_refused_naming_it_before_any_connection(
        deployment: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__EPOCHS__DECLARED_CHECK_TIMEOUT", "soon")
    store(deployment, _filter(source=listener.deployment_source()))
    ti, context = _task("prod_other", "file:///data/sales/other", "2026-01-01")
    with pytest.raises(ValueError, match="declared_check_timeout must be a number of seconds, not 'soon'"):
        listener.vote_for_outlets(ti, context)
