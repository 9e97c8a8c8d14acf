"""Which run folder a publish may write its marker into: a seal's run folder, checked against the layout
and the pipeline's storage root before anything is written.

A publish that registers a seal's files marks their run folder (``_PUBLISHED``, so garbage collection
keeps it). The folder comes from a manifest in ZooKeeper, which anyone who can write there controls, so
the marker would land wherever it points. Before any write the location, percent-decoded the way
pyarrow decodes a URI and normalised, must be that seal's run folder by the storage layout
(``<storage>/<pipeline>/<partition>/epoch=<e>/attempt=<a>/run=<id>``) and, when the storage root is
given, exactly that folder under it (on a local disk with every link resolved: a run folder replaced
by a link to elsewhere is refused).
"""

from __future__ import annotations

import os
import posixpath
from urllib.parse import unquote, urlsplit

from airflow_epochs.coordination.base.errors import InvalidInput
from airflow_epochs.redaction import redact_uri
from airflow_epochs.spark.locations import validate_location

LOCAL = ("file", "")


class RunOutsideStorage(InvalidInput):
    """A manifest's run folder is not that seal's run folder under the storage root; nothing was written."""


def resolved(location: str) -> tuple[tuple[str, str], str]:
    """((scheme, host), path) of ``location`` as a filesystem sees it: a URI's path percent-decoded
    (validated first: at most three levels, no ``..``), every path normalised and absolute."""
    validate_location("run folder", location)
    if "://" not in location:
        return LOCAL, posixpath.normpath(posixpath.abspath(location))
    parts = urlsplit(location)
    path = parts.path
    while unquote(path) != path:
        path = unquote(path)
    where = LOCAL if parts.scheme == "file" else (parts.scheme.lower(), parts.hostname or "")
    if where == LOCAL:
        path = posixpath.abspath(path)
    return where, posixpath.normpath("/" + path.lstrip("/"))


def check_run_folder(location: str, *, pipeline: str, partition: str, epoch: int, attempt: int,
                     storage: str | None = None) -> None:
    """Refuse (:class:`RunOutsideStorage`) a ``location`` that is not the run folder of ``partition`` of
    ``pipeline`` at ``epoch``, attempt ``attempt``, under ``storage`` (when given)."""
    shown = redact_uri(location) if isinstance(location, str) else repr(location)
    try:
        where, path = resolved(location)
        root = None if storage is None else resolved(storage)
    except InvalidInput as exc:
        raise RunOutsideStorage(f"refusing to mark {shown!r} as published: {exc}; nothing was written") from None
    tail = path.split("/")[-5:]
    expected = [pipeline, partition, f"epoch={epoch}", f"attempt={attempt}"]
    if len(tail) != 5 or tail[:4] != expected or not tail[4].startswith("run=") or len(tail[4]) == len("run="):
        raise RunOutsideStorage(
            f"refusing to mark {shown!r} as published: it is not a run folder of {partition!r} of {pipeline!r} at "
            f"epoch {epoch}, attempt {attempt} (…/{'/'.join(expected)}/run=<id>); nothing was written")
    if root is None:
        return
    inside = where == root[0] and path == posixpath.join(root[1], *tail)
    if inside and where == LOCAL:
        real_root = os.path.realpath(root[1])
        inside = not os.path.islink(path) and os.path.realpath(path) == os.path.join(real_root, *tail)
    if not inside:
        raise RunOutsideStorage(f"refusing to mark {shown!r} as published: it is not inside the storage root "
                                f"{redact_uri(storage or '')!r}; nothing was written")


def run_folder_of(file_path: str) -> str | None:
    """The run folder holding a data file (its path through the ``run=<id>`` segment after
    ``epoch=<e>/attempt=<a>``), or None for a file outside the storage layout."""
    parts = file_path.split("/")
    for i in range(len(parts) - 1, 2, -1):
        if parts[i].startswith("run=") and parts[i - 1].startswith("attempt=") and parts[i - 2].startswith("epoch="):
            return "/".join(parts[:i + 1])
    return None
