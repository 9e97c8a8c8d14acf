"""The secrets every process of one Airflow deployment must share, generated once per deployment.

Airflow 3.3 makes up each of these itself when it is not configured, per process: the Fernet key
(``[core] fernet_key``, written into a new ``airflow.cfg`` by whichever process finds none first, so
processes started together in a new home can each pick their own), the JWT secret the API server and
the task and trigger runners sign and check execution tokens with (``[api_auth] jwt_secret``), and the
API's ``[api] secret_key`` (log server tokens, sessions). Two processes on different keys fail in ways
that depend on timing: a trigger runner that cannot decrypt a trigger's kwargs (``Trigger._decrypt_kwargs``:
``JSONDecodeError`` after "empty cryptography key"), a task or log request refused. Airflow 3 has no
internal API any more, so there is no internal-API secret to share.

The values are handed to the processes in their environment (readable only by their own user) and
never printed; ``SECRET_NAMES`` lets a caller check that a log holds none of them.
"""

from __future__ import annotations

import base64
import secrets

SECRET_NAMES = ("AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY")


def deployment_secrets() -> dict[str, str]:
    """New values for every secret in :data:`SECRET_NAMES`, as environment variables."""
    return {
        # a Fernet key is 32 random bytes in URL-safe base64 (what Fernet.generate_key() returns)
        "AIRFLOW__CORE__FERNET_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii"),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
    }
