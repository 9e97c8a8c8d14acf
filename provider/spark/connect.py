"""Running an epoch job file on a Spark Connect server, in this process (the warm path).

Servers require a token (see :mod:`airflow_epochs.servers.embedded_spark_connect`). pyspark sends a token over
plain loopback gRPC only when the URL's host is literally ``localhost``: with ``127.0.0.1`` it
switches to TLS and retries for minutes against a plaintext server. :func:`client_url` therefore
names a loopback address ``localhost`` when the URL carries a token and does not ask for TLS.
"""

from __future__ import annotations

import contextlib
import os
import runpy
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import unquote

from airflow_epochs.coordination.base.errors import InvalidInput
from airflow_epochs.redaction import register_secret
from airflow_epochs.spark.context import EpochContext
from airflow_epochs.spark.job import run_epoch

_MODE = "SPARK_CONNECT_MODE_ENABLED"


@contextlib.contextmanager
def connect_mode() -> Iterator[None]:
    """Switch pyspark into "Connect mode" for the block only: ``pyspark.sql.functions`` build Connect
    columns only then, and pyspark's generic builder would leave it on for the rest of the process."""
    previous = os.environ.get(_MODE)
    os.environ[_MODE] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(_MODE, None)
        else:
            os.environ[_MODE] = previous


def url_params(url: str) -> dict[str, str]:
    """The ``;key=value`` parameters of a Spark Connect URL."""
    rest = url.partition("://")[2].partition("/")[2]
    return {key: value for key, _, value in (item.partition("=") for item in rest.split(";") if item)}


def client_url(url: str) -> str:
    """``url`` with a loopback IP host renamed ``localhost`` when it carries a token without TLS."""
    if not url.startswith("sc://"):
        raise InvalidInput(f"a Spark Connect URL starts with sc://, not {url.split('://')[0]!r}://")
    netloc, _, rest = url[len("sc://"):].partition("/")
    params = url_params(url)
    if "token" not in params or params.get("use_ssl", "").lower() == "true":
        return url
    host, port = (netloc[1:].partition("]")[0], netloc.rpartition("]:")[2]) if netloc.startswith("[") else \
        (netloc.rpartition(":")[0] or netloc, netloc.rpartition(":")[2])
    if host == "::1" or host.startswith("127."):
        return f"sc://localhost:{port}/{rest}" if port.isdigit() else f"sc://localhost/{rest}"
    return url


def load_main(application: str) -> Callable[[Any, Any], Any]:
    """The ``main(spark, job)`` of a job file (run as a module named ``airflow_epochs_job``)."""
    if not os.path.isfile(application):
        raise InvalidInput(f"Spark application {application!r} does not exist")
    with connect_mode():
        namespace = runpy.run_path(application, run_name="airflow_epochs_job")
    main = namespace.get("main")
    if not callable(main):
        raise InvalidInput(f"{application} defines no main(spark, job) function")
    return main  # type: ignore[no-any-return]


def run_file_on_connect(url: str, application: str, context: EpochContext, *,
                        on_session: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Run ``application``'s ``main`` for ``context`` on a fresh session of the server at ``url``.

    :param on_session: called with the session once it exists, and with None when it is closed (an
        operator keeps it to interrupt the job on kill).
    """
    # The Connect session class itself: the generic builder refuses when a classic session exists.
    from pyspark.sql.connect.session import SparkSession

    main = load_main(application)
    url = client_url(url)
    token = url_params(url).get("token")
    register_secret(token, unquote(token or ""))
    with connect_mode():
        session = SparkSession.builder.remote(url).create()
        if on_session is not None:
            on_session(session)
        try:
            return run_epoch(main, session, context)
        finally:
            if on_session is not None:
                on_session(None)
            session.stop()
