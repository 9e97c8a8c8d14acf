"""The checkout's state folder (``.epochs``: install log and stamp, the demo's and the cluster's state) is
made ours alone by the scripts' bootstrap, whatever the umask, and put back to 0700 if it was left open."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_bootstrap_leaves_the_state_folder_ours_alone() -> None:
    state = REPO / ".epochs"
    if state.is_dir() and not state.is_symlink():
        state.chmod(0o755)  # as an older bootstrap left it under umask 022
    script = f"umask 022; source {REPO / 'scripts' / 'bootstrap.sh'}"
    subprocess.run(["bash", "-c", script], check=True, capture_output=True, timeout=600)
    info = os.lstat(state)
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
    assert stat.S_IMODE(info.st_mode) == 0o700, oct(info.st_mode)
