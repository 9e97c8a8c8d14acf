"""The Airflow plugin that puts the Epochs page into Airflow's UI.

Registered through the ``airflow.plugins`` entry point (and the provider info's ``plugins``). It adds

- a FastAPI app at ``/epochs`` (the page and its JSON API; see :mod:`airflow_epochs.ui.app`);
- an "Epochs" item in the navigation, and an "Epochs" tab on DAG, DAG run and task instance pages
  that opens the matching pipeline (and, for a run, the epoch it worked on).

Every Airflow process loads plugins (scheduler, workers, triggerer), so this module stays light: the
app is built on its first request, which only the API server ever receives.
"""

from __future__ import annotations

import threading
from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_epochs.listeners import declared_producers

URL_PREFIX = "/epochs"


def _base_path() -> str:
    """The path part of ``[api] base_url`` (Airflow served under a sub-path), without a trailing slash."""
    from urllib.parse import urlparse

    from airflow.configuration import conf

    base_url = conf.get("api", "base_url", fallback="/") or "/"
    path = urlparse(base_url).path if base_url.startswith(("http://", "https://")) else base_url
    return path.rstrip("/")


class LazyApp:
    """An ASGI app that builds the Epochs FastAPI app on its first request."""

    def __init__(self) -> None:
        self._app: Any = None
        self._lock = threading.Lock()

    def _build(self) -> Any:
        with self._lock:
            if self._app is None:
                from airflow_epochs.ui.app import create_app

                self._app = create_app()
            return self._app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        app = self._app if self._app is not None else self._build()
        await app(scope, receive, send)


def _views() -> list[dict[str, Any]]:
    base = _base_path() + URL_PREFIX
    icon = f"{base}/static/epochs.svg"
    common = {"icon": icon, "icon_dark_mode": icon}
    return [
        {"name": "Epochs", "href": f"{base}/", "destination": "nav", "url_route": "epochs", "nav_top_level": True,
         **common},
        {"name": "Epochs", "href": f"{base}/?dag_id={{DAG_ID}}", "destination": "dag", "url_route": "epochs-dag",
         **common},
        {"name": "Epochs", "href": f"{base}/?dag_id={{DAG_ID}}&run_id={{RUN_ID}}", "destination": "dag_run",
         "url_route": "epochs-run", **common},
        {"name": "Epochs", "href": f"{base}/?dag_id={{DAG_ID}}&run_id={{RUN_ID}}&task_id={{TASK_ID}}",
         "destination": "task_instance", "url_route": "epochs-task", **common},
    ]


class EpochsPlugin(AirflowPlugin):
    """Epoch pipelines in Airflow's UI: frontier, leader, the epochs x partitions grid, barriers, timeline."""

    name = "epochs"
    fastapi_apps = [{"app": LazyApp(), "url_prefix": URL_PREFIX, "name": "Epochs"}]
    external_views = _views()
    listeners = [declared_producers]  # votes of declared producers (ordinary tasks), see its module
