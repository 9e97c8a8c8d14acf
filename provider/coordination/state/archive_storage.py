"""Where the past is stored: files under an archive location (a local folder or any filesystem URI
pyarrow opens), each written once and never rewritten.

A local folder or file is used only if it is ours, not writable by others and not a symbolic link
(:class:`UnsafeArchive` otherwise): whoever can write there could rewrite the recorded past. Like our state
folder, its whole path is checked from ``/`` down (:func:`~airflow_epochs.path_trust.resolve_trusted`):
every folder on the way ours or root's and shared only with the sticky bit, and a link followed only when
nobody else could have placed it, so an archive under another user's folder is refused before anything is
written into or read from it (that user could swap a folder on the way for a link into another tree). A
file is created under a temporary name and linked to its final name, which fails if the name exists;
object stores have no exclusive create, so there a second writer can only write the same bytes.
"""

from __future__ import annotations

import os
import stat as filemode
import uuid
from typing import Any

from airflow_epochs.coordination.base.errors import CorruptPayload
from airflow_epochs.path_trust import UntrustedPath, resolve_trusted


def _pafs() -> Any:
    """pyarrow's filesystems, imported when the archive is first touched: a task that archives nothing (an
    opening, an arrival, a close that compacts nothing) then never loads pyarrow and numpy, about 0.3
    CPU-seconds of every such task's start (issue 50)."""
    from pyarrow import fs  # type: ignore[import-untyped]

    return fs


class UnsafeArchive(CorruptPayload):
    """A local archive folder or file that another user could have planted or changed."""


def _check_local(path: str, *, folder: bool) -> None:
    """Refuse a local archive folder or file that is a symbolic link, not ours, or writable by others:
    whoever can write there could rewrite the recorded past."""
    st = os.lstat(path)
    kind_ok = filemode.S_ISDIR(st.st_mode) if folder else filemode.S_ISREG(st.st_mode)
    if filemode.S_ISLNK(st.st_mode) or not kind_ok:
        raise UnsafeArchive(f"{path}: archive {'folder' if folder else 'file'} is a symbolic link or of another kind")
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise UnsafeArchive(f"{path}: archive {'folder' if folder else 'file'} is owned by uid {st.st_uid} with mode "
                            f"{filemode.S_IMODE(st.st_mode):04o}; it must be ours and not writable by others")


def _trusted(path: str) -> str:
    """``path`` once every existing component of it is checked to be one nobody else could swap
    (:class:`UnsafeArchive` otherwise); the part still missing is created by us under it."""
    try:
        resolve_trusted(path)
        return path
    except UntrustedPath as exc:
        raise UnsafeArchive(f"{path}: archive path refused: {exc}") from None


def filesystem(location: str) -> tuple[Any, str]:
    try:
        found: tuple[Any, str] = _pafs().FileSystem.from_uri(location)
        return found
    except (ValueError, OSError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise CorruptPayload(f"archive location cannot be opened: {exc}") from None


def read_stored(location: str, relative: str) -> bytes | None:
    """The raw file at ``relative`` (a path under ``location``), or None if there is none."""
    fs, base = filesystem(location)
    path = f"{base.rstrip('/')}/{relative}"
    if isinstance(fs, _pafs().LocalFileSystem):
        _trusted(path)
    if fs.get_file_info(path).type == _pafs().FileType.NotFound:
        return None
    if isinstance(fs, _pafs().LocalFileSystem):
        _check_local(os.path.dirname(path), folder=True)
        _check_local(path, folder=False)
    with fs.open_input_stream(path) as stream:
        data: bytes = stream.read()
    return data


def stored_names(location: str, relative: str) -> list[str]:
    """The names of the files in the folder ``relative`` under ``location`` (none if it does not exist)."""
    fs, base = filesystem(location)
    path = f"{base.rstrip('/')}/{relative}"
    if isinstance(fs, _pafs().LocalFileSystem):
        _trusted(path)
        if os.path.lexists(path):
            _check_local(path, folder=True)
    infos = fs.get_file_info(_pafs().FileSelector(path, allow_not_found=True))
    return sorted(info.base_name for info in infos if info.type == _pafs().FileType.File)


def _write_local(path: str, content: bytes) -> bool:
    """Create ``path`` with ``content`` exclusively (False if it exists): write a private temporary
    file (never following a symlink), then hard-link it to the final name."""
    folder = _trusted(os.path.dirname(path))  # before anything is created: the part missing is made by us
    os.makedirs(folder, mode=0o750, exist_ok=True)
    _check_local(os.path.dirname(folder), folder=True)
    _check_local(folder, folder=True)
    temporary = f"{path}.{uuid.uuid4().hex}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o640)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(temporary)


def write_stored_once(location: str, relative: str, content: bytes) -> bool:
    """Write the file ``relative`` under ``location`` unless it exists; True if this call wrote it."""
    fs, base = filesystem(location)
    path = f"{base.rstrip('/')}/{relative}"
    if isinstance(fs, _pafs().LocalFileSystem):
        _trusted(path)
    if fs.get_file_info(path).type != _pafs().FileType.NotFound:
        return False
    if isinstance(fs, _pafs().LocalFileSystem):
        return _write_local(path, content)
    # Object stores have no exclusive create: a racing writer of the same file writes the same bytes.
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    temporary = f"{path}.{uuid.uuid4().hex}.tmp"
    with fs.open_output_stream(temporary) as out:
        out.write(content)
    fs.move(temporary, path)
    return True
