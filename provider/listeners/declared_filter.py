"""The host's filter of declared producers: which tasks a declaration names, kept on each host.

Every task with an outlet passes through the declared-producers listener. Only a task that some
declaration names votes: the others must succeed exactly as if the provider were not installed,
ZooKeeper up or down. Task processes live for one try, so the filter is kept in a file per
host, ``<cache dir>/declared-producers.json`` (``[epochs] declared_cache_dir``, default
``$AIRFLOW_HOME/epochs``), written by whichever task process last read the declarations:

- **ZooKeeper answers** (within ``[epochs] declared_check_timeout`` seconds, default 5): the task reads
  each configured pipeline's *mark* (one ``exists`` of its configuration folder: the folder's creation
  zxid and child version, which change whenever a configuration version is added or the pipeline is
  created again). Marks equal to those the file was read with: the file decides. Otherwise the
  declarations are read again and the file rewritten with the marks read *before* them. So a
  declaration added or changed is honoured by the next task on every host, as soon as it is stored;
- **ZooKeeper does not answer**: the cached file decides, whatever its age (a declaration added since
  is in force on this host once ZooKeeper answers again; meanwhile a producer it names only newly
  succeeds without its vote, and its key waits: a stall, never a duplicate);
- **missing** (or unreadable) with ZooKeeper down: nothing tells a producer from another task, and a
  declared producer must never report success without its vote, so the task fails, saying why.

Why a check per task rather than a time-to-live or a watch: a time-to-live trusts the file for its
whole length, so a producer declared within it succeeded without voting on a host whose file was
younger; a watch needs a process per host that outlives the task processes (they live for one try).
The check costs a task with an outlet one connection and one read per pipeline while ZooKeeper is up,
and at most ``declared_check_timeout`` while it is down; a task no declaration names never fails for
it.

The file is ours: its folder is created mode 0700, both must belong to this user, no symlink is
followed, and it is replaced atomically (a reader sees the old filter or the new one).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from airflow_epochs.coordination.base.errors import CorruptPayload, InvalidConfig
from airflow_epochs.coordination.declared.records import ProducerFilter

__all__ = ["FILE_NAME", "FilterCacheError", "ProducerFilter", "describe", "load", "store"]

FILE_NAME = "declared-producers.json"
_MAX_BYTES = 4 * 1024 * 1024


class FilterCacheError(Exception):
    """The cache file or its folder is not ours (owner, mode, symlink) or not a filter."""


def _decoded(raw: bytes, path: Path) -> ProducerFilter:
    try:
        return ProducerFilter.from_bytes(raw, path=str(path))
    except (CorruptPayload, InvalidConfig) as exc:
        raise FilterCacheError(f"not a declared-producers filter: {exc}") from exc


def _check_ours(st: os.stat_result, path: Path, *, folder: bool) -> None:
    kind = stat.S_ISDIR if folder else stat.S_ISREG
    if not kind(st.st_mode):
        raise FilterCacheError(f"{path} is not a {'folder' if folder else 'regular file'} (symlinks are not followed)")
    if st.st_uid != os.getuid():
        raise FilterCacheError(f"{path} belongs to uid {st.st_uid}, not to this user ({os.getuid()})")
    if st.st_mode & 0o077:
        raise FilterCacheError(f"{path} has mode {stat.S_IMODE(st.st_mode):o}; only its owner may use it (0700/0600)")


def _folder(folder: Path, *, create: bool) -> Path:
    if create:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # then checked as any existing folder
            folder.mkdir(mode=0o700)
    _check_ours(os.lstat(folder), folder, folder=True)
    return folder


def load(folder: Path) -> ProducerFilter | None:
    """The filter cached in ``folder``; None if there is none. Raises :class:`FilterCacheError` if the
    file or its folder is not ours or not a filter."""
    path = folder / FILE_NAME
    try:
        _folder(folder, create=False)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FilterCacheError(f"cannot open {path}: {exc}") from exc
    try:
        _check_ours(os.fstat(fd), path, folder=False)
        raw = os.read(fd, _MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > _MAX_BYTES:
        raise FilterCacheError(f"{path} is larger than {_MAX_BYTES} bytes")
    return _decoded(raw, path)


def store(folder: Path, cached: ProducerFilter) -> Path:
    """Write ``cached`` to ``folder`` atomically (a temporary file of ours, then renamed over)."""
    _folder(folder, create=True)
    path = folder / FILE_NAME
    temp = folder / f".{FILE_NAME}.{os.getpid()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(cached.to_bytes())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return path


def describe(source: tuple[str, str, tuple[str, ...]]) -> str:
    """A short description of what a filter is for, for messages."""
    return f"pipelines {list(source[2])} on {source[0]!r} under {source[1]!r}"
