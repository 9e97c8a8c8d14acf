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
import re
import stat
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_epochs.coordination.base.errors import CorruptPayload, InvalidInput
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.wire.payloads import loads_bounded
from airflow_epochs.path_trust import UntrustedPath, resolve_trusted
from airflow_epochs.redaction import redact_uri
from airflow_epochs.spark.locations import Location, LocationNotCanonical, parse_location

MANIFEST_FILE = "_MANIFEST.json"


def _pafs() -> Any:
    """pyarrow's filesystems, imported on first use: importing this module (every DAG file that names a Spark
    epoch task does, through :mod:`airflow_epochs.operators`) loads no pyarrow and numpy, about 0.3
    CPU-seconds of every task's start that touches no storage (issue 50)."""
    from pyarrow import fs  # type: ignore[import-untyped]

    return fs
# In a run directory: a published Iceberg snapshot names its files, so garbage collection keeps it
# (time travel to a snapshot a rollback superseded still finds them). Readers skip "_" names.
PUBLISHED_MARKER = "_PUBLISHED"
MANIFEST_VERSION = 1
_RUN = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ATTEMPT_DIR = re.compile(r"attempt=(0|[1-9][0-9]{0,18})")
_RUN_DIR = re.compile(r"run=[A-Za-z0-9_-]{1,64}")


def storage_root(storage: str) -> Location:
    """The storage root ``storage`` parsed into its canonical parts (:class:`LocationNotCanonical` if it
    is not spelled canonically)."""
    return parse_location("storage", storage)


def epoch_location(storage: str, pipeline: str, partition: str, epoch: int) -> str:
    """The directory holding every attempt's output of ``partition`` at ``epoch``."""
    validate_name("pipeline", pipeline)
    validate_name("partition", partition)
    validate_epoch(epoch)
    return storage_root(storage).child(pipeline, partition, f"epoch={epoch}").text


def run_location(storage: str, pipeline: str, partition: str, epoch: int, attempt: int, run: str) -> str:
    """The attempt- and run-scoped output directory of one submission."""
    if not isinstance(run, str) or not _RUN.fullmatch(run):
        raise InvalidInput(f"a run id is 1-64 letters, digits, '_' or '-', not {run!r}")
    return parse_location("epoch", epoch_location(storage, pipeline, partition, epoch)).child(
        f"attempt={int(attempt)}", f"run={run}").text


def open_location(location: Location) -> tuple[Any, str]:
    """The pyarrow filesystem and in-filesystem path of a parsed location; pyarrow's own reading of the
    text must give the same path (else it is refused: one parse, one meaning)."""
    if location.local:
        return _pafs().LocalFileSystem(), location.path
    try:
        fs, path = _pafs().FileSystem.from_uri(location.text)
    except (ValueError, OSError) as exc:
        raise InvalidInput(f"storage location {redact_uri(location.text)!r} is not usable: "
                           f"{redact_uri(str(exc))}") from None
    expected = location.path if location.scheme == "hdfs" else f"{location.authority}{location.path}"
    if location.scheme in ("s3", "gs", "gcs", "hdfs") and path.rstrip("/") != expected.rstrip("/"):
        raise LocationNotCanonical(f"storage location {redact_uri(location.text)!r}: pyarrow reads it as "
                                   f"{redact_uri(path)!r}, not {redact_uri(expected)!r}; refused")
    return fs, path


def filesystem(location: str) -> tuple[Any, str]:
    """The pyarrow filesystem and in-filesystem path of ``location`` (a canonical path or URI)."""
    return open_location(parse_location("storage", location))


def write_manifest(location: str, manifest: Mapping[str, Any]) -> str:
    """Write ``_MANIFEST.json`` into a run directory (temporary file, then rename: readers see all or nothing)."""
    fs, path = filesystem(location)
    body = json.dumps({"version": MANIFEST_VERSION, **manifest}, sort_keys=True, indent=1).encode()
    fs.create_dir(path, recursive=True)
    tmp = f"{path}/.{MANIFEST_FILE}.tmp"
    with fs.open_output_stream(tmp) as out:
        out.write(body)
    fs.move(tmp, f"{path}/{MANIFEST_FILE}")
    return parse_location("run folder", location).child(MANIFEST_FILE).text


def read_manifest(location: str) -> dict[str, Any] | None:
    """The manifest of a run directory, or None if the job has not finished one."""
    fs, path = filesystem(location)
    target = f"{path}/{MANIFEST_FILE}"
    if fs.get_file_info(target).type != _pafs().FileType.File:
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
    if fs.get_file_info(path).type != _pafs().FileType.Directory:
        return []
    found = []
    for info in fs.get_file_info(_pafs().FileSelector(path, recursive=True)):
        name = info.base_name
        if info.type == _pafs().FileType.File and not name.startswith(("_", ".")):
            found.append((info.path[len(path) + 1:], int(info.size or 0)))
    return sorted(found)


def mark_published(location: str, note: Mapping[str, Any]) -> None:
    """Mark the run directory ``location`` as named by a published table snapshot (``note`` says which):
    :func:`collect_garbage` then keeps it. Repeating it rewrites the same small file."""
    fs, path = filesystem(location)
    if fs.get_file_info(path).type != _pafs().FileType.Directory:
        raise InvalidInput(f"no run directory at {redact_uri(location)} to mark as published")
    with fs.open_output_stream(f"{path.rstrip('/')}/{PUBLISHED_MARKER}") as out:
        out.write(json.dumps(dict(note), sort_keys=True).encode())


def is_marked_published(fs: Any, run_path: str) -> bool:
    return bool(fs.get_file_info(f"{run_path.rstrip('/')}/{PUBLISHED_MARKER}").type == _pafs().FileType.File)


def garbage_candidates(storage: str, pipeline: str, partition: str, epoch: int,
                       keep: Iterable[str]) -> list[str]:
    """The folders :func:`collect_garbage` would delete, each checked to lie inside the storage root:
    the run folders (``attempt=<n>/run=<id>``) of ``partition`` at ``epoch`` that are not in ``keep`` and
    not marked published, then each attempt folder left with no run. Names outside that layout are
    never candidates; a link where a folder of the layout should be is refused."""
    root = storage_root(storage)
    base = parse_location("epoch", epoch_location(storage, pipeline, partition, epoch))
    kept = {parse_location("kept run", location).path for location in keep}
    if not kept:
        raise InvalidInput(f"refusing to collect garbage of {partition!r} at epoch {epoch} with nothing to keep")
    fs, base_path = open_location(base)
    if not _is_dir(fs, root, base, base_path):
        return []
    found = []
    for attempt_dir in fs.get_file_info(_pafs().FileSelector(base_path)):
        if not _ATTEMPT_DIR.fullmatch(attempt_dir.base_name):
            continue
        attempt = base.child(attempt_dir.base_name)
        if not _is_dir(fs, root, attempt, attempt_dir.path):
            continue
        survivors = 0
        for run_dir in fs.get_file_info(_pafs().FileSelector(attempt_dir.path)):
            if not _RUN_DIR.fullmatch(run_dir.base_name):
                survivors += 1  # not ours to delete, and it keeps its attempt folder
                continue
            run = attempt.child(run_dir.base_name)
            if not _is_dir(fs, root, run, run_dir.path):
                survivors += 1
                continue
            if run.path in kept or is_marked_published(fs, run_dir.path):
                survivors += 1
                continue
            found.append(run.text)
        if survivors == 0:
            found.append(attempt.text)
    return found


def collect_garbage(storage: str, pipeline: str, partition: str, epoch: int, keep: Iterable[str]) -> list[str]:
    """Delete the run directories of ``partition`` at ``epoch`` that are not in ``keep``.

    Call it only with the run locations a seal names (see :func:`airflow_epochs.spark.sealed_runs`):
    everything else at that epoch is a failed, killed or superseded attempt that no reader can see,
    except a run a published table snapshot names (:func:`mark_published`), which is kept for time
    travel. Every candidate (:func:`garbage_candidates`) is checked again to lie inside the storage
    root just before it is deleted. Returns the deleted locations.
    """
    root = storage_root(storage)
    deleted = []
    for text in garbage_candidates(storage, pipeline, partition, epoch, keep):
        location = parse_location("garbage", text)
        fs, path = open_location(location)
        real = check_inside(root, location)
        fs.delete_dir(real if real is not None else path)
        if _RUN_DIR.fullmatch(location.path.rsplit("/", 1)[1]):
            deleted.append(path)
    return deleted


def _is_dir(fs: Any, root: Location, location: Location, path: str) -> bool:
    if location.local:
        return check_inside(root, location, missing_ok=True) is not None
    return bool(fs.get_file_info(path).type == _pafs().FileType.Directory)


def check_inside(root: Location, location: Location, *, missing_ok: bool = False) -> str | None:
    """Refuse (:class:`InvalidInput`) a ``location`` that is not inside the storage ``root``: by its
    parsed path, and on a local disk also on disk: the root resolved following only links nobody else
    could have placed (:func:`~airflow_epochs.path_trust.resolve_trusted`), then every folder below it
    down to ``location`` a real folder (no link) of ours or root's. Returns the real local path (None
    for a remote location, or for a local one that does not exist when ``missing_ok``)."""
    shown = redact_uri(location.text)
    if not root.contains(location) or location.path == root.path:
        raise InvalidInput(f"refusing to touch {shown!r}: it is not inside the storage root {redact_uri(root.text)!r}")
    if not location.local:
        return None
    try:
        current = resolve_trusted(root.path)
    except UntrustedPath as exc:
        raise InvalidInput(f"storage root {redact_uri(root.text)!r}: {exc}; nothing was touched") from None
    for name in root.relative(location):
        current = f"{current.rstrip('/')}/{name}"
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            if missing_ok:
                return None
            raise
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (0, os.geteuid()):
            raise InvalidInput(f"refusing to touch {shown!r}: it is not inside the storage root "
                               f"{redact_uri(root.text)!r} ({current!r} is a link, not a folder, or another "
                               "user's)")
    return current
