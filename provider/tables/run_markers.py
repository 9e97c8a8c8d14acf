"""Published markers on run folders: a run folder whose files a table's snapshot registered
(``add_files``) carries a marker, so that garbage collection keeps it past a rollback.

A table made since markers exist has the property :data:`RUN_MARKERS`; an older table gets its markers
written by the next publish (:func:`mark_earlier_runs`), then the property.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_epochs.coordination.base.errors import InvalidInput
from airflow_epochs.spark.storage import mark_published
from airflow_epochs.tables import history as h
from airflow_epochs.tables.run_folders import RunOutsideStorage, check_run_folder, run_folder_of

log = logging.getLogger(__name__)

# A table property: every run folder the table's snapshots name carries the published marker (set on a
# new table; an older table gets its markers written by the next publish, then this property).
RUN_MARKERS = "epochs.run-markers"


def runs_named_by(table: Any) -> dict[str, h.PublishedSnapshot]:
    """Run folder -> the publish snapshot that registered files in it (``add_files``; a ``write``
    publish copied the rows into the table's own files)."""
    found: dict[str, h.PublishedSnapshot] = {}
    for snapshot in table.snapshots():
        record = h.published(snapshot)
        if record is None or record.action != h.PUBLISH or h.summary_properties(snapshot).get(h.MODE) == "write":
            continue
        for manifest in snapshot.manifests(table.io):
            if manifest.added_snapshot_id != snapshot.snapshot_id:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                folder = run_folder_of(str(entry.data_file.file_path)) if entry.snapshot_id == record.snapshot_id \
                    else None
                if folder is not None:
                    found.setdefault(folder, record)
    return found


def mark_earlier_runs(table: Any, *, identifier: str, pipeline: str, partition: str, storage: str | None) -> list[str]:
    """Mark the run folders named by the table's snapshots published before the marker existed
    (garbage collection would take them), once per table; returns the folders marked now.

    :param identifier: the table's name (for the markers and the log).
    :param pipeline: the pipeline and ``partition`` the table holds (a folder must be of them).
    :param storage: the pipeline's storage root: a folder must be inside it (None: not checked).
    """
    if table.properties.get(RUN_MARKERS) == "1":
        return []
    marked, unreachable = [], 0
    for folder, record in runs_named_by(table).items():
        try:
            check_run_folder(folder, pipeline=pipeline, partition=partition, epoch=record.epoch,
                             attempt=record.attempt, storage=storage)
            mark_published(folder, {"table": identifier, "epoch": record.epoch, "attempt": record.attempt,
                                    "generation": record.generation})
        except (RunOutsideStorage, InvalidInput) as exc:  # refused, or the folder is gone already
            log.warning("table %s: run folder of epoch %s not marked: %s", identifier, record.epoch, exc)
            continue
        except OSError as exc:  # storage unreachable now: the next publish tries again
            log.warning("table %s: run folder of epoch %s not marked yet: %s", identifier, record.epoch, exc)
            unreachable += 1
            continue
        marked.append(folder)
    if unreachable:
        return marked
    with table.transaction() as txn:
        txn.set_properties({RUN_MARKERS: "1"})
    log.info("table %s: marked %d run folder(s) published before markers existed", identifier, len(marked))
    return marked
