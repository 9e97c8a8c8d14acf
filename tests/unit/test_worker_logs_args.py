"""The worker log server's address and port checks, and the hostname it gives Airflow (no socket opened)."""

from __future__ import annotations

import re

import pytest

from airflow_epochs.worker_logs import HOST_ENV, serving_address, serving_port, worker_hostname


@pytest.mark.parametrize("host", ["127.0.0.2", "10.0.0.5", "::1", "fd00::5"])
def test_one_address_is_taken(host):
    assert serving_address(host) == host


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "localhost", "worker-1", "224.0.0.1", "ff02::1",
                                  "127.0.0.1:8793", "127.0.0.1/8", " 127.0.0.1"])
def test_a_wildcard_name_or_anything_else_is_refused_naming_it(host):
    with pytest.raises(ValueError, match="not " + re.escape(repr(host))):
        serving_address(host)


@pytest.mark.parametrize("port", [0, -1, 65536, True, "8793", 8793.0])
def test_a_port_out_of_range_or_not_an_integer_is_refused(port):
    with pytest.raises(ValueError, match=repr(port)):
        serving_port(port)


def test_the_worker_hostname_is_the_served_address(monkeypatch):
    monkeypatch.setenv(HOST_ENV, "127.0.0.3")
    assert worker_hostname() == "127.0.0.3"
    monkeypatch.setenv(HOST_ENV, "0.0.0.0")
    with pytest.raises(ValueError, match=re.escape("'0.0.0.0'")):
        worker_hostname()


def test_without_the_variable_the_hostname_is_airflows_default(monkeypatch):
    from airflow.utils.net import getfqdn

    monkeypatch.delenv(HOST_ENV, raising=False)
    assert worker_hostname() == getfqdn()
