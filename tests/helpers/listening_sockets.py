"""Which TCP addresses a process listens on, read from /proc (no ``ss`` or ``lsof`` needed)."""

from __future__ import annotations

import os
from pathlib import Path


def listening_addresses(pids: list[int]) -> set[tuple[str, int]]:
    """(address in /proc's hex form, port) of every TCP socket the processes listen on."""
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                address, port = fields[1].split(":")
                found.add((address, int(port, 16)))
    return found
