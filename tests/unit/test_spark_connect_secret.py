"""A Spark Connect server attached to a cluster that runs with ``spark.authenticate`` takes that
cluster's secret (a standalone master admits only a driver holding it); the secret is checked before
anything starts and never appears on the server's command line."""

from __future__ import annotations

import pytest

from airflow_epochs.servers.embedded_spark_connect import SparkConnectServer

SECRET = "0123456789abcdef" * 4


def test_a_given_rpc_secret_is_kept_and_stays_off_the_command_line(tmp_path):
    server = SparkConnectServer(tmp_path / "connect", master="spark://127.0.0.1:7077", auth_secret=SECRET)
    assert server.auth_secret == SECRET
    argv = server.argv()
    assert not any(SECRET in item for item in argv)
    assert "spark.authenticate=true" in argv and str(server.properties_file) in argv


@pytest.mark.parametrize("secret", ["short", "x" * 15, "has space in it 12345", "semi;colon;0123456789", ""])
def test_a_secret_too_short_or_with_other_than_letters_and_digits_is_refused(tmp_path, secret):
    with pytest.raises(ValueError, match="at least 16 letters or digits"):
        SparkConnectServer(tmp_path / "connect", auth_secret=secret)
    assert not (tmp_path / "connect").exists()  # refused before any file was written


def test_without_a_given_secret_none_is_kept(tmp_path):
    assert SparkConnectServer(tmp_path / "connect").auth_secret is None
