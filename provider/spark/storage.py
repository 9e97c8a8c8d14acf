"""Where epoch output lives, and the file operations around it (manifests, listing, garbage collection).

Layout under a pipeline's storage root::

    <storage>/<pipeline>/<partition>/epoch=<e>/attempt=<token>/run=<id>/
        data/            the job's output (any Spark format)
        snapshot/        the state it leaves for the next epoch, if any
        _MANIFEST.json   written last: paths, row counts, checksums

A run directory is visible to readers only when a seal's manifest names it. File access goes through
pyarrow's filesystems, so the same code serves local paths, ``file://``, ``s3://``, ``gs://`` and
``hdfs://`` (whichever the installed pyarrow supports).
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Iterable, Mapping
from typing import Any

from pyarrow import fs as pafs  # type: ignore[import-untyped]

from airflow_epochs.coordination.base.errors import CorruptPayload, InvalidInput
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.wire.payloads import loads_bounded
from airflow_epochs.redaction import redact_uri
from airflow_epochs.spark.locations import validate_location

MANIFEST_FILE = "_MANIFEST.json"
# In a run directory: a published Iceberg snapshot names its files, so garbage collection keeps it
# (time travel to a snapshot a rollback superseded still finds them). Readers skip "_" names.
PUBLISHED_MARKER = "_PUBLISHED"
MANIFEST_VERSION = 1


def _join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])


def epoch_location(storage: str, pipeline: str, partition: str, epoch: int) -> str:
    """The directory holding every attempt's output of ``partition`` at ``epoch``."""
    validate_name("pipeline", pipeline)
    validate_name("partition", partition)
    validate_epoch(epoch)
    return _join(storage, pipeline, partition, f"epoch={epoch}")


def run_location(storage: str, pipeline: str, partition: str, epoch: int, attempt: int, run: str) -> str:
    """The attempt- and run-scoped output directory of one submission."""
    return _join(epoch_location(storage, pipeline, partition, epoch), f"attempt={int(attempt)}", f"run={run}")


def filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem and in-filesystem path of ``location`` (a path or a URI)."""
    if not isinstance(location, str) or not location:
        raise InvalidInput(f"storage location must be a non-empty string, not {location!r}")
    validate_location("storage", location)  # before pyarrow percent-decodes it
    if "://" not in location:
        return pafs.LocalFileSystem(), posixpath.abspath(location)
    try:
        return pafs.FileSystem.from_uri(location)  # type: ignore[no-any-return]
    except (ValueError, OSError) as exc:
        raise InvalidInput(f"storage location {redact_uri(location)!r} is not usable: {redact_uri(str(exc))}") from None


def write_manifest(location: str, manifest: Mapping[str, Any]) -> str:
    """Write ``_MANIFEST.json`` into a run directory (temporary file, then rename: readers see all or nothing)."""
    fs, path = filesystem(location)
    body = json.dumps({"version": MANIFEST_VERSION, **manifest}, sort_keys=True, indent=1).encode()
    fs.create_dir(path, recursive=True)
    tmp = f"{path}/.{MANIFEST_FILE}.tmp"
    with fs.open_output_stream(tmp) as out:
        out.write(body)
    fs.move(tmp, f"{path}/{MANIFEST_FILE}")
    return _join(location, MANIFEST_FILE)


def read_manifest(location: str) -> dict[str, Any] | None:
    """The manifest of a run directory, or None if the job has not finished one."""
    fs, path = filesystem(location)
    target = f"{path}/{MANIFEST_FILE}"
    if fs.get_file_info(target).type != pafs.FileType.File:
        return None
    with fs.open_input_stream(target) as stream:
        raw = stream.read()
    try:
        data = loads_bounded(raw)
    except ValueError as exc:
        raise CorruptPayload(f"{location}/{MANIFEST_FILE}: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("version") != MANIFEST_VERSION:
        raise CorruptPayload(f"{location}/{MANIFEST_FILE}: unknown manifest version {data.get('version')!r}"
                             if isinstance(data, dict) else f"{location}/{MANIFEST_FILE}: not an object")
    return data


def data_files(location: str) -> list[tuple[str, int]]:
    """Data files under ``location`` (relative path, size), without Spark's marker and checksum files."""
    fs, path = filesystem(location)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        return []
    found = []
    for info in fs.get_file_info(pafs.FileSelector(path, recursive=True)):
        name = info.base_name
        if info.type == pafs.FileType.File and not name.startswith(("_", ".")):
            found.append((info.path[len(path) + 1:], int(info.size or 0)))
    return sorted(found)


def mark_published(location: str, note: Mapping[str, Any]) -> None:
    """Mark the run directory ``location`` as named by a published table snapshot (``note`` says which):
    :func:`collect_garbage` then keeps it. Repeating it rewrites the same small file."""
    fs, path = filesystem(location)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        raise InvalidInput(f"no run directory at {redact_uri(location)} to mark as published")
    with fs.open_output_stream(f"{path.rstrip('/')}/{PUBLISHED_MARKER}") as out:
        out.write(json.dumps(dict(note), sort_keys=True).encode())


def is_marked_published(fs: pafs.FileSystem, run_path: str) -> bool:
    return bool(fs.get_file_info(f"{run_path.rstrip('/')}/{PUBLISHED_MARKER}").type == pafs.FileType.File)


def collect_garbage(storage: str, pipeline: str, partition: str, epoch: int, keep: Iterable[str]) -> list[str]:
    """Delete the run directories of ``partition`` at ``epoch`` that are not in ``keep``.

    Call it only with the run locations a seal names (see :func:`airflow_epochs.spark.sealed_runs`):
    everything else at that epoch is a failed, killed or superseded attempt that no reader can see,
    except a run a published table snapshot names (:func:`mark_published`), which is kept for time
    travel. Returns the deleted locations.
    """
    root = filesystem(storage)[1].rstrip("/")
    fs, base = filesystem(epoch_location(storage, pipeline, partition, epoch))
    kept = {filesystem(location)[1].rstrip("/") for location in keep}
    if not kept:
        raise InvalidInput(f"refusing to collect garbage of {partition!r} at epoch {epoch} with nothing to keep")
    if fs.get_file_info(base).type != pafs.FileType.Directory:
        return []
    deleted = []
    for attempt_dir in fs.get_file_info(pafs.FileSelector(base)):
        if attempt_dir.type != pafs.FileType.Directory:
            continue
        runs = [r for r in fs.get_file_info(pafs.FileSelector(attempt_dir.path)) if r.type == pafs.FileType.Directory]
        survivors = 0
        for run in runs:
            if run.path.rstrip("/") in kept or is_marked_published(fs, run.path):
                survivors += 1
                continue
            _check_inside(fs, root, run.path)
            fs.delete_dir(run.path)
            deleted.append(run.path)
        if survivors == 0:
            _check_inside(fs, root, attempt_dir.path)
            fs.delete_dir(attempt_dir.path)
    return deleted


def _check_inside(fs: pafs.FileSystem, root: str, path: str) -> None:
    """Refuse (:class:`InvalidInput`) to delete ``path`` unless it lies inside the storage ``root``, checked
    at delete time: normalised, and on a local disk with every link resolved (a run folder replaced by a
    link to elsewhere is not followed)."""
    normal = posixpath.normpath(path)
    inside = normal.startswith(posixpath.normpath(root) + "/")
    if inside and isinstance(fs, pafs.LocalFileSystem):
        real_root = os.path.realpath(root)
        inside = not os.path.islink(normal) and os.path.realpath(normal).startswith(real_root + os.sep)
    if not inside:
        raise InvalidInput(f"refusing to delete {redact_uri(path)!r}: it is not inside the storage root "
                           f"{redact_uri(root)!r}")
