"""Which run folder a publish may write its marker into: a seal's run folder, checked against the layout
and the pipeline's storage root before anything is written.

A publish that registers a seal's files marks their run folder (``_PUBLISHED``, so garbage collection
keeps it). The folder comes from a manifest in ZooKeeper, which anyone who can write there controls, so
the marker would land wherever it points. Before any write the location, parsed into its one canonical
spelling (:func:`~airflow_epochs.coordination.base.locations.parse_location`), must be that seal's run folder by
the storage layout (``<storage>/<pipeline>/<partition>/epoch=<e>/attempt=<a>/run=<id>``) and, when the
storage root is given, exactly that folder under it (on a local disk: the root resolved through trusted
links only, and no link or other user's folder below it; see
:func:`~airflow_epochs.spark.storage.check_inside`).
"""

from __future__ import annotations

from airflow_epochs.coordination.base.errors import InvalidInput
from airflow_epochs.redaction import redact_uri
from airflow_epochs.spark.locations import parse_location
from airflow_epochs.spark.storage import check_inside


class RunOutsideStorage(InvalidInput):
    """A manifest's run folder is not that seal's run folder under the storage root; nothing was written."""


def check_run_folder(location: str, *, pipeline: str, partition: str, epoch: int, attempt: int,
                     storage: str | None = None) -> None:
    """Refuse (:class:`RunOutsideStorage`) a ``location`` that is not the run folder of ``partition`` of
    ``pipeline`` at ``epoch``, attempt ``attempt``, under ``storage`` (when given)."""
    shown = redact_uri(location) if isinstance(location, str) else repr(location)
    try:
        run = parse_location("run folder", location)
        root = None if storage is None else parse_location("storage", storage)
    except InvalidInput as exc:
        raise RunOutsideStorage(f"refusing to mark {shown!r} as published: {exc}; nothing was written") from None
    tail = run.path.split("/")[-5:]
    expected = [pipeline, partition, f"epoch={epoch}", f"attempt={attempt}"]
    if len(tail) != 5 or tail[:4] != expected or not tail[4].startswith("run=") or len(tail[4]) == len("run="):
        raise RunOutsideStorage(
            f"refusing to mark {shown!r} as published: it is not a run folder of {partition!r} of {pipeline!r} at "
            f"epoch {epoch}, attempt {attempt} (…/{'/'.join(expected)}/run=<id>); nothing was written")
    if root is None:
        return
    try:
        if not root.contains(run) or root.relative(run) != tail:
            raise InvalidInput("not directly in the layout under the root")
        check_inside(root, run, missing_ok=True)
    except InvalidInput:
        raise RunOutsideStorage(f"refusing to mark {shown!r} as published: it is not inside the storage root "
                                f"{redact_uri(storage or '')!r}; nothing was written") from None


def run_folder_of(file_path: str) -> str | None:
    """The run folder holding a data file (its path through the ``run=<id>`` segment after
    ``epoch=<e>/attempt=<a>``), or None for a file outside the storage layout."""
    parts = file_path.split("/")
    for i in range(len(parts) - 1, 2, -1):
        if parts[i].startswith("run=") and parts[i - 1].startswith("attempt=") and parts[i - 2].startswith("epoch="):
            return "/".join(parts[:i + 1])
    return None
