"""Re-produce a correction with the pipeline's own Spark jobs: the re-sealed partition first, then every
seal that read its old version, in the order the correction planned (epoch order).

A thin class over :class:`~airflow_epochs.hooks.spark_epoch.SparkEpochHook` (one per job) and the
ledger: it takes the version a :class:`~airflow_epochs.operators.ResealOperator` opened (from its XCom),
asks the ledger what the correction waits for (``ledger.corrections.pending()``), runs that producer's job for
that (epoch, partition) and votes it under the version, until the correction is done. It runs nothing
the correction did not plan, and a retry asks the ledger again: a version sealed by an earlier try is
not re-produced.

The jobs are the pipeline's own: given ``group=`` (the :class:`~airflow_epochs.operators.EpochGroup` of the
pipeline's DAG), each producer's :class:`~airflow_epochs.operators.SparkEpochOperator` task (or
``@task.spark_epoch``) is rendered for the epoch it re-produces, with that epoch's data interval (under the
group's calendar), and its job, inputs, sealed inputs, storage, Spark connections and table are used as
they are; nothing is declared twice. Once the correction is done, the task emits one asset event per
re-sealed epoch of each partition of its outlets (by default the group's), with the epoch as partition key,
so that a downstream DAG scheduled on the partition runs again for each corrected epoch by itself.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_epochs.coordination import DEFAULT_ROOT, DuplicateVote, Reseal
from airflow_epochs.coordination.base.calendar import EpochCalendar
from airflow_epochs.coordination.recipes.delivery.records import CorrectedVersions
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.operators.epoch import default_owner, partition_asset
from airflow_epochs.operators.spark import SparkEpochOperator
from airflow_epochs.retries import CoordinationRetries, with_retry_defaults

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_epochs.coordination.ledger import EpochLedger
    from airflow_epochs.coordination.recipes.corrections.records import CorrectionNode, VersionEntry
    from airflow_epochs.operators.group import EpochGroup

#: What a job entry may hold: the partition it writes, its job file, and its inputs.
JOB_KEYS = frozenset({"partition", "application", "inputs", "sealed_inputs"})


class SparkCorrectionOperator(CoordinationRetries, BaseOperator):
    """Re-produce, with Spark, the version a re-seal opened and every seal its correction found stale.

    :param group: the pipeline's :class:`~airflow_epochs.operators.EpochGroup` (its DAG's): its Spark producer
        tasks are the jobs, rendered for each epoch re-produced (see the module's description); ``pipeline``,
        ``calendar``, ``storage``, the Spark connections and the table come from them.
    :param pipeline: the pipeline (templated); without ``group``.
    :param jobs: without ``group``: producer -> ``{"partition", "application", "inputs", "sealed_inputs"}``,
        the same jobs as the pipeline's :class:`~airflow_epochs.operators.SparkEpochOperator` tasks
        (templated). In an input location ``{epoch}`` becomes the epoch re-produced and ``{date}`` its first
        day (``YYYY-MM-DD``, under ``calendar``).
    :param storage: root location of the pipeline's output (templated); without ``group``.
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

    def __init__(self, *, group: EpochGroup | None = None, pipeline: str | None = None,
                 jobs: Mapping[str, Mapping[str, Any]] | None = None, storage: str | None = None,
                 reseal_task_id: str = "reseal", calendar: EpochCalendar | None = None,
                 spark_connect_conn_id: str | None = None, conn_id: str | None = None, table: str | None = None,
                 table_partition: str | None = None, table_conn_id: str = "iceberg_default",
                 settle_timeout: float = 600.0, zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
                 root: str = DEFAULT_ROOT, **kwargs: Any) -> None:
        self.group = group
        self.producer_tasks: list[SparkEpochOperator] = []
        if group is not None:
            if jobs is not None or storage is not None or (pipeline not in (None, group.pipeline)):
                raise ValueError(f"SparkCorrectionOperator {kwargs.get('task_id')!r}: group= gives the pipeline, its "
                                 "jobs and their storage; give no pipeline, jobs or storage beside it")
            pipeline, jobs, storage = group.pipeline, {}, ""
            calendar = calendar or group.open_kwargs.get("calendar")
            self.producer_tasks = [t for t in group.iter_tasks() if isinstance(t, SparkEpochOperator)]
            if not self.producer_tasks:
                raise ValueError(f"SparkCorrectionOperator {kwargs.get('task_id')!r}: EpochGroup {group.group_id!r} "
                                 "has no Spark producer task to re-produce a correction with")
            assert group.pipeline_config is not None, "the group's block has ended"
            closing = group.close_partitions or list(group.pipeline_config.partitions)
            kwargs.setdefault("outlets", [partition_asset(pipeline, p) for p in closing])
        elif pipeline is None or jobs is None or storage is None:
            raise ValueError(f"SparkCorrectionOperator {kwargs.get('task_id')!r}: give group= (the pipeline's "
                             "EpochGroup), or pipeline=, jobs= and storage=")
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
        self._context: Context | None = None
        self.correction_origin: dict[str, Any] | None = None  # set by execute (OpenLineage reads them)
        self.correction_result: dict[str, Any] | None = None

    def execute(self, context: Context) -> dict[str, Any]:
        self._context = context
        if self.group is not None:
            self._settings_from_tasks()
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
        if node.state == "done":
            self._announce(context, origin.correction, [(origin.epoch, origin.partition), *node.plan])
        return self.correction_result

    def _settings_from_tasks(self) -> None:
        """With ``group``: the storage, the table and the Spark connections, from the producers' tasks (the
        one that publishes into a table names it)."""
        tasks = [self._rendered(task, 1) for task in self.producer_tasks]
        self.storage = tasks[0].storage
        publisher = next((task for task in tasks if task.table), None)
        if publisher is not None and not self.table:
            self.table, self.table_partition = publisher.table, publisher.partition
            self.table_conn_id = publisher.table_conn_id

    def _announce(self, context: Context, correction: str, keys: Sequence[tuple[int, str]]) -> None:
        """One asset event per re-sealed epoch of each partition asset among the outlets, the epoch as its
        partition key (one ``extra`` for them all: :class:`CorrectedVersions`)."""
        assets = {partition: asset for asset in self.outlets for partition in [self._partition_of(asset)]
                  if partition is not None}

        def read(ledger: EpochLedger) -> dict[str, dict[int, tuple[int, int]]]:
            found: dict[str, dict[int, tuple[int, int]]] = {}
            for epoch, partition in keys:
                if partition not in assets:
                    continue
                view, info = ledger.corrections.sealed_version(epoch, partition), ledger.epoch_info(epoch)
                if view is not None and info is not None and view.correction == correction:
                    found.setdefault(partition, {})[epoch] = (info.generation, view.version)
            return found

        events = context["outlet_events"]
        for partition, versions in self._ledger_call(read, "read the re-sealed versions").items():
            accessor = events[assets[partition]]
            accessor.add_partitions([str(epoch) for epoch in sorted(versions)])
            accessor.extra.update(CorrectedVersions(self.pipeline, partition, correction, versions).to_extra())
            self.log.info("Correction %s: an asset event for each re-sealed epoch of %s: %s", correction, partition,
                          sorted(versions))

    def _partition_of(self, asset: Any) -> str | None:
        uri = str(getattr(asset, "uri", ""))
        prefix = f"epochs://{self.pipeline}/"
        return uri[len(prefix):] if uri.startswith(prefix) else None

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
        runs = self._task_runs(reseal) if self.group is not None else self._job_runs(reseal)
        for producer, hook, storage, inputs, sealed_inputs in runs:

            def run(producer: str = producer, hook: Any = hook, storage: str = storage, inputs: dict[str, str] = inputs,
                    sealed_inputs: dict[str, str] | None = sealed_inputs) -> Any:
                try:
                    return hook.resubmit_version(reseal, producer, storage=storage, inputs=inputs,
                                                 sealed_inputs=sealed_inputs)
                except DuplicateVote:  # an earlier try's vote landed: nothing to apply again
                    return None

            outcome = self.coordinated(run, what=f"epoch {reseal.epoch}: {producer} re-produces {reseal.partition} "
                                                 f"as version {reseal.version}")
            self.log.info("Epoch %s: %s re-produced %s as version %s (run %s; sealed: %s)", reseal.epoch, producer,
                          reseal.partition, reseal.version, None if outcome is None else outcome.run,
                          None if outcome is None else outcome.vote.sealed)
        done.append({"epoch": reseal.epoch, "partition": reseal.partition, "version": reseal.version})

    def _job_runs(self, reseal: Reseal) -> list[tuple[str, Any, str, dict[str, str], dict[str, str] | None]]:
        """The jobs of ``jobs=`` that write the partition: (producer, hook, storage, inputs, sealed inputs)."""
        producers = [p for p, job in self.jobs.items() if job["partition"] == reseal.partition]
        if not producers:
            raise AirflowFailException(f"correction {reseal.correction}: {reseal.partition!r} at epoch "
                                       f"{reseal.epoch} is to be re-produced, but no job writes it "
                                       f"(jobs: {sorted(self.jobs)})")
        return [(producer, self._hook(str(self.jobs[producer]["application"])), str(self.storage),
                 {name: self._located(str(where), reseal.epoch)
                  for name, where in (self.jobs[producer].get("inputs") or {}).items()},
                 self.jobs[producer].get("sealed_inputs") or None) for producer in producers]

    def _task_runs(self, reseal: Reseal) -> list[tuple[str, Any, str, dict[str, str], dict[str, str] | None]]:
        """The group's producer tasks of the partition, each rendered for the re-produced epoch."""
        tasks = [self._rendered(task, reseal.epoch) for task in self.producer_tasks]
        writers = [task for task in tasks if task.partition == reseal.partition]
        if not writers:
            raise AirflowFailException(f"correction {reseal.correction}: {reseal.partition!r} at epoch {reseal.epoch} "
                                       f"is to be re-produced, but no Spark task of EpochGroup {self.group_id_of()!r} "
                                       f"writes it (they write {sorted({t.partition for t in tasks})})")
        runs = []
        for task in writers:
            inputs = {**task.inputs, **(task.function_inputs(self._epoch_context(task, reseal.epoch))
                                        if hasattr(task, "function_inputs") else {})}
            runs.append((task.producer, task.hook, task.storage,
                         {name: str(where).replace("{epoch}", str(reseal.epoch)) for name, where in inputs.items()},
                         dict(task.sealed_inputs) or None))
        return runs

    def group_id_of(self) -> str:
        return str(self.group.group_id) if self.group is not None else ""

    def _epoch_context(self, task: Any, epoch: int) -> dict[str, Any]:
        """The context ``task`` is rendered with for ``epoch``: this run's (Variables, connections, macros),
        with the epoch's data interval (under the group's calendar) and the task's own DAG params."""
        context: dict[str, Any] = dict(self._context or {})
        context["params"] = task.params.dump() if hasattr(task.params, "dump") else dict(task.params)
        if self.calendar is not None:
            start, end = self.calendar.span(epoch)
            context.update(data_interval_start=start, data_interval_end=end, logical_date=start,
                           ds=start.strftime("%Y-%m-%d"), ds_nodash=start.strftime("%Y%m%d"), ts=start.isoformat(),
                           ts_nodash=start.strftime("%Y%m%dT%H%M%S"))
        return context

    def _rendered(self, task: SparkEpochOperator, epoch: int) -> SparkEpochOperator:
        """A copy of ``task`` whose templated fields are rendered for ``epoch`` (its job, inputs, storage, ...)."""
        copy = task.prepare_for_execution()
        context = cast("Context", self._epoch_context(task, epoch))
        copy.render_template_fields(context, jinja_env=task.dag.get_template_env())
        return copy

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
