"""The archive of compacted epochs is parsed like the storage root (issue 35: a location is parsed once
into its canonical spelling): a forged or mistyped archive that a URI parser would read as another
folder is refused as a configuration, naming it, before anything is read or written there."""

from __future__ import annotations

import pytest

from airflow_epochs.coordination import InvalidConfig, PipelineConfig

PARTITIONS = {"p": ("a",)}


@pytest.mark.parametrize("archive", [
    "file:///data/archive#", "file:///data/archive?x=1", "file:///data/%2e%2e/etc", "/data/archive;x",
    "/data/../etc", "/data/./archive", "/data//archive", "/data/archive/", "s3://key:secret@bucket/a",
    "S3://bucket/a", "http://host/a", "relative/archive", "file://host/data",
])
def test_an_archive_not_spelled_canonically_is_refused(archive):
    with pytest.raises(InvalidConfig, match="archive location") as refused:
        PipelineConfig(PARTITIONS, archive=archive)
    assert "secret" not in str(refused.value)


@pytest.mark.parametrize("archive", ["/data/archive", "file:///data/archive", "s3://bucket/lake/archive",
                                     "gs://bucket/a", "hdfs://namenode:8020/archive"])
def test_a_canonical_archive_is_kept_as_given(archive):
    assert PipelineConfig(PARTITIONS, archive=archive).archive == archive
