"""Whether another local user could swap a path on this host, checked from ``/`` down.

Whoever may rename entries of a folder may replace any path below it, so a path is only as safe as its
least safe ancestor. A path is trusted when every component from ``/`` on is owned by root or by us,
and every folder on the way is writable by nobody else, or only with the sticky bit (like ``/tmp``:
there others may add entries but not rename ours, and the next component is checked to be ours or
root's). A symbolic link is followed only when it passes the same test, since then nobody else could
have placed or changed it. Imports nothing from Airflow or kazoo: the coordination core, the Spark
wing and the development servers all use it.
"""

from __future__ import annotations

import os
import posixpath
import pwd
import stat
from collections import deque

MAX_LINKS = 40  # the kernel's own limit on links followed in one lookup


class UntrustedPath(ValueError):
    """A component of a path is owned by, or replaceable by, another local user (or loops)."""


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _refuse(path: str, component: str, st: os.stat_result, why: str) -> UntrustedPath:
    return UntrustedPath(f"{path!r}: {component!r} {why} (owner {_owner(st.st_uid)}, mode "
                         f"{stat.S_IMODE(st.st_mode):04o}); another local user could swap the path")


def _check(path: str, component: str, st: os.stat_result) -> None:
    if st.st_uid not in (0, os.geteuid()):
        raise _refuse(path, component, st, "is owned by another user")
    if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise _refuse(path, component, st, "is writable by others without the sticky bit")


def resolve_trusted(path: str) -> str:
    """The real path of the absolute ``path``, every existing component checked (see the module
    docstring); links are followed only when trusted. The part that does not exist yet is appended as
    given (it will be created by us, under a checked folder).

    :raises UntrustedPath: a component is another user's, or in a folder others may rename entries of,
        or links loop.
    """
    if not isinstance(path, str) or not path.startswith("/"):
        raise UntrustedPath(f"{path!r} is not an absolute path")
    todo = deque(path.split("/"))
    current = "/"
    _check(path, "/", os.lstat("/"))
    links = 0
    while todo:
        name = todo.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            current = posixpath.dirname(current)
            continue
        candidate = posixpath.join(current, name)
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            return posixpath.normpath(posixpath.join(candidate, *todo))
        _check(path, candidate, st)
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if links > MAX_LINKS:
                raise UntrustedPath(f"{path!r}: more than {MAX_LINKS} symbolic links (a loop?)")
            target = os.readlink(candidate)
            todo.extendleft(reversed(target.split("/")))
            if target.startswith("/"):
                current = "/"
            continue
        if todo and not stat.S_ISDIR(st.st_mode):
            raise UntrustedPath(f"{path!r}: {candidate!r} is not a folder")
        current = candidate
    return current


def check_trusted(path: str) -> None:
    """Refuse (:class:`UntrustedPath`) a path whose existing part another user could swap."""
    resolve_trusted(path)


class OutsideRoot(UntrustedPath):
    """A path that is not a plain absolute path inside the given root (or not a regular file there)."""


def read_inside(root: str, path: object, *, limit: int = 16 << 20) -> bytes:
    """The bytes of the regular file ``path`` if it lies inside ``root``, both resolved through trusted
    links only (:func:`resolve_trusted`); opened without following a link, refused with more than one
    hard link (a planted link to another user's file) or more than ``limit`` bytes.

    :raises OutsideRoot: naming ``path``, before anything is read.
    :raises UntrustedPath: a component of either path is another user's to swap.
    """
    if not isinstance(path, str) or not path.startswith("/") or posixpath.normpath(path) != path \
            or any(ord(ch) < 32 for ch in path):
        raise OutsideRoot(f"{path!r} is not a plain absolute path; nothing was read")
    real_root = resolve_trusted(root).rstrip("/")
    real = resolve_trusted(path)
    if not real.startswith(real_root + "/"):
        raise OutsideRoot(f"{path!r} is not inside {root!r}; nothing was read")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise OutsideRoot(f"{path!r} cannot be opened inside {root!r}: {exc.strerror}; nothing was read") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise OutsideRoot(f"{path!r} is not a regular file with one link; nothing was read")
    with os.fdopen(fd, "rb") as source:
        data = source.read(limit + 1)
    if len(data) > limit:
        raise OutsideRoot(f"{path!r} is larger than {limit} bytes; nothing was used")
    return data
