"""A storage root is parsed once into its canonical spelling and refused otherwise, so garbage
collection deletes nothing outside it whatever the location says (issue 35, item 6: ``file:///lake#``
made the epoch folder the root itself, and the sealed run, another pipeline's run and the table
warehouse were deleted). Every form is tried against a real tree on disk, which is compared whole
before and after; a property test checks every candidate for generated names and roots."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from intruder import second_user, shared_folder

from airflow_epochs.coordination import InvalidInput
from airflow_epochs.spark.locations import LocationNotCanonical, parse_location
from airflow_epochs.spark.storage import collect_garbage, garbage_candidates, run_location

SEALED = "0123456789abcdef"
STALE = "fedcba9876543210"


def tree(top: Path) -> dict[str, str]:
    """Every path under ``top`` and what it is (a file's text, a link's target): the whole state."""
    found = {}
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(folder, name)
            found[str(path.relative_to(top))] = (f"-> {os.readlink(path)}" if path.is_symlink()
                                                 else path.read_text() if path.is_file() else "dir")
    return found


def lake(top: Path) -> Path:
    """A storage root holding a sealed and a stale run of pipeline p, another pipeline's sealed run and
    a table warehouse; and precious files beside it."""
    root = top / "lake"
    for pipeline, run in (("p", SEALED), ("p", STALE), ("other", SEALED)):
        folder = Path(run_location(str(root), pipeline, "x", 1, 1 if run == STALE else 2, run))
        folder.mkdir(parents=True)
        (folder / "part-0.parquet").write_text(f"{pipeline}/{run}")
    (root / "warehouse" / "epochs").mkdir(parents=True)
    (root / "warehouse" / "epochs" / "metadata.json").write_text("table")
    (top / "precious").mkdir()
    (top / "precious" / "keep.txt").write_text("not ours to delete")
    return root


HOSTILE = [
    "file://{root}#", "file://{root}?x=1", "file://{root}#/p/x/epoch=1", "{root}?x=1", "{root}#",
    "file://{root}%2F..", "file://{root}/%2e%2e/precious", "{root}%20", "file://{root};type=d", "{root};x",
    "{root}/../precious", "{root}/.", "{root}//", "{root}/", "{root}/./", "{root} ", " {root}", "{root}\n",
    "FILE://{root}", "File://{root}", "http://host{root}", "file://localhost{root}", "file:{root}",
    "s3://user:secret@bucket{root}", "s3://Bucket{root}", "hdfs://nn:8020{root}?user.name=x", "lake",
    "./lake", "{root}\\..\\precious",
]


@pytest.mark.parametrize("form", HOSTILE)
def test_a_location_not_spelled_canonically_deletes_nothing(tmp_path, form):
    root = lake(tmp_path)
    before = tree(tmp_path)
    storage = form.format(root=root)
    keep = [run_location(str(root), "p", "x", 1, 2, SEALED)]
    with pytest.raises(LocationNotCanonical) as refused:
        collect_garbage(storage, "p", "x", 1, keep)
    assert "not canonical" in str(refused.value) or "must be" in str(refused.value)
    assert "secret" not in str(refused.value)  # named, but without the credential
    assert tree(tmp_path) == before


@pytest.mark.parametrize("spelling", ["{root}", "file://{root}"])
def test_a_canonical_root_deletes_only_the_stale_run(tmp_path, spelling):
    root = lake(tmp_path)
    before = tree(tmp_path)
    storage = spelling.format(root=root)
    deleted = collect_garbage(storage, "p", "x", 1, [run_location(storage, "p", "x", 1, 2, SEALED)])
    assert deleted == [str(root / "p" / "x" / "epoch=1" / "attempt=1" / f"run={STALE}")]
    after = tree(tmp_path)
    assert set(before) - set(after) == {f"lake/p/x/epoch=1/attempt=1{tail}" for tail in
                                        ("", f"/run={STALE}", f"/run={STALE}/part-0.parquet")}
    assert all(after[k] == before[k] for k in after)


def test_a_root_through_a_link_of_ours_works_and_through_another_users_link_is_refused(tmp_path):
    root = lake(tmp_path)
    (tmp_path / "via").symlink_to(root)
    keep = [run_location(str(tmp_path / "via"), "p", "x", 1, 2, SEALED)]
    assert len(collect_garbage(str(tmp_path / "via"), "p", "x", 1, keep)) == 1
    with second_user() as intruder, shared_folder() as shared:
        # The intruder's link in a shared (sticky) folder: it can point it anywhere, any time.
        intruder.run(["ln", "-s", str(root), str(shared / "lake")])
        before = tree(tmp_path)
        with pytest.raises(InvalidInput, match="owned by another user"):
            collect_garbage(str(shared / "lake"), "p", "x", 1, keep)
        # A folder of the intruder's above the root: it could rename the root away and put another there.
        intruder.run(["mkdir", str(shared / "theirs")])
        os.chmod(shared / "theirs", 0o777)
        own = lake(shared / "theirs" / "mine")
        with pytest.raises(InvalidInput, match="owned by another user"):
            collect_garbage(str(own), "p", "x", 1, [run_location(str(own), "p", "x", 1, 2, SEALED)])
        assert (own / "p" / "x" / "epoch=1" / "attempt=1" / f"run={STALE}").is_dir()
        assert tree(tmp_path) == before


def test_a_planted_link_inside_the_root_is_refused_before_anything_is_deleted(tmp_path):
    root = lake(tmp_path)
    attempt = root / "p" / "x" / "epoch=1" / "attempt=3"
    attempt.mkdir()
    (attempt / "run=evil").symlink_to(tmp_path / "precious")
    before = tree(tmp_path)
    with pytest.raises(InvalidInput, match="not inside the storage root"):
        collect_garbage(str(root), "p", "x", 1, [run_location(str(root), "p", "x", 1, 2, SEALED)])
    assert tree(tmp_path) == before


def test_names_outside_the_layout_are_never_candidates(tmp_path):
    root = lake(tmp_path)
    epoch = root / "p" / "x" / "epoch=1"
    for junk in ("notes", "attempt=x", "attempt=01", "attempt=5/run=", "attempt=5/other", "attempt=6/run=a b"):
        (epoch / junk).mkdir(parents=True)
    candidates = garbage_candidates(str(root), "p", "x", 1, [run_location(str(root), "p", "x", 1, 2, SEALED)])
    assert candidates == [f"{epoch}/attempt=1/run={STALE}", f"{epoch}/attempt=1"]


def test_a_derived_location_stays_canonical():
    assert run_location("s3://bucket/lake", "p", "x", 3, 7, "ab") == "s3://bucket/lake/p/x/epoch=3/attempt=7/run=ab"
    assert parse_location("storage", "abfss://data@account.dfs.core.windows.net/lake").authority == \
        "data@account.dfs.core.windows.net"
    for bad_run in ("a/b", "..", "a#", ""):
        with pytest.raises(InvalidInput, match="run id"):
            run_location("/lake", "p", "x", 3, 7, bad_run)


NAME = st.from_regex(re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=:@+\-]{0,11}"), fullmatch=True).filter(
    lambda n: n not in (".", ".."))
JUNK = st.text(alphabet=st.sampled_from("ab=._-#?%;/ "), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pipeline=NAME, partition=NAME, epoch=st.integers(1, 10**6), runs=st.lists(
    st.tuples(st.integers(0, 99), st.from_regex(r"[a-f0-9]{8,16}", fullmatch=True)), min_size=1, max_size=5),
    junk=st.lists(JUNK, max_size=4), uri=st.booleans(), tail=st.sampled_from(["", "#", "?x=1", "/", ";a", "%2F"]))
def test_garbage_candidates_are_always_inside_the_root(tmp_path_factory, pipeline, partition, epoch, runs, junk,
                                                       uri, tail):
    top = tmp_path_factory.mktemp("prop")
    root = top / "lake"
    (top / "beside").mkdir()
    storage = f"file://{root}" if uri else str(root)
    for attempt, run in runs:
        folder = Path(run_location(str(root), pipeline, partition, epoch, attempt, run))
        folder.mkdir(parents=True, exist_ok=True)
    epoch_folder = root / pipeline / partition / f"epoch={epoch}"
    for name in junk:
        target = epoch_folder / name.strip("/")
        if name.strip("/ ") and ".." not in name.split("/") and name.strip("/") not in (".",):
            target.mkdir(parents=True, exist_ok=True)
    keep = [run_location(storage, pipeline, partition, epoch, *runs[0])]
    if tail:
        with pytest.raises(LocationNotCanonical):
            garbage_candidates(storage + tail, pipeline, partition, epoch, keep)
        return
    base = parse_location("root", storage)
    candidates = garbage_candidates(storage, pipeline, partition, epoch, keep)
    for candidate in candidates:
        where = parse_location("candidate", candidate)
        segments = base.relative(where)
        assert segments[:3] == [pipeline, partition, f"epoch={epoch}"]
        assert re.fullmatch(r"attempt=\d+", segments[3]) and len(segments) in (4, 5)
        assert len(segments) == 4 or re.fullmatch(r"run=[a-f0-9]{8,16}", segments[4])
        assert os.path.realpath(where.path).startswith(str(root) + "/")
    assert keep[0] not in candidates
    collect_garbage(storage, pipeline, partition, epoch, keep)
    assert Path(parse_location("kept", keep[0]).path).is_dir() and (top / "beside").is_dir()
