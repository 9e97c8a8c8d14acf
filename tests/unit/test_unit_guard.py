"""The unit tier's guard (tests/unit/conftest.py), checked: it must be able to fail a test."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from unit_guard import ServerUseInUnitTier


def test_the_guard_refuses_a_connection_and_a_foreign_program() -> None:
    with socket.socket() as sock, pytest.raises(ServerUseInUnitTier):
        sock.connect(("127.0.0.1", 9))
    with pytest.raises(ServerUseInUnitTier):
        subprocess.run(["java", "-version"], check=False)
    assert subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True, check=True).stdout == b"1\n"
