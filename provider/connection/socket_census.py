"""Who holds connections to a loopback port: how a client or a watchdog tells another local user's flood of
idle sockets from a server that is dead or wedged.

On Linux every TCP socket of the host's network namespace is listed in ``/proc/net/tcp`` (and ``tcp6``)
with the uid of its owner, readable by every user. A connection from a client to our server appears there
as the client's socket (its remote end is the server's port), so the sockets of other accounts connected
or connecting to our port can be counted by owner without any privilege. Our server requires our client
certificate: no other account has a reason to hold a connection to it, and hundreds of them are a flood.
"""

from __future__ import annotations

import os
import pwd
from collections import Counter
from dataclasses import dataclass

__all__ = ["FLOOD_CONNECTIONS", "Flood", "flood_on"]

#: Sockets of other accounts connected or connecting to our port from which on we call it a flood: far
#: above anything a mistake makes (nobody else can complete a handshake), far below what locks clients out.
FLOOD_CONNECTIONS = 200
_CLIENT_STATES = frozenset({"01", "02"})  # ESTABLISHED, SYN_SENT: a client's end of a connection
_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


@dataclass(frozen=True)
class Flood:
    """Sockets of other accounts connected to ``port``: ``by_uid`` maps each owner to its count."""

    port: int
    by_uid: dict[int, int]

    @property
    def total(self) -> int:
        return sum(self.by_uid.values())

    def describe(self) -> str:
        owners = ", ".join(f"{_account(uid)} {count:,}" for uid, count in
                           sorted(self.by_uid.items(), key=lambda item: -item[1]))
        return f"other local users hold {self.total:,} connections to port {self.port} ({owners})"


def _account(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _loopback(address: str) -> bool:
    """Whether a ``/proc/net/tcp`` address (32-bit words in hex, little-endian) is 127/8, ``::1`` or
    ``::ffff:127.x.y.z``."""
    if len(address) == 8:  # the first octet is the last byte
        return address[6:8] == "7F"
    if address == "00000000000000000000000001000000":  # ::1
        return True
    return address.startswith("0000000000000000FFFF0000") and address[30:32] == "7F"


def foreign_connections(port: int) -> Counter[int]:
    """The sockets of accounts other than ours whose remote end is ``port`` on a loopback address, by uid."""
    me = os.geteuid()
    found: Counter[int] = Counter()
    wanted = f"{port:04X}"
    for table in _TABLES:
        try:
            with open(table, encoding="ascii", errors="replace") as rows:
                next(rows, None)  # the header
                for row in rows:
                    fields = row.split()
                    if len(fields) < 8 or fields[3] not in _CLIENT_STATES:
                        continue
                    address, _, remote_port = fields[2].partition(":")
                    if remote_port != wanted or not _loopback(address):
                        continue
                    uid = int(fields[7])
                    if uid != me:
                        found[uid] += 1
        except OSError:  # not Linux, or /proc not mounted: no census, so never a flood
            continue
    return found


def flood_on(port: int, *, threshold: int = FLOOD_CONNECTIONS) -> Flood | None:
    """The flood on our loopback ``port``, if other accounts hold at least ``threshold`` connections to it."""
    found = foreign_connections(port)
    return Flood(port, dict(found)) if sum(found.values()) >= threshold else None
