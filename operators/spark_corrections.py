"""Re-produce a correction with the pipeline's own Spark jobs: the re-sealed partition first, then every
seal that read its old version, in the order the correction planned (epoch order).

A thin class over :class:`~airflow_epochs.hooks.spark_epoch.SparkEpochHook` (one per job) and the
ledger: it takes the version a :class:`~airflow_epochs.operators.ResealOperator` opened (from its XCom),
asks the ledger what the correction waits for (``ledger.corrections.pending()``), runs that producer's job for
that (epoch, partition) and votes it under the version, until the correction is done. It runs nothing
the correction did not plan, and a retry asks the ledger again: a version sealed by an earlier try is
not re-produced.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_epochs.coordination import DEFAULT_ROOT, DuplicateVote, Reseal
from airflow_epochs.coordination.base.calendar import EpochCalendar
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.operators.epoch import default_owner
from airflow_epochs.retries import CoordinationRetries, with_retry_defaults

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_epochs.coordination.ledger import EpochLedger
    from airflow_epochs.coordination.recipes.corrections.records import CorrectionNode, VersionEntry

#: What a job entry may hold: the partition it writes, its job file, and its inputs.
JOB_KEYS = frozenset({"partition", "application", "inputs", "sealed_inputs"})


class SparkCorrectionOperator(CoordinationRetries, BaseOperator):
    """Re-produce, with Spark, the version a re-seal opened and every seal its correction found stale.

    :param pipeline: the pipeline (templated).
    :param jobs: producer -> ``{"partition", "application", "inputs", "sealed_inputs"}``: the same jobs as
        the pipeline's :class:`~airflow_epochs.operators.SparkEpochOperator` tasks (templated). In an input
        location ``{epoch}`` becomes the epoch re-produced and ``{date}`` its first day (``YYYY-MM-DD``,
        under ``calendar``).
    :param storage: root location of the pipeline's output (templated).
    :param reseal_task_id: the :class:`~airflow_epochs.operators.ResealOperator` whose version to re-produce.
    :param calendar: the pipeline's calendar (for ``{date}``).
    :param spark_connect_conn_id: (templated) run the jobs on this Spark Connect connection.
    :param conn_id: (templated) Spark connection for ``spark-submit`` (None or empty: ``local[*]``).
    :param table: (templated) after the correction, publish ``table_partition`` into this Iceberg table:
        one corrective snapshot per re-sealed epoch.
    :param table_partition: the partition published into ``table``.
    :param table_conn_id: (templated) the Airflow connection of the Iceberg catalog.
    :param settle_timeout: seconds to wait for a correction that has nothing to re-produce but is not
        done yet (an epoch opened before its last re-seal is still running).
    :return: (to XCom) the correction's id and every version this task sealed, in order.
    """

    template_fields: Sequence[str] = ("pipeline", "jobs", "storage", "spark_connect_conn_id", "conn_id", "table",
                                      "table_conn_id")
    ui_color = "#f4a460"

    def __init__(self, *, pipeline: str, jobs: Mapping[str, Mapping[str, Any]], storage: str,
                 reseal_task_id: str = "reseal", calendar: EpochCalendar | None = None,
                 spark_connect_conn_id: str | None = None, conn_id: str | None = None, table: str | None = None,
                 table_partition: str | None = None, table_conn_id: str = "iceberg_default",
                 settle_timeout: float = 600.0, zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
                 root: str = DEFAULT_ROOT, **kwargs: Any) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        for producer, job in jobs.items():
            unknown = set(job) - JOB_KEYS
            if unknown or "partition" not in job or "application" not in job:
                raise ValueError(f"SparkCorrectionOperator {kwargs.get('task_id')!r}: job {producer!r} needs "
                                 f"'partition' and 'application' and takes only {sorted(JOB_KEYS)}, "
                                 f"not {sorted(unknown)}")
        if table and not table_partition:
            raise ValueError("table needs table_partition (the partition published into it)")
        self.pipeline = pipeline
        self.jobs = {producer: dict(job) for producer, job in jobs.items()}
        self.storage = storage
        self.reseal_task_id = reseal_task_id
        self.calendar = calendar
        self.spark_connect_conn_id = spark_connect_conn_id
        self.conn_id = conn_id
        self.table = table
        self.table_partition = table_partition
        self.table_conn_id = table_conn_id
        self.settle_timeout = settle_timeout
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.correction_origin: dict[str, Any] | None = None  # set by execute (OpenLineage reads them)
        self.correction_result: dict[str, Any] | None = None

    def execute(self, context: Context) -> dict[str, Any]:
        asked = context["ti"].xcom_pull(task_ids=self.reseal_task_id)
        if not isinstance(asked, Mapping) or not {"epoch", "partition", "version", "correction"} <= set(asked):
            raise AirflowFailException(f"task {self.reseal_task_id!r} returned no re-seal to re-produce: {asked!r}")
        origin = Reseal(self.pipeline, int(asked["epoch"]), str(asked["partition"]), int(asked["version"]), "open",
                        "", "", str(asked["correction"]))
        done: list[dict[str, Any]] = []
        entry = self._ledger_call(lambda ledger: self._entry(ledger, origin), "read the re-seal")
        self.correction_origin = {"epoch": origin.epoch, "partition": origin.partition, "version": origin.version,
                                  "reason": entry.reason}
        if entry.state == "open":
            self._reproduce(origin, done)
        deadline = time.monotonic() + self.settle_timeout
        while True:
            pending = self._ledger_call(lambda ledger: [r for r in ledger.corrections.pending()
                                                        if r.correction == origin.correction], "read pending")
            if pending:
                for item in pending:
                    self._reproduce(item, done)
                deadline = time.monotonic() + self.settle_timeout
                continue
            node = self._ledger_call(lambda ledger: self._advance(ledger, origin.correction), "advance")
            if node is not None and node.state in ("done", "rolled_back"):
                break
            if time.monotonic() > deadline:
                raise AirflowException(f"correction {origin.correction}: nothing to re-produce for "
                                       f"{self.settle_timeout:.0f} s, yet it is {node.state if node else 'absent'}")
            time.sleep(1.0)
        self.log.info("Correction %s of %s at epoch %s: %s; %d version(s) re-produced here", origin.correction,
                      origin.partition, origin.epoch, node.state, len(done))
        # Through the correction's last re-sealed epoch of the table's partition, whether or not this try
        # re-produced it: a try killed after the last re-seal, before the publish, left the table behind.
        reached = [e for e, p in ((origin.epoch, origin.partition), *node.plan) if p == self.table_partition]
        published = self._publish(max(reached)) if self.table and reached and node.state == "done" else None
        self.correction_result = {"correction": origin.correction, "state": node.state,
                                  "plan": [list(p) for p in node.plan], "resealed": done, "published": published}
        return self.correction_result

    # -- steps ---------------------------------------------------------------------------------------

    def _ledger_call(self, step: Any, what: str) -> Any:
        def run() -> Any:
            with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
                return step(hook.ledger(self.pipeline, owner=default_owner(), root=self.root))

        return self.coordinated(run, what=f"pipeline {self.pipeline!r}: {what}")

    @staticmethod
    def _entry(ledger: EpochLedger, reseal: Reseal) -> VersionEntry:
        entry = ledger.corrections.version_entry(reseal.epoch, reseal.partition, reseal.version)
        if entry is None:
            raise AirflowFailException(f"pipeline {ledger.pipeline!r}: no version {reseal.version} of "
                                       f"{reseal.partition!r} at epoch {reseal.epoch}")
        return entry

    @staticmethod
    def _advance(ledger: EpochLedger, correction: str) -> CorrectionNode | None:
        if not any(node.id == correction for node in ledger.corrections.list()):
            return None  # the origin's version is not sealed yet
        return ledger.corrections.advance(correction)

    def _reproduce(self, reseal: Reseal, done: list[dict[str, Any]]) -> None:
        producers = [p for p, job in self.jobs.items() if job["partition"] == reseal.partition]
        if not producers:
            raise AirflowFailException(f"correction {reseal.correction}: {reseal.partition!r} at epoch "
                                       f"{reseal.epoch} is to be re-produced, but no job writes it "
                                       f"(jobs: {sorted(self.jobs)})")
        for producer in producers:
            job = self.jobs[producer]
            hook = self._hook(str(job["application"]))
            inputs = {name: self._located(str(where), reseal.epoch)
                      for name, where in (job.get("inputs") or {}).items()}

            def run(producer: str = producer, job: dict[str, Any] = job, inputs: dict[str, str] = inputs,
                    hook: Any = hook) -> Any:
                try:
                    return hook.resubmit_version(reseal, producer, storage=self.storage, inputs=inputs,
                                                 sealed_inputs=job.get("sealed_inputs") or None)
                except DuplicateVote:  # an earlier try's vote landed: nothing to apply again
                    return None

            outcome = self.coordinated(run, what=f"epoch {reseal.epoch}: {producer} re-produces {reseal.partition} "
                                                 f"as version {reseal.version}")
            self.log.info("Epoch %s: %s re-produced %s as version %s (run %s; sealed: %s)", reseal.epoch, producer,
                          reseal.partition, reseal.version, None if outcome is None else outcome.run,
                          None if outcome is None else outcome.vote.sealed)
        done.append({"epoch": reseal.epoch, "partition": reseal.partition, "version": reseal.version})

    def _hook(self, application: str) -> Any:
        from airflow_epochs.hooks.spark_epoch import SparkEpochHook

        return SparkEpochHook(application=application, conn_id=self.conn_id,
                              spark_connect_conn_id=self.spark_connect_conn_id,
                              zookeeper_conn_id=self.zookeeper_conn_id, root=self.root)

    def _located(self, location: str, epoch: int) -> str:
        out = location.replace("{epoch}", str(epoch))
        if "{date}" in out:
            if self.calendar is None:
                raise AirflowFailException(f"input {location!r} names {{date}}: give the operator a calendar")
            out = out.replace("{date}", self.calendar.span(epoch)[0].strftime("%Y-%m-%d"))
        return out

    def _publish(self, epoch: int) -> dict[str, Any]:
        """Publish the corrected partition: one corrective snapshot per re-sealed epoch (under the table's lock)."""
        from airflow_epochs.tables.tasks import publish_from_task

        def publish() -> dict[str, Any]:
            with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
                return publish_from_task(hook, self.pipeline, str(self.table_partition), epoch, table=str(self.table),
                                         conn_id=self.table_conn_id, root=self.root, storage=self.storage).to_dict()

        return self.coordinated(publish, what=f"publish the corrected {self.table_partition} to {self.table}")

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        from airflow_epochs.lineage.operators import correction_task_lineage

        return correction_task_lineage(self, complete=True)
