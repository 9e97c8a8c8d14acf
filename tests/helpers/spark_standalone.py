"""How :mod:`cluster_topology` closes a Spark standalone master's and workers' ports to everyone but us.

- RPC: ``spark.authenticate`` with the cluster's secret, so that every RPC connection (the master's, a
  worker's, an executor's block transfers) starts with a SASL handshake only a holder of the secret
  passes. Without it any local user could register an application, read the master's state or send a
  worker ``LaunchExecutor`` (a command run as our user). Executors get the secret from their worker in
  their environment, never on a command line (Spark's own ``ExecutorRunner``).
- Web UIs: Spark cannot turn a master's or worker's UI off, and the UI kills applications and
  decommissions workers on a POST from loopback. Every page is put behind Spark's ``JWSFilter``: a
  request without ``Authorization: Bearer <JWS>`` signed with the cluster's UI key gets 403.
- Binding: ``SPARK_LOCAL_IP=127.0.0.1`` (the UIs bind there) and ``--host 127.0.0.1`` (RPC); the
  master's REST submission server is off.

The secrets live in a 0600 properties file in each daemon's 0700 folder, passed with
``--properties-file``: never on a command line.
"""

from __future__ import annotations

import base64
import secrets
import urllib.error
import urllib.request

JWS_FILTER = "org.apache.spark.ui.JWSFilter"


def new_ui_key() -> str:
    """A 256-bit HMAC key for the UIs' ``JWSFilter``, base64url-encoded as Spark reads it."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")


def daemon_properties(secret: str, ui_key: str) -> str:
    """The properties file of a master or worker (and what an application must match: the secret)."""
    return "\n".join([
        "spark.authenticate=true",
        f"spark.authenticate.secret={secret}",
        "spark.master.rest.enabled=false",
        f"spark.ui.filters={JWS_FILTER}",
        f"spark.{JWS_FILTER}.param.secretKey={ui_key}",
        # an application that names no core count takes one core, not all of them: the Connect server and
        # spark-submit's epoch jobs share the cluster
        "spark.deploy.defaultCores=1",
        "",
    ])


def ui_token(ui_key: str) -> str:
    """A JWS the UIs' filter accepts (HS256 over the key)."""
    import jwt

    padded = ui_key + "=" * (-len(ui_key) % 4)
    return str(jwt.encode({"sub": "airflow-epochs"}, base64.urlsafe_b64decode(padded), algorithm="HS256"))


def ui_get(port: int, path: str = "/json/", token: str | None = None, timeout: float = 20) -> tuple[int, bytes]:
    """(HTTP status, body) of ``GET http://127.0.0.1:port/path``, with the bearer token if given."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as refused:
        return int(refused.code), refused.read()
