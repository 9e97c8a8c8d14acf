"""``@task.spark_epoch``: a producer's Spark job of an epoch, as a TaskFlow task.

Two forms. With ``application=``, the job file (``main(spark, job)``, as for
:class:`~airflow_epochs.operators.SparkEpochOperator`); the function runs first, in the worker, and returns
the job's inputs (a mapping of name to location, or None)::

    @task.spark_epoch(partition="flights", application="jobs/flights.py", storage=LAKE)
    def clean_flights(ds=None) -> dict:
        return {"raw": f"{RAW}/flights/day={ds}"}

Without ``application``, the function *is* the job, ``main(spark, job)``: it runs in the worker on a
session of the Spark Connect connection ``spark_connect_conn_id`` (a function cannot be handed to
``spark-submit``), with the inputs given as ``inputs=``::

    @task.spark_epoch(partition="totals", storage=LAKE, spark_connect_conn_id="spark_connect_default",
                      sealed_inputs={"flights": "flights"})
    def totals(spark, job):
        job.write(spark.read.parquet(*job.input("flights")).groupBy("carrier").count())

Everything else is the operator's: the checks before anything runs, the partition's write lock, the vote
of the manifest, a retry that runs nothing after the vote landed, the table publish, lineage. The producer
defaults to the task id (the function's name).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.bases.decorator import DecoratedOperator, TaskDecorator, task_decorator_factory
from airflow.sdk.exceptions import AirflowFailException

from airflow_epochs.coordination import InvalidInput
from airflow_epochs.hooks.spark_epoch import SparkEpochHook
from airflow_epochs.operators.spark import SparkEpochOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_epochs.spark.context import EpochContext

__all__ = ["FunctionSparkEpochHook", "SparkEpochDecoratedOperator", "spark_epoch_task"]

#: Parameters of a job function that the job's run fills in, not the task's caller.
JOB_ARGS = ("spark", "job")


class FunctionSparkEpochHook(SparkEpochHook):
    """A :class:`SparkEpochHook` whose job is a function of this process, run on a Spark Connect session."""

    def __init__(self, *, main: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.main = main

    def check_inputs(self, storage: str, inputs: Mapping[str, str]) -> None:
        if not self.spark_connect_conn_id:
            raise InvalidInput(f"the job {self.main.__name__}() is a function: it runs on a Spark Connect session, "
                               "so give spark_connect_conn_id (or application=, a job file, for spark-submit)")
        super().check_inputs(storage, inputs)

    def run_spark_submit(self, job_context: EpochContext) -> None:
        raise InvalidInput(f"the job {self.main.__name__}() is a function and cannot be submitted with spark-submit")

    def run_on_connect(self, job_context: EpochContext) -> dict[str, Any]:
        from urllib.parse import unquote

        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

        from airflow_epochs.redaction import register_secret
        from airflow_epochs.spark.connect import connect_mode, open_session, url_params
        from airflow_epochs.spark.job import run_epoch

        url = SparkConnectHook(conn_id=self.spark_connect_conn_id or "").get_connection_url()
        token = url_params(url).get("token")
        register_secret(token, unquote(token or ""))
        with connect_mode():
            session = open_session(url)
            self._keep_session(session)
            try:
                return run_epoch(self.main, session, job_context)
            finally:
                self._keep_session(None)
                session.stop()


class SparkEpochDecoratedOperator(DecoratedOperator, SparkEpochOperator):
    """The operator behind ``@task.spark_epoch`` (see the module's description).

    :param application: the job file; None: the decorated function is the job.
    """

    custom_operator_name = "@task.spark_epoch"
    template_fields: Sequence[str] = (*SparkEpochOperator.template_fields, "op_args", "op_kwargs")

    def __init__(self, *, python_callable: Callable[..., Any], application: str | None = None,
                 producer: str | None = None, op_args: Sequence[Any] | None = None,
                 op_kwargs: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.job_function = application is None
        if self.job_function:
            signature = inspect.signature(python_callable)
            missing = [name for name in JOB_ARGS if name not in signature.parameters]
            if missing:
                raise ValueError(f"@task.spark_epoch without application=: {python_callable.__name__}() is the job "
                                 f"and takes (spark, job); it has no {missing}")
            python_callable.__signature__ = signature.replace(parameters=[  # type: ignore[attr-defined]
                p.replace(default=None) if p.name in JOB_ARGS else p for p in signature.parameters.values()])
            # For the checks and the logs: the file the function is defined in (never submitted).
            application = inspect.getsourcefile(python_callable) or os.devnull
        super().__init__(python_callable=python_callable, op_args=op_args, op_kwargs=op_kwargs,
                         application=application, producer=producer or kwargs["task_id"].rsplit(".", 1)[-1],
                         **kwargs)

    def _get_hook(self) -> SparkEpochHook:
        if not self.job_function:
            return super()._get_hook()
        if self._hook is None:
            self._hook = FunctionSparkEpochHook(
                main=self.python_callable, application=self.application, conn_id=self.conn_id,
                spark_connect_conn_id=self.spark_connect_conn_id, zookeeper_conn_id=self.zookeeper_conn_id,
                root=self.root)
        return self._hook

    def function_inputs(self, context: Mapping[str, Any]) -> dict[str, str]:
        """With a job file: the inputs the function returns for ``context`` (none for a job function)."""
        if self.job_function:
            return {}
        returned = self.python_callable(*self.op_args, **self.determine_kwargs(context))
        if returned is None:
            return {}
        if not isinstance(returned, Mapping) or not all(isinstance(v, str) for v in returned.values()):
            raise AirflowFailException(f"{self.task_id}: the function of a @task.spark_epoch with application= returns "
                                       f"the job's inputs (name -> location) or None, not {returned!r}")
        return {str(k): v for k, v in returned.items()}

    def execute(self, context: Context) -> Any:
        if self.job_function and not self.spark_connect_conn_id:
            raise AirflowFailException(f"{self.task_id}: the job is the function {self.python_callable.__name__}(), "
                                       "which runs on a Spark Connect session: give spark_connect_conn_id (or "
                                       "application=, a job file, for spark-submit)")
        self.inputs = {**self.inputs, **self.function_inputs(context)}
        return SparkEpochOperator.execute(self, context)


def spark_epoch_task(python_callable: Callable[..., Any] | None = None, multiple_outputs: bool | None = None,
                     **kwargs: Any) -> TaskDecorator:
    """``@task.spark_epoch(partition=..., storage=..., application=None, ...)``: see
    :class:`SparkEpochDecoratedOperator`."""
    return task_decorator_factory(python_callable=python_callable, multiple_outputs=multiple_outputs,
                                  decorated_operator_class=SparkEpochDecoratedOperator, **kwargs)
