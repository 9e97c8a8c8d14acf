"""Attacks on a ZooKeeper port, run as the throw-away second local user (tests/helpers/intruder.py)."""

from __future__ import annotations

from intruder import Intruder

# The second user's client: COUNT connections (or until SECONDS pass), each a TLS handshake (with the
# certificate and key given, if any), a ZooKeeper ConnectRequest and, if a session were granted, a
# setWatches for WATCHES made-up paths. Prints how many connections got any ZooKeeper answer.
ATTACK = r"""
import socket, ssl, struct, sys, time
port, count, seconds, watches = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
cert = sys.argv[5:7]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
if cert:
    ctx.load_cert_chain(cert[0], cert[1])
connect = struct.pack("!iqiqi", 0, 0, 30000, 0, 16) + b"\0" * 16 + b"\0"
paths = b"".join(struct.pack("!i", len(p)) + p for p in (f"/w{i}".encode() for i in range(watches)))
set_watches = struct.pack("!ii", -8, 101) + struct.pack("!q", 0) + struct.pack("!i", watches) + paths + \
    struct.pack("!ii", 0, 0)
answered = tried = 0
end = time.monotonic() + seconds
while tried < count and time.monotonic() < end:
    tried += 1
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, ctx.wrap_socket(raw) as s:
            s.sendall(struct.pack("!i", len(connect)) + connect)
            if s.recv(64):
                answered += 1
                s.sendall(struct.pack("!i", len(set_watches)) + set_watches)
    except (OSError, ssl.SSLError):
        pass
print("TRIED", tried, "ANSWERED", answered, flush=True)
"""



def attack(intruder: Intruder, port: int, count: int, *, cert: list[str] | None = None,
           watches: int = 2000, seconds: float = 60) -> tuple[int, int]:
    """Run :data:`ATTACK` as ``intruder`` against ``port``; returns (connections tried, answered)."""
    done = intruder.run(["/usr/bin/python3", "-I", "-c", ATTACK, str(port), str(count), str(seconds),
                         str(watches), *(cert or [])], cwd="/", timeout=seconds + 60)
    fields = done.stdout.split()
    return int(fields[1]), int(fields[3])
