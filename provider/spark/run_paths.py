"""The paths a manifest names, checked to lie inside its run folder before anything reads, publishes or
deletes them.

A seal's manifests come from ZooKeeper, which whoever may write there controls: a vote whose
``outputs.data.path`` points at a folder only root may read would otherwise have a reader, a table
publish or garbage collection act on that folder with our rights. So a manifest's ``location`` must be a
run folder of the seal by the storage layout (``…/<pipeline>/<partition>/epoch=<e>/attempt=<a>/run=<id>``,
parsed canonically: :func:`~airflow_epochs.coordination.base.locations.parse_location`), and every path it names
must lie below that folder: by the parsed path, and on a local disk also once resolved through links
that nobody else could have placed (:func:`~airflow_epochs.path_trust.resolve_trusted`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_epochs.coordination.base.errors import InvalidInput
from airflow_epochs.coordination.wire.manifests import RunManifest
from airflow_epochs.path_trust import UntrustedPath, resolve_trusted
from airflow_epochs.redaction import redact_uri
from airflow_epochs.spark.locations import Location, parse_location


class OutsideRunFolder(InvalidInput):
    """A manifest names a folder that is not the seal's run folder, or a path outside it; nothing was
    read, published or deleted."""


def _shown(value: object) -> str:
    return repr(redact_uri(value)) if isinstance(value, str) else repr(value)


def seal_run_folder(location: object, *, pipeline: str, partition: str, epoch: int, attempt: int) -> Location:
    """The run folder ``location`` parsed, if it is one of ``partition`` of ``pipeline`` at ``epoch``,
    attempt ``attempt``; else :class:`OutsideRunFolder` naming it."""
    try:
        run = parse_location("run folder", location)
    except InvalidInput as exc:
        raise OutsideRunFolder(f"a manifest names run folder {_shown(location)}: {exc}") from None
    tail = run.path.split("/")[-5:]
    expected = [pipeline, partition, f"epoch={epoch}", f"attempt={attempt}"]
    if len(tail) != 5 or tail[:4] != expected or not tail[4].startswith("run=") or tail[4] == "run=":
        raise OutsideRunFolder(f"a manifest names {_shown(location)} as its run folder; the seal's run folders are "
                               f"…/{'/'.join(expected)}/run=<id>; nothing was read, published or deleted")
    return run


def check_in_run(run: Location, path: object, what: str = "output") -> Location:
    """``path`` parsed, if it lies below the run folder ``run``; else :class:`OutsideRunFolder`."""
    try:
        target = parse_location(f"manifest {what}", path)
    except InvalidInput as exc:
        raise OutsideRunFolder(f"a manifest names {what} {_shown(path)}: {exc}") from None
    inside = run.contains(target) and target.path != run.path
    if inside and run.local:
        try:
            real_run = resolve_trusted(run.path)
            inside = resolve_trusted(target.path).startswith(real_run.rstrip("/") + "/")
        except UntrustedPath as exc:
            raise OutsideRunFolder(f"a manifest names {what} {_shown(path)}: {exc}") from None
    if not inside:
        raise OutsideRunFolder(f"a manifest names {what} {_shown(path)}, which is not inside its run folder "
                               f"{_shown(run.text)}; nothing was read, published or deleted")
    return target


def check_manifest_outputs(location: str, manifest: RunManifest) -> None:
    """Refuse (:class:`OutsideRunFolder`) a job's manifest that names another run folder than ``location``
    (where the job ran), or an output outside it: checked before the manifest is voted."""
    run = parse_location("run folder", location)
    if parse_location("manifest location", manifest.location) != run:
        raise OutsideRunFolder(f"the manifest in {_shown(location)} names run folder {_shown(manifest.location)}; "
                               "nothing was voted")
    for name, item in manifest.outputs.items():
        check_in_run(run, item.path, f"output {name!r}")


def check_snapshot_pointer(storage: str, pipeline: str, partition: str, pointer: Mapping[str, Any]) -> Location:
    """The snapshot a job is about to read, parsed, if it lies in a run folder of ``partition`` of
    ``pipeline`` at the pointer's epoch under ``storage``; else :class:`OutsideRunFolder`."""
    root = parse_location("storage", storage)
    epoch = pointer.get("epoch")
    path = pointer.get("path")
    try:
        target = parse_location("snapshot", path)
        segments = root.relative(target)
    except InvalidInput as exc:
        raise OutsideRunFolder(f"the last sealed snapshot {_shown(path)} is not in the storage root "
                               f"{_shown(storage)}: {exc}; nothing was read") from None
    if len(segments) < 6 or segments[:3] != [pipeline, partition, f"epoch={epoch}"]:
        raise OutsideRunFolder(f"the last sealed snapshot {_shown(path)} is not in a run folder of {partition!r} of "
                               f"{pipeline!r} at epoch {epoch!r} under {_shown(storage)}; nothing was read")
    attempt = segments[3][len("attempt="):]
    if not segments[3].startswith("attempt=") or not attempt.isdigit() or not isinstance(epoch, int):
        raise OutsideRunFolder(f"the last sealed snapshot {_shown(path)} is not in an attempt folder; nothing was read")
    run = seal_run_folder(root.child(*segments[:5]).text, pipeline=pipeline, partition=partition, epoch=epoch,
                          attempt=int(attempt))
    return check_in_run(run, path, "snapshot")
