"""Storage locations are checked after percent-decoding (``%2e%2e`` is ``..`` to pyarrow), and garbage
collection deletes only inside the storage root, checked when it deletes (a run folder swapped for a
link to elsewhere is refused, and what the link points at survives). Chroots in a hosts string are
checked like ``--root``."""

from __future__ import annotations

import pytest

from airflow_epochs.connection.zookeeper import InvalidConnection, ZooKeeperSettings
from airflow_epochs.coordination import InvalidInput
from airflow_epochs.spark.locations import validate_location
from airflow_epochs.spark.storage import collect_garbage, filesystem, run_location


@pytest.mark.parametrize("location", [
    "file:///data/store/%2e%2e/elsewhere", "file:///data/store/%2E%2E/elsewhere", "file:///data/store/..%2felsewhere",
    "s3://bucket/lake/%252e%252e/x", "/data/store/../elsewhere", "file:///data/%2e%2e%2f%2e%2e/etc",
    "file:///data/%00x",
])
def test_encoded_climbs_are_refused_before_pyarrow_sees_them(location):
    with pytest.raises(InvalidInput, match=r"'\.\.' segment|control characters"):
        validate_location("storage", location)
    with pytest.raises(InvalidInput):
        filesystem(location)


def test_plain_locations_pass():
    for location in ("file:///data/store", "/data/store/lake", "s3://bucket/lake/a%20b", "gs://b/x..y"):
        assert validate_location("storage", location) == location


def test_garbage_collection_deletes_only_inside_the_storage_root(tmp_path):
    storage = tmp_path / "store"
    outside = tmp_path / "elsewhere"
    (outside / "keepme").mkdir(parents=True)
    (outside / "keepme" / "data.txt").write_text("not ours to delete")
    kept = run_location(str(storage), "p", "x", 1, 2, "kept")
    stale = run_location(str(storage), "p", "x", 1, 1, "stale")
    for folder in (kept, stale):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    # A run folder replaced by a link to a folder outside the root: refused at delete time.
    link_attempt = storage / "p" / "x" / "epoch=1" / "attempt=3"
    link_attempt.mkdir()
    (link_attempt / "run=evil").symlink_to(outside / "keepme")
    with pytest.raises(InvalidInput, match="not inside the storage root"):
        collect_garbage(f"file://{storage}", "p", "x", 1, [kept])
    assert (outside / "keepme" / "data.txt").read_text() == "not ours to delete"
    (link_attempt / "run=evil").unlink()
    collect_garbage(f"file://{storage}", "p", "x", 1, [kept])
    assert (tmp_path / kept).is_dir() and not (tmp_path / stale).exists() and not link_attempt.exists()
    with pytest.raises(InvalidInput, match=r"'\.\.' segment"):
        collect_garbage(f"file://{storage}/%2e%2e/elsewhere", "p", "x", 1, [kept])
    assert (outside / "keepme" / "data.txt").exists()


@pytest.mark.parametrize(("hosts", "message"), [
    ("127.0.0.1:2181/zookeeper/quota", "reserves for itself"),
    ("127.0.0.1:2181/zookeeper", "reserves for itself"),
    ("127.0.0.1:2181/a/../b", "not allowed"),
    ("127.0.0.1:2181/a//b", "empty segment"),
    ("127.0.0.1:2181/a b", "not allowed"),
])
def test_a_chroot_in_the_hosts_is_checked_like_a_root(hosts, message):
    with pytest.raises(InvalidConnection, match=message):
        ZooKeeperSettings.from_fields(host=hosts)
    assert ZooKeeperSettings.from_fields(host="127.0.0.1:2181/teams/etl").chroot == "/teams/etl"


def test_a_deeply_nested_manifest_is_corrupt_in_one_line(tmp_path):
    from airflow_epochs.coordination import CorruptPayload
    from airflow_epochs.spark.storage import MANIFEST_FILE, read_manifest, write_manifest

    write_manifest(str(tmp_path), {"rows": 1})
    assert read_manifest(str(tmp_path))["rows"] == 1
    (tmp_path / MANIFEST_FILE).write_text("[" * 100_000)
    with pytest.raises(CorruptPayload, match="nested deeper than 64 levels"):
        read_manifest(str(tmp_path))
