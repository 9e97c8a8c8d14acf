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
