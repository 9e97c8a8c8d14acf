"""Who listens on a loopback port: checked from ``/proc`` before a client sends a secret there.

Any local user may listen on a loopback port nobody holds. A client that sends a token to
``localhost:PORT`` must therefore know that the socket it reaches is its server's: gRPC resolves
``localhost`` to ``::1`` first, so a server bound to 127.0.0.1 alone leaves ``[::1]:PORT`` to whoever
takes it. Our clients connect to one exact address (:func:`pinned_address`) after checking the socket
listening there belongs to a trusted account (this process's, or root's) and, where the caller knows
it, to the server's own process group. Linux only (``/proc/net/tcp*``); elsewhere the check refuses.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

LOOPBACK_V4 = "127.0.0.1"
LOOPBACK_V6 = "::1"
_LISTEN = "0A"
_ANY6 = "0" * 32


def _reaching(address: str) -> set[str]:
    """/proc's hex forms of the listening addresses that take connections made to ``address`` (the
    address itself, its IPv4-mapped form and the wildcards)."""
    if address == LOOPBACK_V6:
        return {"00000000000000000000000001000000", _ANY6}
    v4 = ipaddress.IPv4Address(address).packed[::-1].hex().upper()  # /proc writes it little-endian
    return {v4, "00000000", _ANY6, f"0000000000000000FFFF0000{v4}", "0000000000000000FFFF000000000000"}


class UntrustedListener(RuntimeError):
    """The socket listening on a loopback port is not our server's: nothing was sent to it."""


@dataclass(frozen=True)
class Listener:
    """One listening TCP socket from ``/proc/net/tcp`` or ``tcp6``."""

    address: str  # /proc's hex form
    port: int
    uid: int
    inode: str


def listeners(port: int) -> list[Listener]:
    """Every listening TCP socket on ``port``, whatever its address (all users' sockets are listed)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            address, _, hex_port = fields[1].partition(":")
            if fields[3] == _LISTEN and int(hex_port, 16) == port:
                found.append(Listener(address, port, int(fields[7]), fields[9]))
    return found


def process_group(pgid: int) -> list[int]:
    """The pids of process group ``pgid`` (those this account may see)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) == pgid:
                pids.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return pids


def socket_inodes(pids: list[int]) -> set[str]:
    """The inodes of the sockets the processes ``pids`` hold open."""
    inodes = set()
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def trusted_uids() -> frozenset[int]:
    """Accounts whose listening sockets we trust: our own, and root (who can read our memory anyway)."""
    return frozenset({os.geteuid(), 0})


def check_listener(address: str, port: int, *, server_group: int | None = None) -> None:
    """Refuse unless every socket that takes connections to ``address:port`` is a trusted account's
    and, when ``server_group`` is given, held by a process of that process group.

    :param address: ``::1`` or an IPv4 loopback address (``127.x.y.z``).
    :raises UntrustedListener: nobody listens there, or a socket there is not ours (naming its uid).
    """
    if not is_loopback(address) or address == "localhost":
        raise ValueError(f"{address!r} is not a loopback address")
    reaching = _reaching(address)
    reached = [found for found in listeners(port) if found.address in reaching]
    if not reached:
        raise UntrustedListener(f"nothing listens on {address} port {port}")
    strangers = [found for found in reached if found.uid not in trusted_uids()]
    if strangers:
        raise UntrustedListener(f"port {port} on {address} is held by uid {strangers[0].uid}, not by our server: "
                                "nothing was sent to it")
    if server_group is not None:
        ours = socket_inodes(process_group(server_group))
        if any(found.inode not in ours for found in reached):
            raise UntrustedListener(f"port {port} on {address} is not held by the server's processes "
                                    f"(process group {server_group}): nothing was sent to it")


def pinned_address(host: str, port: int, *, server_group: int | None = None) -> str:
    """The exact loopback address a client of ``host:port`` connects to, once checked
    (:func:`check_listener`): 127.0.0.1 for ``localhost``, else the address itself.

    :raises UntrustedListener: the socket there is not our server's.
    """
    bare = host.strip("[]").lower()
    address = LOOPBACK_V4 if bare == "localhost" else str(ipaddress.ip_address(bare))
    check_listener(address, port, server_group=server_group)
    return address


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback (``localhost``, ``127.x.y.z``, ``::1``)."""
    bare = host.strip("[]").lower()
    if bare == "localhost":
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False
