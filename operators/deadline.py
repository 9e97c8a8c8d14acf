"""WatchDeadlineOperator: watch one partition of one epoch against its declared deadline, in the
triggerer, and run an Airflow callback with the alert if it is late (exactly once across
triggerers and deployments: the core's claim decides who alerts)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.definitions.callback import Callback
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_epochs.coordination import DEFAULT_ROOT, validate_name
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.retries import templated_epoch
from airflow_epochs.triggers.deadlines import PartitionDeadlineTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context


class WatchDeadlineOperator(BaseOperator):
    """Defer until ``partition`` of ``epoch`` is sealed in time, sealed late, or late; when late, the
    one watcher that raises the alert runs ``callback`` with ``alert=...`` (the missing producers, each
    one's predicted vote time and last vote). Returns the trigger's verdict; with ``fail_if_late`` the
    task fails when the partition missed its deadline.

    :param pipeline: pipeline name (templated).
    :param epoch: the epoch (templated).
    :param partition: the partition (templated); its deadline is declared in the ledger.
    :param callback: an Airflow ``AsyncCallback`` (or ``SyncCallback``: run in a thread of the
        triggerer), or the dotted path of a callable.
    :param callback_kwargs: keyword arguments for a callback given by path.
    :param fail_if_late: fail the task when the partition is late (default False: the callback is the alert).
    :param wait_for_seal: after the alert, go on watching until the partition seals and record how late it
        was (default True); False: the task completes once the alert is delivered.
    :param zookeeper_conn_id: ZooKeeper connection.
    :param root: znode under which pipelines live.
    :param timeout: seconds the watch may take before the task fails (None: no limit).
    """

    template_fields: Sequence[str] = ("pipeline", "epoch", "partition")

    def __init__(self, *, pipeline: str, epoch: int | str, partition: str, callback: Callback | str,
                 callback_kwargs: dict[str, Any] | None = None, fail_if_late: bool = False, wait_for_seal: bool = True,
                 zookeeper_conn_id: str = ZooKeeperHook.default_conn_name, root: str = DEFAULT_ROOT,
                 timeout: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.epoch = epoch
        self.partition = partition
        if isinstance(callback, Callback):
            self.callback_path, self.callback_kwargs = callback.path, {**callback.kwargs, **(callback_kwargs or {})}
        elif isinstance(callback, str) and callback.strip():
            self.callback_path, self.callback_kwargs = callback.strip(), dict(callback_kwargs or {})
        else:
            raise ValueError(f"callback must be an Airflow Callback or a dotted path, not {callback!r}")
        self.fail_if_late = fail_if_late
        self.wait_for_seal = wait_for_seal
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.watch_timeout = timeout

    def execute(self, context: Context) -> Any:
        trigger = PartitionDeadlineTrigger(
            pipeline=self.pipeline, epoch=templated_epoch(self.epoch), partition=validate_name("partition",
                                                                                                self.partition),
            callback_path=self.callback_path, callback_kwargs=self.callback_kwargs,
            zookeeper_conn_id=self.zookeeper_conn_id, root=self.root, wait_for_seal=self.wait_for_seal)
        self.defer(trigger=trigger, method_name="execute_complete",
                   timeout=None if self.watch_timeout is None else timedelta(seconds=self.watch_timeout))

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != "success":
            raise AirflowException(f"{self.task_id}: the deadline watch reported {event}")
        self.log.info("Pipeline %s, partition %s of epoch %s: %s (deadline %s)", self.pipeline, event["partition"],
                      event["epoch"], event["state"], event["deadline_at"])
        if self.fail_if_late and event["state"] in ("late", "sealed_late"):
            raise AirflowFailException(f"{self.task_id}: partition {event['partition']!r} of epoch {event['epoch']} "
                                       f"missed its deadline: {event.get('alert')}")
        return event
