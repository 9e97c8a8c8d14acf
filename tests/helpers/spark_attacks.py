"""The second local user's attacks on Spark: clients of Spark's own RPC that send a driver
``StopBlockManagerMaster`` (tests/helpers/ForgedStopBlockManagerMaster.java) or ask a standalone master or
worker for its state (tests/helpers/ForgedDeployRequest.java), compiled for the test; and an HTTP GET of a
port (:data:`HTTP_GET`, a script for ``python3 -I -c``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ATTACK_SOURCE = Path(__file__).parent / "ForgedStopBlockManagerMaster.java"
DEPLOY_ATTACK_SOURCE = Path(__file__).parent / "ForgedDeployRequest.java"
HTTP_GET = """
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10) as s:
        s.settimeout(10)
        s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
        print(s.recv(100).split(b"\\r\\n")[0].decode(errors="replace") or "EMPTY")
except OSError as exc:
    print("ERROR", type(exc).__name__)
"""


def compile_attack(folder: Path, source: Path = ATTACK_SOURCE) -> str:
    """Compile the attacker (a client of Spark's own RPC) into ``folder``; its class path, readable by all."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    subprocess.run(["javac", "-cp", f"{jars}/*", "-d", str(folder), str(source)], check=True,
                   capture_output=True, timeout=300)
    for path in [folder, *folder.iterdir()]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return f"{folder}:{jars}/*"
