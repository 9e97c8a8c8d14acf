"""The one factory of Airflow-side ledgers (no Airflow import: the command line uses it without
loading Airflow).

:meth:`~airflow_epochs.hooks.zookeeper.ZooKeeperHook.ledger` builds every ledger of a task, the page and
a table cut through it, on the hook's own client. Only two kinds of caller use :func:`ledger_on` on a
client of their own: the triggers (:func:`~airflow_epochs.triggers.lifecycle.session_ledger`: a
triggerer's triggers share one session per connection), and the command line (``airflow-epochs table
cut``), which reads outside any task. The views and the table cut take a ledger factory from their
caller instead of a client. Nothing else builds an :class:`~airflow_epochs.coordination.EpochLedger`
or calls :func:`ledger_on` (``tests/unit/test_wings.py`` holds it), so what every ledger is bound to
(client, owner, root) is decided here.
"""

from __future__ import annotations

from kazoo.client import KazooClient

from airflow_epochs.coordination.base.paths import DEFAULT_ROOT
from airflow_epochs.coordination.ledger import EpochLedger

__all__ = ["READER", "TRIGGERER", "ledger_on"]

READER = "epochs-ui"  # the owner of a reader's ledgers (the page, a table cut: they open and vote nothing)
TRIGGERER = "triggerer"  # the owner of a trigger's ledgers (they read, and apply barrier policies)


def ledger_on(client: KazooClient, pipeline: str, *, owner: str = "anonymous", root: str = DEFAULT_ROOT) -> EpochLedger:
    """The epoch ledger of ``pipeline`` on ``client`` (started, and owned by the caller: the ledger
    neither starts nor stops it).

    :param owner: identity recorded on the attempts the ledger opens (readers need none).
    :param root: the znode under which pipelines live.
    """
    return EpochLedger(client, pipeline, owner=owner, root=root)
