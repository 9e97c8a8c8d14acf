"""Hostile local input answered in one line, without a server: deep JSON, corrupt CLI state files and
a malformed token through a connection id."""

from __future__ import annotations

import json

import pytest

from airflow_epochs.cli import main
from airflow_epochs.coordination import CorruptPayload, InvalidInput
from airflow_epochs.coordination.wire.payloads import MAX_JSON_DEPTH, decode, loads_bounded
from airflow_epochs.private_files import private_dir, write_private

DEEP = "[" * 50_000 + "]" * 50_000


def _one_line(capsys, argv: list[str], needle: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and needle in err, err
    return err


def test_deep_json_is_refused_in_one_line():
    with pytest.raises(CorruptPayload, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
        decode("frontier", DEEP.encode(), path="/x/frontier")
    with pytest.raises(ValueError, match="nested deeper"):
        loads_bounded('{"a": ' * 100 + "1" + "}" * 100)
    brackets = "[" * (MAX_JSON_DEPTH + 10)
    assert loads_bounded(json.dumps({"a": brackets})) == {"a": brackets}  # brackets inside strings do not count
    nested: dict = {}
    inner = nested
    for _ in range(5_000):
        inner["x"] = {}
        inner = inner["x"]
    from airflow_epochs.coordination.wire.payloads import check_manifest

    with pytest.raises(InvalidInput, match="manifest"):
        check_manifest(nested)


@pytest.mark.parametrize(("text", "needle"), [
    ('"x"', "not an object but str"),
    ('{"port": "abc"}', "port 'abc' is not a TCP port"),
    ('{"port": 12345678901234567890}', "an integer of 20 digits is not a number a record holds"),
    ('{"port": 1234567890123}', "is not a TCP port"),
    ("[" * 10_000, "nested deeper"),
    ("not json", "is corrupt"),
])
def test_corrupt_cli_state_files_are_one_line(tmp_path, capsys, text, needle):
    home = private_dir(tmp_path / "home")
    for server in ("zookeeper", "spark-connect"):
        write_private(home / f"{server}.json", text)
        for action in ("status", "stop", "start"):
            if server == "spark-connect" and action == "start":
                continue  # would start a JVM if the check were missing; the status/stop paths read the same file
            err = _one_line(capsys, ["--state-dir", str(home), server, action], needle)
            assert str(home / f"{server}.json") in err


def test_a_malformed_token_through_conn_id_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AIRFLOW_CONN_BAD_TOKEN", json.dumps({"conn_type": "spark_connect", "host": "localhost",
                                                             "password": "short;tok"}))
    err = _one_line(capsys, ["--state-dir", str(tmp_path / "h"), "spark-connect", "start", "--conn-id", "bad_token"],
                    "a Spark Connect token needs at least 16 printable characters")
    assert "short;tok" not in err




def test_a_secret_file_has_its_final_mode_before_a_byte_and_its_folder_is_new(tmp_path):
    """``create_secret_file`` (initdb's password file): a new 0700 folder and a 0600 file, even under a
    permissive umask; a folder already there (planted, or left) is refused, never written into."""
    import os
    import stat

    from airflow_epochs.private_files import create_secret_file

    old = os.umask(0)  # the most permissive umask: the modes come from the code, not from it
    try:
        path = create_secret_file(tmp_path / "secret" / "pwfile", "s3cret\n")
    finally:
        os.umask(old)
    assert path.read_text() == "s3cret\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    (tmp_path / "planted").mkdir(mode=0o777)
    with pytest.raises(FileExistsError):
        create_secret_file(tmp_path / "planted" / "pwfile", "s3cret\n")
    assert list((tmp_path / "planted").iterdir()) == []
