"""What makes our catalog commits exactly once: one publisher of a table at a time, and no commit that
the catalog client re-applies by itself.

- **The publish lock**: a ZooKeeper lock of the pipeline (:meth:`EpochLedger.lock`) whose name is keyed
  by the catalog and the table, held from "what does the table have" to the last commit of a publish,
  a rollback mirror or a repair. Publishers of one table queue on it; the second finds the first's
  snapshots and adds nothing. A table belongs to one pipeline's partition (a second pipeline is refused
  by :func:`airflow_epochs.tables.history.check_owner`), so the pipeline's lock space is the right one.
- **No client retry**: pyiceberg retries a commit refused for a concurrent update by itself
  (``commit.retry.num-retries``, default 4), re-applying the append on top of the winner without
  validating it: a second snapshot of the same epoch. Our tables carry ``commit.retry.num-retries=0``
  (set at creation, checked and set at every publish), so a refused commit reaches the publisher, which
  reads the table again and finds the winner's snapshot by its summary properties. The lock alone is
  not the guarantee: a ZooKeeper session can expire under a holder; the catalog's compare-and-swap with
  no retry still is.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.tables.seal_files import PublishRefused

log = logging.getLogger(__name__)

NUM_RETRIES = "commit.retry.num-retries"  # pyiceberg's TableProperties.COMMIT_NUM_RETRIES
NO_RETRIES = {NUM_RETRIES: "0"}
LOCK_PREFIX = "publish-"
LOCK_TIMEOUT_S = 120.0  # a publish of many epochs holds it for a while; a dead holder's node goes with its session
_USERINFO = re.compile(r"//[^/@]*@")


def catalog_identity(catalog: Any) -> str:
    """Which catalog this is, the same for every client of it: its name, its URI without credentials
    and its warehouse (a SQL catalog keys its tables by name; a password change keeps the identity)."""
    properties = getattr(catalog, "properties", {}) or {}
    uri = _USERINFO.sub("//", str(properties.get("uri", "")))
    return f"{getattr(catalog, 'name', '')}|{uri}|{properties.get('warehouse', '')}"


def publish_lock_name(catalog: Any, identifier: str) -> str:
    """The lock resource of ``identifier`` in ``catalog`` (a digest: URIs hold characters a name cannot)."""
    digest = hashlib.sha256(f"{catalog_identity(catalog)}|{identifier}".encode()).hexdigest()[:24]
    return f"{LOCK_PREFIX}{digest}"


def publish_lock(ledger: EpochLedger, catalog: Any, identifier: str, *,
                 timeout: float = LOCK_TIMEOUT_S) -> AbstractContextManager[None]:
    """Hold the publish lock of ``identifier`` for a ``with`` block.

    :raises LockTimeout: another publisher held it for ``timeout`` seconds (retryable).
    """
    return ledger.lock(publish_lock_name(catalog, identifier), timeout=timeout)


def commit_failed() -> type[Exception]:
    """pyiceberg's exception for a commit the catalog refused (a concurrent update): nothing landed."""
    from pyiceberg.exceptions import CommitFailedException

    return CommitFailedException


def without_client_retries(table: Any, reload: Callable[[], Any], where: str) -> Any:
    """``table`` once it carries ``commit.retry.num-retries=0`` (set now, in its own commit, on a table
    created before we set it); call under the publish lock."""
    for _ in range(3):
        if table.properties.get(NUM_RETRIES) == "0":
            return table
        try:
            with table.transaction() as txn:
                txn.set_properties(NO_RETRIES)
            log.info("%s: pyiceberg's own commit retry turned off (%s=0)", where, NUM_RETRIES)
        except commit_failed():  # someone else committed meanwhile: read it again
            pass
        table = reload()
    if table.properties.get(NUM_RETRIES) != "0":
        raise PublishRefused(f"{where}: could not set {NUM_RETRIES}=0 on the table; nothing was published")
    return table
