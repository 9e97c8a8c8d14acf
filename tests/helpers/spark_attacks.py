"""The second local user's attack on a Spark driver's RPC: a client of Spark's own RPC that sends
``StopBlockManagerMaster`` (tests/helpers/ForgedStopBlockManagerMaster.java), compiled for the test."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ATTACK_SOURCE = Path(__file__).parent / "ForgedStopBlockManagerMaster.java"


def compile_attack(folder: Path) -> str:
    """Compile the attacker (a client of Spark's own RPC) into ``folder``; its class path, readable by all."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    subprocess.run(["javac", "-cp", f"{jars}/*", "-d", str(folder), str(ATTACK_SOURCE)], check=True,
                   capture_output=True, timeout=300)
    for path in [folder, *folder.iterdir()]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return f"{folder}:{jars}/*"
