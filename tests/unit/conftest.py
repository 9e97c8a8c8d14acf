"""The unit tier holds only tests that need no server: this guard makes that a fact, not a hope.

Every unit test runs with network connections and foreign programs refused: a test that opens a TCP
connection (loopback included: a ZooKeeper, Spark, PostgreSQL or Airflow server) or starts a program
other than this interpreter fails, naming what it tried. Such a test belongs in tests/integration or
tests/system. ``python -m`` and ``python -c`` children of this interpreter are fine.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from unit_guard import ServerUseInUnitTier, allowed_program


@pytest.fixture(autouse=True)
def no_servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real_connect = socket.socket.connect
    real_popen_init = subprocess.Popen.__init__

    def guarded_connect(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise ServerUseInUnitTier(f"a unit test connected to {address!r}: move it to tests/integration")
        real_connect(self, address)

    def guarded_popen(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        if not allowed_program(args):
            raise ServerUseInUnitTier(f"a unit test started {args!r}: move it to tests/integration")
        real_popen_init(self, args, *rest, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(subprocess.Popen, "__init__", guarded_popen)
    yield

