"""A second local user polling for secret files while we start something (issue 48: the PostgreSQL password
was read from ``initdb``'s password file while it existed).

The poller runs as the intruder (:mod:`intruder`) with the system's python3: round after round, it lists each
root it is given (``/tmp``, as any user may), and in every entry it finds tries to open each of the relative
names it is given (where our code puts its secret files, as an attacker reading the source knows), and
the entry itself when it is a file. Whatever it reads is reported, so the test can check that no secret is
among it, and how many rounds it made, so that a poller that never ran cannot pass.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from intruder import Intruder

POLLER = r"""
import json, os, select, sys
roots, names = sys.argv[1].split(":"), sys.argv[2].split(":")
read, rounds, opened = {}, 0, 0
def take(path):
    global opened
    try:
        with open(path, "rb") as handle:
            data = handle.read(4096)
    except OSError:
        return
    opened += 1
    if data:
        read[path] = data.decode(errors="replace")
print("polling", flush=True)
while not select.select([sys.stdin], [], [], 0)[0]:
    rounds += 1
    for root in roots:
        try:
            entries = [entry.path for entry in os.scandir(root)]
        except OSError:
            continue
        for entry in entries:
            take(entry)
            for name in names:
                take(os.path.join(entry, name))
print(json.dumps({"rounds": rounds, "opened": opened, "read": read}), flush=True)
"""


@dataclass
class Polled:
    """What the poller read: ``read`` maps each path it could read to its first bytes."""

    rounds: int = 0
    opened: int = 0
    read: dict[str, str] = field(default_factory=dict)

    def holding(self, *secrets: str) -> dict[str, str]:
        """The files read that hold any of ``secrets``."""
        return {path: text for path, text in self.read.items() if any(s and s in text for s in secrets)}


@contextlib.contextmanager
def polling_for_secrets(intruder: Intruder, roots: Sequence[Path | str], names: Sequence[str]) -> Iterator[Polled]:
    """Poll as ``intruder`` for the whole ``with`` block; the yielded :class:`Polled` is filled on exit."""
    polled = Polled()
    process = intruder.popen(["/usr/bin/python3", "-I", "-c", POLLER, ":".join(map(str, roots)), ":".join(names)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "polling"
        yield polled
    finally:
        out, _ = process.communicate("stop\n", timeout=120)
        report = json.loads(out.strip().splitlines()[-1])
        polled.rounds, polled.opened, polled.read = report["rounds"], report["opened"], report["read"]


# Every process's command line, as any local user reads them (what ``ps`` shows): one line each.
COMMAND_LINES = r"""
import os
for pid in os.listdir("/proc"):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            print(handle.read().replace(b"\0", b" ").decode(errors="replace"))
    except OSError:
        pass
"""


def secrets_on_command_lines(intruder: Intruder, secrets: Mapping[str, str]) -> list[str]:
    """The names of ``secrets`` whose value is on any process's command line, read as ``intruder``."""
    shown = intruder.run(["/usr/bin/python3", "-I", "-c", COMMAND_LINES], cwd="/", timeout=120).stdout
    assert len(shown.splitlines()) > 20, shown  # the control: it read the process list
    return sorted(name for name, value in secrets.items() if value and value in shown)
