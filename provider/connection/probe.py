"""Four-letter admin words (``srvr``, ``mntr``...): how a client asks a ZooKeeper server whether it
serves, in which mode, with which counters, without a session.

Below both the development servers (which wait for their start through it) and the clients that
check that a recorded embedded server still serves before they hand it credentials.
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

__all__ = ["four_letter_word"]


def four_letter_word(port: int, word: str = "srvr", *, host: str = "127.0.0.1", timeout: float = 1.0,
                     ca: str | Path | None = None, certfile: str | Path | None = None,
                     keyfile: str | Path | None = None) -> str:
    """Send a four-letter admin word to a server and return its answer ("" if it does not answer).

    :param ca: the port serves TLS only: speak TLS, checking the server's certificate against this CA.
    :param certfile: our client certificate, for a server that requires one (with ``keyfile``).
    """
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            sock = raw
            if ca is not None:
                context = ssl.create_default_context(cafile=str(ca))
                if certfile is not None and keyfile is not None:
                    context.load_cert_chain(str(certfile), str(keyfile))
                sock = context.wrap_socket(raw, server_hostname=host)
            sock.sendall(word.encode())
            chunks = []
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""
