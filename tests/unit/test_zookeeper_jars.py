"""Finding the embedded ZooKeeper's Java and jars, without starting it: missing Java or jars and a
class path without snappy-java are clear errors; ZOOKEEPER_HOME is preferred."""

from __future__ import annotations

import pytest

from airflow_epochs.servers.embedded_zookeeper import (
    EmbeddedZooKeeper,
    JavaNotFound,
    ZooKeeperJarsNotFound,
    candidate_jar_dirs,
    find_zookeeper_jars,
)


def test_missing_java_is_a_clear_error(tmp_path):
    with pytest.raises(JavaNotFound, match="no Java runtime found"):
        EmbeddedZooKeeper(java=str(tmp_path / "no-java"))


def test_missing_jars_are_a_clear_error(tmp_path):
    with pytest.raises(ZooKeeperJarsNotFound, match="no ZooKeeper jars found"):
        EmbeddedZooKeeper(jar_dirs=[tmp_path])


def test_jars_without_snappy_are_refused(tmp_path):
    # Without snappy-java the server listens but never serves; refuse such a class path up front.
    source = find_zookeeper_jars()[0].parent
    for jar in source.glob("*.jar"):
        if not jar.name.startswith("snappy-java"):
            (tmp_path / jar.name).symlink_to(jar)
    with pytest.raises(ZooKeeperJarsNotFound, match="snappy-java"):
        find_zookeeper_jars([tmp_path])


def test_zookeeper_home_is_preferred(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOOKEEPER_HOME", str(tmp_path))
    assert candidate_jar_dirs()[:2] == [tmp_path / "lib", tmp_path]


