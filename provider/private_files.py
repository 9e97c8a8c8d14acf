"""State only its owner can read or plant: 0700 folders, 0600 files (server data, state, tokens, keys).

An embedded server's data holds everything ZooKeeper's ACLs protect, and the CLI's state folder holds
the Spark Connect token: other local users must not read them. Nor may they *plant* them: a state
folder or file that another user owns (or may write) is refused with one line naming the path, its
owner and its mode, because what it says (a token to adopt, a process to stop, a port to reuse) would
come from that user. Nothing here follows a symbolic link when it creates, replaces or tightens state:
files are created ``O_EXCL | O_NOFOLLOW`` under a random name inside a folder opened ``O_NOFOLLOW``,
then renamed over the target (a rename replaces a link, it never writes through it).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import pwd
import secrets
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from airflow_epochs.path_trust import UntrustedPath, resolve_trusted

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "StateLocked",
    "UnsafeState",
    "check_private_dir",
    "create_secret_file",
    "exclusive_lock",
    "open_private_log",
    "private_dir",
    "read_private",
    "replace_file",
    "tighten",
    "write_private",
]

DIR_MODE = 0o700
FILE_MODE = 0o600
MAX_STATE_BYTES = 1 << 20  # a state file or token is a few hundred bytes; never read more than this
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class UnsafeState(RuntimeError):
    """A state folder or file that another user owns, may write, or that is a symbolic link."""


class StateLocked(RuntimeError):
    """Another process held a state lock for longer than we were willing to wait."""


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _refuse(path: str | Path, st: os.stat_result, why: str) -> UnsafeState:
    return UnsafeState(f"{path}: {why} (owner {_owner(st.st_uid)}, mode {stat.S_IMODE(st.st_mode):04o}); "
                       f"state must be owned by {_owner(os.geteuid())} and writable by nobody else: "
                       "refusing to use it")


def _check(path: str | Path, st: os.stat_result, *, folder: bool, secret: bool = False) -> os.stat_result:
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(path, st, "is a symbolic link")
    if folder and not stat.S_ISDIR(st.st_mode):
        raise _refuse(path, st, "is not a folder")
    if not folder and not stat.S_ISREG(st.st_mode):
        raise _refuse(path, st, "is not a regular file")
    if st.st_uid != os.geteuid():
        raise _refuse(path, st, "is owned by another user")
    if st.st_mode & (0o077 if secret else 0o022):
        raise _refuse(path, st, "is readable or writable by others" if secret else "is writable by others")
    return st


def check_private_dir(path: str | Path) -> os.stat_result:
    """Refuse (:class:`UnsafeState`) a folder that is a link, not ours, or writable by others."""
    return _check(path, os.lstat(path), folder=True)


def _check_parent(folder: Path) -> None:
    """Whoever may rename entries of any folder above a state folder may swap it (a grandparent owned by
    another user can move the whole branch away and put its own in place): every ancestor up to ``/``
    must be ours or root's, and shared only with the sticky bit (like /tmp), each entry on the way
    ours or root's; links on the way are followed only when they pass the same test."""
    try:
        resolve_trusted(str(folder))
    except UntrustedPath as exc:
        raise UnsafeState(f"{folder}: would hold a state folder, but {exc}; state must be owned by "
                          f"{_owner(os.geteuid())} and writable by nobody else: refusing to use it") from None


@contextlib.contextmanager
def _open_dir(folder: Path) -> Iterator[int]:
    """A descriptor of ``folder`` (not followed if it is a link), checked to be private."""
    try:
        fd = os.open(folder, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refuse(folder, os.lstat(folder), "is a symbolic link or not a folder") from None
        raise
    try:
        _check(folder, os.fstat(fd), folder=True)
        yield fd
    finally:
        os.close(fd)


def private_dir(path: str | Path) -> Path:
    """Create ``path`` 0700 (missing parents as usual) or check the existing one; returns it.

    An existing folder must be ours and must not be a link or writable by others (:class:`UnsafeState`);
    one we own that an earlier version left 0755 is tightened to 0700 through its descriptor.
    """
    folder = Path(path).absolute()
    _check_parent(folder.parent)  # before anything is created (its missing part is created by us)
    folder.parent.mkdir(parents=True, exist_ok=True)
    _check_parent(folder.parent)
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, DIR_MODE)
    with _open_dir(folder) as fd:
        if stat.S_IMODE(os.fstat(fd).st_mode) != DIR_MODE:
            os.fchmod(fd, DIR_MODE)
    return folder


def _replace_in(folder: int, name: str, data: bytes, mode: int) -> None:
    """Create a file under a random name in the open folder ``folder`` (``O_EXCL | O_NOFOLLOW``: a planted
    link or file makes it fail, never written through), write ``data``, then rename it over ``name``."""
    tmp = f".{name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode, dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=folder)
        raise


def write_private(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` as a 0600 file in a private folder, replaced atomically (readers see all
    or nothing) without following any link, so nobody else ever could read it."""
    target = Path(path)
    with _open_dir(target.parent.absolute()) as folder:
        _replace_in(folder, target.name, text.encode(), FILE_MODE)
    return target


def create_secret_file(path: str | Path, text: str, *, owner: tuple[int, int] | None = None) -> Path:
    """A new secret file for another program to read (``initdb --pwfile``): its folder ``path.parent`` is
    created here, 0700, and must not exist yet (nobody else can have planted anything in it); the file is
    created in it ``O_CREAT | O_EXCL | O_NOFOLLOW`` with mode 0600, so it has its final mode before a byte
    is written. With ``owner`` (uid, gid: the account that reads it, when we are root), folder and file are
    handed to that account before ``text`` is written. Remove the folder when done.

    :raises FileExistsError: the folder exists already (planted, or left by an earlier run).
    :raises UnsafeState: a folder above it could be swapped by another user.
    """
    target = Path(path).absolute()
    _check_parent(target.parent.parent)
    os.mkdir(target.parent, DIR_MODE)  # fails if anything is there; the umask can only narrow 0700
    with _open_dir(target.parent) as folder:
        os.fchmod(folder, DIR_MODE)
        fd = os.open(target.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, FILE_MODE,
                     dir_fd=folder)
        with os.fdopen(fd, "w") as out:
            os.fchmod(fd, FILE_MODE)
            if owner is not None:
                os.fchown(fd, *owner)
                os.fchown(folder, *owner)
            out.write(text)
    return target


def replace_file(path: str | Path, data: bytes, mode: int = 0o644) -> Path:
    """Write ``data`` to ``path`` (an output, in any folder) without following a link planted there. In a
    shared sticky folder, a file or link of another user in the way makes the rename fail (EPERM):
    nothing of theirs is written through."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    fd_dir = os.open(folder, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        _replace_in(fd_dir, target.name, data, mode)
    finally:
        os.close(fd_dir)
    return target


def read_private(path: str | Path, *, secret: bool = False) -> str:
    """The text of a state file we own (not a link, not writable by others; with ``secret`` also not
    readable by others: a token is adopted only from a 0600 file of ours).

    :raises FileNotFoundError: there is none.
    :raises UnsafeState: it is a link, another user's, or too open.
    """
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(path, os.lstat(path), "is a symbolic link") from None
        raise
    with os.fdopen(fd, "rb") as source:
        _check(path, os.fstat(fd), folder=False, secret=secret)
        data = source.read(MAX_STATE_BYTES + 1)
    if len(data) > MAX_STATE_BYTES:
        raise UnsafeState(f"{path}: larger than {MAX_STATE_BYTES} bytes; not a state file of ours")
    return data.decode(errors="replace")


def open_private_log(path: str | Path) -> int:
    """A file descriptor appending to ``path``, created 0600 (for a child process's output); never
    through a link, never another user's file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _CLOEXEC, FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(path, os.lstat(path), "is a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or not stat.S_ISREG(st.st_mode):
            raise _refuse(path, st, "is another user's file or not a regular file")
        os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def tighten(root: str | Path) -> None:
    """Make every folder under ``root`` 0700 and every file 0600 (what an earlier version left open),
    through descriptors opened without following links: links are left alone, and so is anything
    another user owns."""
    for _folder, _dirs, files, dir_fd in os.fwalk(root, follow_symlinks=False):
        if os.fstat(dir_fd).st_uid == os.geteuid():
            os.fchmod(dir_fd, DIR_MODE)
        for name in files:
            try:
                fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
            except OSError:
                continue  # a link (ELOOP), or gone meanwhile
            try:
                st = os.fstat(fd)
                if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                    os.fchmod(fd, FILE_MODE)
            finally:
                os.close(fd)


@contextlib.contextmanager
def exclusive_lock(path: str | Path, *, timeout: float, holder: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (a 0600 lock file of ours in a private folder, created
    ``O_NOFOLLOW``; a link or another user's file is :class:`UnsafeState`) for the ``with`` block.

    The lock goes with the descriptor: a holder that dies releases it. Waits up to ``timeout`` seconds
    for another holder, then raises :class:`StateLocked` naming ``holder`` (what the lock guards).
    """
    target = Path(path)
    with _open_dir(target.parent.absolute()) as folder:
        try:
            fd = os.open(target.name, os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC, FILE_MODE, dir_fd=folder)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refuse(target, os.lstat(target), "is a symbolic link") from None
            raise
    try:
        _check(target, os.fstat(fd), folder=False, secret=True)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StateLocked(f"{target} is locked: another process has been busy with {holder} for "
                                      f"over {timeout:g} s; try again when it is done") from None
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)  # releases the lock
