"""The Epochs page without a ledger factory of the test's: it reads through ledgers of the Airflow
connection's ``ZooKeeperHook`` (``$AIRFLOW_EPOCHS_UI_CONN_ID``, default ``zookeeper_default``), on two
sessions (the page's reads, the history's), both closed when the app stops."""

from __future__ import annotations

import pytest
from ui_helpers import PROBE, build_probe

from airflow_epochs.hooks.ledgers import READER
from airflow_epochs.ui.dags import DagPipelines

pytestmark = pytest.mark.integration


class _Index:
    def of(self, dag_ids):
        return {d: DagPipelines(d, frozenset({PROBE}), frozenset({"epoch.open"})) for d in dag_ids if d == "ui_probe"}

    def epoch_of_run(self, dag_id, run_id):
        return None


def test_the_page_ledgers_come_from_the_connections_hooks_on_two_sessions(zk, zk_connection, airflow_home):
    from airflow_epochs.ui.app import PageLedgers

    build_probe(zk)
    ledgers = PageLedgers()
    assert ledgers.conn_id == "zookeeper_default"
    page, history = ledgers.ledger(PROBE), ledgers.history_ledger(PROBE)
    assert page.owner == history.owner == READER
    assert page.client is not history.client  # a long history read never holds the grid's reads
    assert ledgers.ledger("another").client is page.client  # one session for every pipeline's page reads
    assert page.frontier() == history.frontier() == 3  # the connection's chroot: the test's pipeline
    ledgers.close()
    assert not page.client.connected and not history.client.connected


def test_the_page_serves_through_the_connection_and_closes_its_sessions_on_shutdown(
        zk, zk_connection, airflow_home, monkeypatch):
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from airflow_epochs.ui import app as page_app

    made: list[page_app.PageLedgers] = []

    class Recorded(page_app.PageLedgers):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(page_app, "PageLedgers", Recorded)
    build_probe(zk)
    app = page_app.create_app(authorized_dag_ids=lambda user: {"ui_probe"}, dag_index=_Index())  # type: ignore[arg-type]
    app.dependency_overrides[get_user] = lambda: "alice"
    with TestClient(app) as client:
        assert client.get(f"/api/pipelines/{PROBE}").json()["counts"]["sealed"] == 3
        assert client.get(f"/api/pipelines/{PROBE}/epochs/2").json()["row"]["state"] == "sealed"
        timeline = client.get(f"/api/pipelines/{PROBE}/timeline.svg")
        assert timeline.status_code == 200 and "<rect" in timeline.text
        (ledgers,) = made
        clients = [ledgers.ledger(PROBE).client, ledgers.history_ledger(PROBE).client]
        assert all(c.connected for c in clients)
    assert not any(c.connected for c in clients)  # the app's shutdown closed both hooks
