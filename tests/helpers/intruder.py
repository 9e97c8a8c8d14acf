"""A throw-away second local user for attack tests: created with ``useradd``, removed afterwards.

Tests that need it skip (saying so) when not run as root. The intruder acts through ``setpriv``
with its own uid and gid and no supplementary groups: a plain account with no rights.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Intruder:
    name: str
    uid: int
    gid: int

    def argv(self, command: Sequence[str]) -> list[str]:
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--", *command]

    def run(self, command: Sequence[str], *, check: bool = True, timeout: float = 60,
            **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(command), capture_output=True, text=True, timeout=timeout, check=check,
                              **kwargs)  # type: ignore[call-overload]

    def sh(self, script: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run(["sh", "-c", script], check=check)

    def popen(self, command: Sequence[str], **kwargs: object) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.argv(command), **kwargs)  # type: ignore[call-overload]


def skip_unless_root() -> None:
    # CI runs as root with these tools: there a missing second user is a failure, never a silent skip.
    give_up = pytest.fail if os.environ.get("CI") == "true" else pytest.skip
    if os.geteuid() != 0:
        give_up("runs the attack as a throw-away second local user, which needs root to create (useradd)")
    for tool in ("useradd", "userdel", "setpriv"):
        if shutil.which(tool) is None:
            give_up(f"{tool} is not installed: cannot create or act as a second local user")


@contextlib.contextmanager
def second_user() -> Iterator[Intruder]:
    """A new local user with no home and no rights, deleted on exit."""
    skip_unless_root()
    name = f"epx{secrets.token_hex(4)}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True,
                   capture_output=True)
    try:
        entry = pwd.getpwnam(name)
        yield Intruder(name, entry.pw_uid, entry.pw_gid)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


@contextlib.contextmanager
def shared_folder() -> Iterator[Path]:
    """A folder every local user may create entries in (sticky, like /tmp), removed on exit."""
    folder = Path(tempfile.mkdtemp(prefix="epochs-shared-", dir="/tmp"))
    try:
        os.chmod(folder, 0o1777)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
