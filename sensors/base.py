"""Shared shape of the sensors: poke with the trigger's own check, or defer to the trigger."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue, conf
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout, AirflowSkipException

from airflow_epochs.coordination import DEFAULT_ROOT, EpochLedger, PipelineNotFound
from airflow_epochs.coordination.state.roots import pipeline_names
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.retries import CoordinationRetries, templated_epoch, with_retry_defaults
from airflow_epochs.triggers.base import ZooKeeperWatchTrigger
from airflow_epochs.triggers.notices import MAX_NAMED, NOTICE_EVERY

__all__ = ["ZooKeeperTriggerSensor", "templated_epoch"]

if TYPE_CHECKING:
    from airflow.sdk import Context


class ZooKeeperTriggerSensor(CoordinationRetries, BaseSensorOperator):
    """A sensor whose condition is a :class:`ZooKeeperWatchTrigger`'s ``check``.

    Poke mode runs the check on a short-lived client; deferrable mode checks once and then hands the
    wait to the trigger, which sleeps on ZooKeeper watches in the triggerer.

    A wait that cannot end is said, not only timed out: a pipeline that does not exist is logged (naming
    the pipelines that do) at the first check and every few minutes, by the poke or by the trigger; a wait
    that can never be met (a partition the epoch's fixed configuration does not have) fails at once,
    naming the value and the valid ones (:meth:`diagnose`).

    :param zookeeper_conn_id: ZooKeeper connection.
    :param root: znode under which pipelines live.
    :param deferrable: wait in the triggerer instead of occupying a worker slot (default: Airflow's
        ``[operators] default_deferrable``, as for Airflow's own sensors).
    """

    def __init__(
        self,
        *,
        zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
        root: str = DEFAULT_ROOT,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.deferrable = deferrable
        self._next_notice = 0.0  # when the next notice of a wait that may not end is due (monotonic)

    def build_trigger(self) -> ZooKeeperWatchTrigger:
        raise NotImplementedError

    def pipeline_name(self) -> str | None:
        """The pipeline this sensor waits on (for :meth:`diagnose`); None when it has none."""
        pipeline = getattr(self, "pipeline", None)
        return str(pipeline) if pipeline is not None else None

    def diagnose(self, ledger: EpochLedger) -> str | None:
        """Why the wait may never end, in one line (logged), or None; raise
        :class:`~airflow.sdk.exceptions.AirflowFailException` for a wait that cannot end. The default says a
        missing pipeline; a sensor that names partitions checks them too."""
        try:
            ledger.frontier()
        except PipelineNotFound:
            root = ledger.paths.root
            names = pipeline_names(ledger.client, root)
            there = (f"pipelines there: {', '.join(names[:MAX_NAMED])}{' ...' if len(names) > MAX_NAMED else ''}"
                     if names else "no pipeline exists there yet")
            return (f"{self.task_id}: waiting for {self.waiting_for()}, but pipeline {ledger.pipeline!r} does not "
                    f"exist under {root} ({there}); a typo in its name waits until the timeout "
                    f"({self.timeout:g} s)")
        return None

    def waiting_for(self) -> str:
        """What the sensor waits for, in words (used in its timeout message)."""
        return "its condition"

    def _timed_out(self) -> AirflowSensorTimeout:
        return AirflowSensorTimeout(
            f"{self.task_id}: timed out after {self.timeout:g} s waiting for {self.waiting_for()}"
        )

    def on_event(self, event: dict[str, Any]) -> Any:
        """Turn the trigger's payload into the task's result (or raise)."""
        return event

    def _check_now(self) -> dict[str, Any] | None:
        trigger = self.build_trigger()

        def check() -> dict[str, Any] | None:
            with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
                payload = trigger.check_now(hook.get_conn())  # a deadline that passed is applied first
                pipeline = self.pipeline_name()
                if payload is None and pipeline is not None and time.monotonic() >= self._next_notice:
                    self._next_notice = time.monotonic() + NOTICE_EVERY
                    said = self.diagnose(hook.ledger(pipeline, root=self.root))
                    if said:
                        self.log.warning("%s", said)
                return payload

        return self.coordinated(check, what=f"{self.task_id}: check for {self.waiting_for()}")

    def poke(self, context: Context) -> PokeReturnValue | bool:
        payload = self._check_now()
        if payload is None:
            return False
        return PokeReturnValue(is_done=True, xcom_value=self.on_event(payload))

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout as exc:
                raise self._timed_out() from exc
        payload = self._check_now()
        if payload is not None:
            return self.on_event(payload)
        trigger = self.build_trigger()
        # The trigger applies the timeout too: `airflow dags test` runs it inline and applies none.
        trigger.timeout_at = time.time() + self.timeout if self.timeout else None
        self.defer(
            trigger=trigger,
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout) if self.timeout else None,
        )

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        # Airflow turns a deferral timeout into AirflowSensorTimeout (or a skip with soft_fail);
        # say what was awaited instead of its generic message.
        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except AirflowSensorTimeout as exc:
            raise self._timed_out() from exc

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        if event.get("status") == "timeout":
            if self.soft_fail:
                raise AirflowSkipException(str(self._timed_out()))
            raise self._timed_out()
        if event.get("status") not in (None, "success"):
            raise AirflowException(f"{self.task_id}: the trigger reported {event}")
        return self.on_event(event)
