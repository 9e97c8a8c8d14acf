"""The Epochs page shows, for each sealed partition, the Iceberg table it is published to and the
snapshot of that epoch: real ZooKeeper, real PySpark, pyiceberg's SQL catalog on the tests' PostgreSQL
server, and the page's JSON API (FastAPI's test client)."""

from __future__ import annotations

import json
from functools import partial

import pytest
from tables_helpers import PARTITION, job_for, new_pipeline, pg_catalog, seal_epoch

from airflow_epochs.hooks.ledgers import ledger_on
from airflow_epochs.tables import history as h
from airflow_epochs.tables import load_catalog, publish_sealed, published_snapshot
from airflow_epochs.tables.published import PublishedIndex
from airflow_epochs.ui.dags import DagPipelines

pytestmark = [pytest.mark.integration, pytest.mark.slow]
TABLE = "epochs.page_daily"
PIPELINE = "page"


@pytest.fixture(scope="module")
def pg():
    from postgres_server import running_postgres

    with running_postgres("iceberg") as server:
        yield server


class CountingCatalog:
    """The real catalog, counting the calls the page makes on it."""

    def __init__(self, catalog) -> None:
        self.catalog = catalog
        self.calls: list[str] = []

    def __getattr__(self, name):
        attr = getattr(self.catalog, name)
        if name in ("list_namespaces", "list_tables", "load_table"):
            self.calls.append(name)
        return attr


class OneDag:
    """The DAG index of the page: one DAG, driving the pipeline."""

    def of(self, dag_ids):
        return {d: DagPipelines(d, frozenset({PIPELINE}), frozenset({"epoch.open"})) for d in dag_ids if d == "page"}

    def epoch_of_run(self, dag_id, run_id):
        return None


def test_the_page_shows_each_sealed_partitions_table_and_snapshot(zk, spark, tmp_path, pg, monkeypatch):
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from airflow_epochs.ui.app import create_app, published_from_environment

    settings = pg_catalog(pg, tmp_path / "warehouse")
    catalog = load_catalog(settings)
    ledger = new_pipeline(zk, PIPELINE)
    main = job_for()
    for epoch in (1, 2, 3):
        seal_epoch(zk, spark, ledger, tmp_path / "store", epoch, main)
    publish_sealed(ledger, catalog, TABLE, PARTITION, 2)  # epochs 1 and 2; 3 is sealed, not published
    table = catalog.load_table(TABLE)
    snapshots = {e: h.snapshot_of_epoch(table, e).snapshot_id for e in (1, 2)}
    assert snapshots[1] != snapshots[2]

    record = published_snapshot(catalog, TABLE, PIPELINE, PARTITION, 2, catalog_name="lake")
    assert record is not None and (record.table, record.snapshot_id) == (TABLE, snapshots[2])
    assert record.request == ledger.seal_record(2, PARTITION).request
    assert published_snapshot(catalog, TABLE, PIPELINE, PARTITION, 3) is None  # sealed, not published yet
    assert published_snapshot(catalog, TABLE, "other", PARTITION, 2) is None  # the table is another's

    counting, now = CountingCatalog(catalog), [1000.0]
    index = PublishedIndex({"lake": lambda: counting}, clock=lambda: now[0])
    app = create_app(ledgers=partial(ledger_on, zk), authorized_dag_ids=lambda user: {"page"}, dag_index=OneDag(),
                     published_index=index)  # type: ignore[arg-type]
    with TestClient(app) as client:
        app.dependency_overrides[get_user] = lambda: "alice"
        for epoch in (1, 2):
            [part] = client.get(f"/api/pipelines/{PIPELINE}/epochs/{epoch}").json()["partitions"]
            assert part["state"] == "sealed"
            assert [(p["catalog"], p["table"], p["snapshot_id"], p["epoch"]) for p in part["published"]] == \
                [("lake", TABLE, snapshots[epoch], epoch)]
        [part] = client.get(f"/api/pipelines/{PIPELINE}/epochs/3").json()["partitions"]
        assert part["state"] == "sealed" and part["published"] == []
        listing = list(counting.calls)
        assert listing.count("load_table") == 1  # one listing: the one table, loaded once
        # An open detail is polled every 2 s: the polls within the list's lifetime touch no catalog.
        for _ in range(10):
            for epoch in (1, 2, 3):
                client.get(f"/api/pipelines/{PIPELINE}/epochs/{epoch}").raise_for_status()
        assert counting.calls == listing
        # After the publish of epoch 3 the page shows it once the list (with the snapshots) is renewed.
        publish_sealed(ledger, catalog, TABLE, PARTITION, 3)
        [part] = client.get(f"/api/pipelines/{PIPELINE}/epochs/3").json()["partitions"]
        assert part["published"] == []
        now[0] += 61.0
        [part] = client.get(f"/api/pipelines/{PIPELINE}/epochs/3").json()["partitions"]
        assert [p["snapshot_id"] for p in part["published"]] == \
            [h.snapshot_of_epoch(catalog.load_table(TABLE), 3).snapshot_id]
        assert counting.calls.count("load_table") == 2  # one listing more, however many polls

    # The catalogs come from Iceberg connections named in the environment; none named: none contacted.
    monkeypatch.delenv("AIRFLOW_EPOCHS_UI_TABLE_CONN_IDS", raising=False)
    assert published_from_environment() is None
    conn = {"conn_type": "iceberg", "host": "127.0.0.1", "port": pg.port, "login": pg.user,
            "password": pg.password, "schema": "iceberg",
            "extra": {"catalog": "sql", "warehouse": (tmp_path / "warehouse").as_uri(), "name": settings.name}}
    monkeypatch.setenv("AIRFLOW_CONN_PAGE_LAKE", json.dumps(conn))
    monkeypatch.setenv("AIRFLOW_EPOCHS_UI_TABLE_CONN_IDS", "page_lake")
    from_env = published_from_environment()
    assert from_env is not None
    assert [p.snapshot_id for p in from_env.lookup(PIPELINE, PARTITION, 1)] == [snapshots[1]]


def test_a_catalog_that_cannot_be_read_is_asked_again_only_after_the_ttl():
    """Pure logic around the catalog: one that refuses (here its connection) leaves the column empty
    and is not asked again on every poll, only once the 60 s are over."""
    asked, now = [], [0.0]

    def unreachable():
        asked.append(now[0])
        raise OSError("connection refused")

    index = PublishedIndex({"lake": unreachable}, clock=lambda: now[0])
    for _ in range(5):
        assert index.lookup(PIPELINE, PARTITION, 1) == []
    assert asked == [0.0]
    now[0] = 61.0
    assert index.lookup(PIPELINE, PARTITION, 1) == [] and asked == [0.0, 61.0]
