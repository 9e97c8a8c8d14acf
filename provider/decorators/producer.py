"""``@task.epoch_producer``: a Python producer of a partition whose returned manifest is its vote.

::

    with EpochGroup("epoch", pipeline="shop", inline_stages=True) as epoch:

        @task.epoch_producer(partition="orders")
        def orders_eu(data_interval_start=None) -> dict:
            rows = load_orders("eu", data_interval_start)   # your work
            return {"rows": rows}                            # the manifest: what the producer wrote

The function runs once the epoch is open (inside the group's attempt); what it returns (a mapping, or
None for an empty manifest) is voted as producer ``producer`` (default: the task id) of ``partition``,
and is the task's XCom. A retry after the vote landed runs the function again and votes nothing new.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk.bases.decorator import DecoratedOperator, TaskDecorator, task_decorator_factory
from airflow.sdk.exceptions import AirflowFailException

from airflow_epochs.coordination import DEFAULT_ROOT
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.operators.epoch import attempt_from_xcom, cast_vote
from airflow_epochs.operators.group import current_open_task_id
from airflow_epochs.operators.stages import EpochStage
from airflow_epochs.retries import with_retry_defaults

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["EpochProducerOperator", "epoch_producer_task"]


class EpochProducerOperator(DecoratedOperator, EpochStage, PythonOperator):
    """The operator behind ``@task.epoch_producer``.

    :param partition: the partition it produces (templated).
    :param producer: the producer it votes as (templated; default: the task id).
    :param snapshot: a snapshot pointer this epoch leaves for the next (templated).
    :param attempt_task_id: the task that opened the epoch; defaults to the enclosing EpochGroup's.
    """

    custom_operator_name = "@task.epoch_producer"
    template_fields: Sequence[str] = (*PythonOperator.template_fields, "partition", "producer", "snapshot")

    def __init__(self, *, python_callable: Callable[..., Any], partition: str, producer: str | None = None,
                 snapshot: Any = None, attempt_task_id: str | None = None,
                 zookeeper_conn_id: str = ZooKeeperHook.default_conn_name, root: str = DEFAULT_ROOT,
                 op_args: Sequence[Any] | None = None, op_kwargs: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(kwargs_to_upstream={"python_callable": python_callable, "op_args": op_args,
                                             "op_kwargs": op_kwargs},
                         python_callable=python_callable, op_args=op_args, op_kwargs=op_kwargs,
                         **with_retry_defaults(kwargs))
        self.partition = partition
        self.producer = producer or self.task_id.rsplit(".", 1)[-1]
        self.snapshot = snapshot
        self.attempt_task_id = attempt_task_id or current_open_task_id()
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root

    def execute(self, context: Context) -> Any:
        attempt = attempt_from_xcom(context, self.attempt_task_id)
        if (absent := self.not_taking_part(context, attempt)) is not None:
            return absent
        manifest = super().execute(context)  # the function, in this worker
        if manifest is not None and not isinstance(manifest, Mapping):
            raise AirflowFailException(f"{self.task_id}: an epoch producer returns its manifest (a mapping of what "
                                       f"it wrote) or None, not {type(manifest).__name__} {manifest!r}")
        self.coordinated(lambda: cast_vote(self.log, attempt, self.partition, self.producer, dict(manifest or {}),
                                           self.snapshot, zookeeper_conn_id=self.zookeeper_conn_id, root=self.root),
                         what=f"epoch {attempt.epoch}: vote of {self.producer} on {self.partition}")
        return manifest


def epoch_producer_task(python_callable: Callable[..., Any] | None = None, multiple_outputs: bool | None = None,
                        **kwargs: Any) -> TaskDecorator:
    """``@task.epoch_producer(partition=..., producer=None)``: see :class:`EpochProducerOperator`."""
    return task_decorator_factory(python_callable=python_callable, multiple_outputs=multiple_outputs,
                                  decorated_operator_class=EpochProducerOperator, **kwargs)
