"""Files only their owner can read: 0700 folders, 0600 files (server data, state, tokens, keys).

An embedded server's data holds everything ZooKeeper's ACLs protect, and the CLI's state folder holds
the Spark Connect token: other local users must not read them.
"""

from __future__ import annotations

import os
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: str | Path) -> Path:
    """Create ``path`` (and missing parents) and make it 0700; returns it."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, DIR_MODE)
    return folder


def write_private(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` as a 0600 file: through a temporary file created 0600 and renamed, so the
    content is never readable by others, not even for a moment, and readers see all or nothing."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.chmod(tmp, FILE_MODE)  # O_CREAT's mode is ignored for an existing file
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def open_private_log(path: str | Path) -> int:
    """A file descriptor appending to ``path``, created 0600 (for a child process's output)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return fd


def tighten(root: str | Path) -> None:
    """Make every folder under ``root`` 0700 and every file 0600 (what an earlier version left open).
    Symbolic links are not followed."""
    for folder, dirs, files in os.walk(root):
        os.chmod(folder, DIR_MODE)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, FILE_MODE)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
