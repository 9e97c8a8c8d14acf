"""The Epochs page and its JSON API: a FastAPI app that Airflow's API server mounts (``/epochs``).

Every route depends on Airflow's own authentication (``requires_authenticated()``: the JWT of the UI
session cookie or a bearer token), and a user sees a pipeline only if they may read a DAG that
drives it (``get_auth_manager().get_authorized_dag_ids``); anything else is answered as if it did not
exist. The app only reads ZooKeeper, through :mod:`airflow_epochs.views.pipeline` and ledgers from
:class:`~airflow_epochs.hooks.zookeeper.ZooKeeperHook`, on one kazoo session per API server process
(and one more for reading the history).

Routes (all GET, under the mount prefix)::

    /                                       the page (query: pipeline, dag_id, run_id, task_id, epoch)
    /api/pipelines?dag_id=                  the pipelines this user may see, each with its DAGs
    /api/pipelines/{p}                      frontier, leader, epoch in flight, lag, counts, live barriers
    /api/pipelines/{p}/epochs               a grid page (offset, limit, state=sealed,voting,..., before)
    /api/pipelines/{p}/epochs/{e}           one epoch: votes, manifests, seals, snapshots, lineage, attempts
    /api/pipelines/{p}/epochs/{e}/barriers  the barriers of an epoch
    /api/pipelines/{p}/timeline.svg         each recent epoch's stages on a time axis
    /api/runs/{dag_id}/{run_id}             the pipeline and epoch a DAG run worked on
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

from airflow.api_fastapi.core_api.security import GetUserDep, requires_authenticated
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from kazoo.exceptions import NoAuthError

from airflow_epochs.coordination import (
    DEFAULT_ROOT,
    AccessDenied,
    CoordinationUnavailable,
    CorruptPayload,
    EpochLedger,
    EpochsError,
    InvalidInput,
    PipelineNotFound,
)
from airflow_epochs.hooks.ledgers import READER
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.ui.dags import DagIndex
from airflow_epochs.views.model import STATES, as_json
from airflow_epochs.views.pipeline import LedgerFactory, StateReader

if TYPE_CHECKING:
    from airflow_epochs.tables.published import PublishedIndex

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
CONN_ENV = "AIRFLOW_EPOCHS_UI_CONN_ID"
DEFAULT_CONN_ID = "zookeeper_default"


class PageLedgers:
    """The page's ledgers, all from :meth:`ZooKeeperHook.ledger
    <airflow_epochs.hooks.zookeeper.ZooKeeperHook.ledger>` on the Airflow connection named by
    ``$AIRFLOW_EPOCHS_UI_CONN_ID`` (default ``zookeeper_default``): two hooks, so two sessions for the
    process, each opened on first use: one for the page's reads, one for bulk history reads (ZooKeeper
    answers a session's requests in order: a long history read must not hold the grid's reads).

    :param conn_id: the connection (default: the environment's, or ``zookeeper_default``).
    :param root: the znode under which pipelines live.
    """

    def __init__(self, conn_id: str | None = None, *, root: str = DEFAULT_ROOT) -> None:
        self.conn_id = conn_id or os.environ.get(CONN_ENV) or DEFAULT_CONN_ID
        self.root = root
        self._reads = ZooKeeperHook(self.conn_id)
        self._history = ZooKeeperHook(self.conn_id)
        self._lock = threading.Lock()  # a hook connects on first use: two first requests, one session

    def ledger(self, pipeline: str) -> EpochLedger:
        """``pipeline``'s ledger for the page's reads."""
        with self._lock:
            return self._reads.ledger(pipeline, owner=READER, root=self.root)

    def history_ledger(self, pipeline: str) -> EpochLedger:
        """``pipeline``'s ledger for reading its recorded history, on the second session."""
        with self._lock:
            return self._history.ledger(pipeline, owner=READER, root=self.root)

    def close(self) -> None:
        with self._lock:
            try:
                self._reads.close()
            finally:
                self._history.close()


def published_from_environment() -> PublishedIndex | None:
    """The catalogs named by ``$AIRFLOW_EPOCHS_UI_TABLE_CONN_IDS``, or None (none named, or no ``tables`` extra)."""
    if not os.environ.get("AIRFLOW_EPOCHS_UI_TABLE_CONN_IDS", "").strip():
        return None
    try:
        from airflow_epochs.tables.published import PublishedIndex
    except ImportError as exc:
        log.warning("Epochs page: tables are not shown (%s); install the tables extra", exc)
        return None
    return PublishedIndex.from_environment()


def _authorized_dag_ids(user: Any) -> set[str]:
    from airflow.api_fastapi.app import get_auth_manager

    return set(get_auth_manager().get_authorized_dag_ids(user=user, method="GET"))


def create_app(
    *,
    ledgers: LedgerFactory | None = None,
    authorized_dag_ids: Callable[[Any], set[str]] = _authorized_dag_ids,
    dag_index: DagIndex | None = None,
    published_index: PublishedIndex | None = None,
) -> FastAPI:
    """Build the app.

    :param ledgers: a pipeline's ledger, to read it through (default: :class:`PageLedgers`, from the
        Airflow connection's hooks).
    :param authorized_dag_ids: the DAG ids a user may read (default: Airflow's auth manager).
    :param dag_index: which pipelines each DAG drives (default: from the serialized DAGs).
    :param published_index: where the epoch detail finds each sealed partition's table and snapshot
        (default: the Iceberg connections named by ``$AIRFLOW_EPOCHS_UI_TABLE_CONN_IDS``, if any).
    """
    session = PageLedgers() if ledgers is None else None
    if session is not None:
        reader = StateReader(session.ledger, history_ledgers=session.history_ledger)
    else:
        assert ledgers is not None
        reader = StateReader(ledgers)
    index = dag_index or DagIndex()
    tables = published_index or published_from_environment()

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        reader.close()
        if session is not None:
            session.close()

    app = FastAPI(title="Epochs", description=__doc__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url="/openapi.json", dependencies=[Depends(requires_authenticated())])
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    def visible(user: Any) -> dict[str, list[str]]:
        """pipeline -> the DAGs driving it that ``user`` may read."""
        found: dict[str, list[str]] = {}
        for dag_id, item in index.of(authorized_dag_ids(user)).items():
            for pipeline in item.pipelines:
                found.setdefault(pipeline, []).append(dag_id)
        return {p: sorted(d) for p, d in sorted(found.items())}

    def allowed(user: Any, pipeline: str) -> None:
        if pipeline not in visible(user):
            # The same answer as for a pipeline that does not exist: no hint that it does.
            raise HTTPException(404, f"no pipeline {pipeline!r} among the DAGs you may read")

    @app.exception_handler(PipelineNotFound)
    async def _missing(_request: Request, exc: PipelineNotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(CoordinationUnavailable)
    async def _unavailable(_request: Request, exc: CoordinationUnavailable) -> JSONResponse:
        return JSONResponse({"detail": f"ZooKeeper unavailable: {exc}"}, status_code=503)

    @app.exception_handler(InvalidInput)
    async def _bad_input(_request: Request, exc: InvalidInput) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    @app.exception_handler(NoAuthError)
    @app.exception_handler(AccessDenied)
    async def _no_auth(_request: Request, _exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": "ZooKeeper refused this page's connection (NoAuth): the pipeline is "
                             "protected by an ACL the UI's connection holds no credentials for"}, status_code=403)

    @app.exception_handler(CorruptPayload)
    async def _corrupt(_request: Request, exc: CorruptPayload) -> JSONResponse:
        return JSONResponse({"detail": f"corrupt record: {' '.join(str(exc).split())[:400]}", "kind": exc.kind},
                            status_code=422)

    @app.exception_handler(EpochsError)
    async def _epochs_error(_request: Request, exc: EpochsError) -> JSONResponse:
        return JSONResponse({"detail": f"{type(exc).__name__}: {exc}", "kind": exc.kind},
                            status_code=503 if exc.retryable else 500)

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    @app.get("/api/pipelines")
    def pipelines(user: GetUserDep, dag_id: str | None = None) -> dict[str, Any]:
        found = visible(user)
        if dag_id is not None:
            found = {p: dags for p, dags in found.items() if dag_id in dags}
        return {"pipelines": [{"pipeline": p, "dags": dags, **existence(p)} for p, dags in found.items()]}

    def existence(pipeline: str) -> dict[str, Any]:
        """Whether one pipeline exists; one that cannot be read is reported as such, never failing the list."""
        try:
            return {"exists": reader.pipeline(pipeline).exists()}
        except (NoAuthError, AccessDenied):
            return {"exists": None, "error": "NoAuth: this page's ZooKeeper connection may not read it"}
        except EpochsError as exc:
            return {"exists": None, "error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"}

    @app.get("/api/pipelines/{pipeline}")
    def overview(pipeline: str, user: GetUserDep) -> dict[str, Any]:
        allowed(user, pipeline)
        return cast(dict[str, Any], as_json(reader.pipeline(pipeline).overview()))  # a dataclass: a dict

    @app.get("/api/pipelines/{pipeline}/epochs")
    def grid(
        pipeline: str,
        user: GetUserDep,
        offset: Annotated[int, Query(ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        state: Annotated[str, Query(description=f"comma-separated: {', '.join(STATES)}")] = "",
        before: Annotated[int | None, Query(ge=0)] = None,
    ) -> dict[str, Any]:
        allowed(user, pipeline)
        states = [s for s in state.split(",") if s]
        try:
            page = reader.pipeline(pipeline).grid(offset=offset, limit=limit, states=states, before=before)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None
        return cast(dict[str, Any], as_json(page))  # a dataclass: a dict

    @app.get("/api/pipelines/{pipeline}/epochs/{epoch}")
    def epoch_detail(pipeline: str, epoch: Annotated[int, PathParam(ge=1)], user: GetUserDep) -> dict[str, Any]:
        allowed(user, pipeline)
        detail = reader.pipeline(pipeline).epoch_detail(epoch)
        if detail is None:
            raise HTTPException(404, f"pipeline {pipeline!r} has no epoch {epoch}")
        if tables is not None:
            return tables.annotate(pipeline, detail)
        return cast(dict[str, Any], as_json(detail))  # a dataclass: a dict

    @app.get("/api/pipelines/{pipeline}/epochs/{epoch}/barriers")
    def barriers(pipeline: str, epoch: Annotated[int, PathParam(ge=1)], user: GetUserDep) -> dict[str, Any]:
        allowed(user, pipeline)
        return {"barriers": as_json(reader.pipeline(pipeline).barriers(epoch))}

    @app.get("/api/pipelines/{pipeline}/timeline.svg")
    def timeline(pipeline: str, user: GetUserDep, epochs: Annotated[int, Query(ge=1, le=60)] = 14) -> Response:
        from airflow_epochs.views.timeline import render_svg

        allowed(user, pipeline)
        found = reader.pipeline(pipeline).timeline(epochs)
        if found:
            body = render_svg(found)
        else:  # loading is not "nothing recorded": the page asks again soon while it loads
            text = "loading the recorded history..." if found is None else "no recorded stages yet"
            body = ('<svg xmlns="http://www.w3.org/2000/svg" width="400" height="30"><text x="4" y="20" '
                    f'font-family="sans-serif" font-size="12">{text}</text></svg>')
        headers = {"Cache-Control": "no-store", "X-Epochs-History": "loading" if found is None else "loaded"}
        return Response(body, media_type="image/svg+xml", headers=headers)

    @app.get("/api/runs/{dag_id}/{run_id}")
    def run_epoch(dag_id: str, run_id: str, user: GetUserDep) -> dict[str, Any]:
        if dag_id not in authorized_dag_ids(user):
            raise HTTPException(404, f"no DAG {dag_id!r} among the DAGs you may read")
        found = index.epoch_of_run(dag_id, run_id)
        if found is None:
            raise HTTPException(404, f"run {run_id!r} of {dag_id!r} has not opened an epoch")
        return {"pipeline": found[0], "epoch": found[1]}

    return app
