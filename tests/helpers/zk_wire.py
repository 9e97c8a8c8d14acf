"""A ZooKeeper client in the standard library alone, speaking the wire protocol by hand: what another
local user runs against our embedded server (the intruder cannot import our virtualenv's kazoo), and a
listener that records what a client sends to whoever squats a port.

Both are source text, run by the intruder with the system's ``python3``: ``python3 -c CLIENT ...``.
"""

from __future__ import annotations

# Usage: CLIENT HOST PORT tls|tls:CERT:KEY|plain SCHEME:CREDENTIAL|- OP:PATH[:SIZE] ...; prints one JSON
# object, each op -> the server's error code (0 = done), "closed" (the server hung up) or "refused";
# "connection": "refused: ..." when no session was had at all. tls:CERT:KEY shows that client certificate.
CLIENT = r'''
import json, socket, ssl, struct, sys

host, port, mode, auth = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
ops = sys.argv[5:]

def string(text):
    data = text.encode()
    return struct.pack(">i", len(data)) + data

def buffer(data):
    return struct.pack(">i", len(data)) + data

def frame(payload):
    return struct.pack(">i", len(payload)) + payload

def read_frame(sock):
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise EOFError
        head += chunk
    size = struct.unpack(">i", head)[0]
    body = b""
    while len(body) < size:
        chunk = sock.recv(min(65536, size - len(body)))
        if not chunk:
            raise EOFError
        body += chunk
    return body

results = {}
try:
    raw = socket.create_connection((host, port), timeout=10)
    if mode.startswith("tls"):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        if mode.count(":") == 2:
            context.load_cert_chain(*mode.split(":")[1:])
        raw = context.wrap_socket(raw)
    sock = raw
    sock.sendall(frame(struct.pack(">iqiq", 0, 0, 10000, 0) + buffer(b"\0" * 16) + b"\0"))
    read_frame(sock)
    if auth != "-":
        scheme, credential = auth.split(":", 1)
        sock.sendall(frame(struct.pack(">ii", -4, 100) + struct.pack(">i", 0) + string(scheme)
                           + buffer(credential.encode())))
        results["auth"] = struct.unpack(">iqi", read_frame(sock)[:16])[2]
    for xid, op in enumerate(ops, start=1):
        kind, path, *size = op.split(":")
        if kind == "create":
            acl = struct.pack(">i", 1) + struct.pack(">i", 31) + string("world") + string("anyone")
            body = struct.pack(">ii", xid, 1) + string(path) + buffer(b"x" * int(size[0])) + acl + struct.pack(">i", 0)
        elif kind == "get":
            body = struct.pack(">ii", xid, 4) + string(path) + b"\0"
        else:  # children
            body = struct.pack(">ii", xid, 8) + string(path) + b"\0"
        try:
            sock.sendall(frame(body))
            results[op.rsplit(":", 1)[0] if size else op] = struct.unpack(">iqi", read_frame(sock)[:16])[2]
        except (EOFError, OSError):
            results[op.rsplit(":", 1)[0] if size else op] = "closed"
except (EOFError, OSError) as exc:
    results["connection"] = "refused: " + type(exc).__name__
print(json.dumps(results))
'''

# Usage: SQUATTER PORT tls|plain [CERT_PEM] SECONDS; prints "listening" once bound, serves until a line
# arrives on its stdin (or SECONDS pass), then prints one JSON object: how many clients connected and
# every byte they sent (after the handshake, when it completed).
SQUATTER = r'''
import json, select, socket, ssl, sys, time

port, mode = int(sys.argv[1]), sys.argv[2]
cert, seconds = (sys.argv[3], float(sys.argv[4])) if mode == "tls" else (None, float(sys.argv[3]))
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(16)
print("listening", flush=True)
context = None
if cert:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert)
received, connections, handshakes, deadline = b"", 0, 0, time.monotonic() + seconds
while time.monotonic() < deadline:
    ready, _, _ = select.select([server, sys.stdin], [], [], 0.5)
    if sys.stdin in ready:
        break
    if server not in ready:
        continue
    conn, _ = server.accept()
    connections += 1
    conn.settimeout(2)
    try:
        if context is not None:
            conn = context.wrap_socket(conn, server_side=True)
            handshakes += 1
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            received += chunk
    except (OSError, ssl.SSLError):
        pass
    finally:
        conn.close()
print(json.dumps({"connections": connections, "handshakes": handshakes, "received": received.hex()}), flush=True)
'''

# Usage: FLOODER PORT tls|plain COUNT; tries COUNT sockets (completing the TLS handshake on a TLS port, so
# that each counts as a client connection), prints "ready N" (the ones opened), holds them idle until a line arrives on
# its stdin, then closes them.
FLOODER = r'''
import socket, ssl, sys

port, mode, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
held = []
for _ in range(count):
    try:  # a server that refuses more from this address closes the socket: count what it kept
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        held.append(context.wrap_socket(sock) if mode == "tls" else sock)
    except OSError:
        pass
print("ready", len(held), flush=True)
sys.stdin.readline()
for sock in held:
    sock.close()
'''
