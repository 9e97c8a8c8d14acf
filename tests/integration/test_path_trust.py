"""Whether another local user could swap a path: every component from ``/`` down, links followed only
when nobody else could have placed them; reading a file only inside a root. Acted out by a throw-away
second local user."""

from __future__ import annotations

import os

import pytest
from intruder import second_user, shared_folder

from airflow_epochs.path_trust import OutsideRoot, UntrustedPath, read_inside, resolve_trusted


def test_our_paths_and_our_links_resolve(tmp_path):
    (tmp_path / "real" / "deep").mkdir(parents=True)
    (tmp_path / "via").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "up").symlink_to("..")
    assert resolve_trusted(str(tmp_path / "via" / "deep")) == str(tmp_path / "real" / "deep")
    assert resolve_trusted(str(tmp_path / "real" / "up" / "via" / "new")) == str(tmp_path / "real" / "new")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(UntrustedPath, match="symbolic links"):
        resolve_trusted(str(tmp_path / "loop" / "x"))
    with pytest.raises(UntrustedPath, match="not an absolute path"):
        resolve_trusted("relative/path")


def test_a_group_or_world_writable_folder_without_sticky_bit_is_refused(tmp_path):
    (tmp_path / "open" / "inner").mkdir(parents=True)
    os.chmod(tmp_path / "open", 0o777)
    with pytest.raises(UntrustedPath, match="writable by others without the sticky bit"):
        resolve_trusted(str(tmp_path / "open" / "inner"))
    os.chmod(tmp_path / "open", 0o1777)
    assert resolve_trusted(str(tmp_path / "open" / "inner")) == str(tmp_path / "open" / "inner")


def test_another_users_link_folder_or_grandparent_is_refused():
    with second_user() as intruder, shared_folder() as shared:
        (shared / "ours").mkdir()
        intruder.run(["ln", "-s", str(shared / "ours"), str(shared / "link")])
        with pytest.raises(UntrustedPath, match=r"link'.* owned by another user"):
            resolve_trusted(str(shared / "link" / "state"))
        intruder.run(["mkdir", "-m", "0755", str(shared / "theirs")])
        os.makedirs(shared / "theirs" / "mine" / "deeper")  # ours, but under a folder they may rename
        with pytest.raises(UntrustedPath, match=r"theirs'.* owned by another user"):
            resolve_trusted(str(shared / "theirs" / "mine" / "deeper"))
        assert resolve_trusted(str(shared / "ours")) == str(shared / "ours")


def test_read_inside_reads_only_a_plain_file_inside_the_root():
    with second_user() as intruder, shared_folder() as shared:
        root = shared / "landing"
        root.mkdir(mode=0o755)
        os.chmod(root, 0o1777)
        (root / "tweets.txt").write_text("the cat")
        secret = shared / "secret.txt"
        secret.write_text("hunter2")
        secret.chmod(0o600)
        assert read_inside(str(root), str(root / "tweets.txt")) == b"the cat"
        intruder.run(["ln", "-s", str(secret), str(root / "planted.txt")])
        with pytest.raises(UntrustedPath, match=r"planted\.txt"):
            read_inside(str(root), str(root / "planted.txt"))
        os.link(secret, root / "hard.txt")  # a second name for a file outside (as root could, or a lax kernel)
        with pytest.raises(OutsideRoot, match="one link"):
            read_inside(str(root), str(root / "hard.txt"))
        for path in (str(secret), f"{root}/../secret.txt", "tweets.txt", None, f"{root}/tweets.txt\n"):
            with pytest.raises(OutsideRoot, match="nothing was read") as refused:
                read_inside(str(root), path)
            assert repr(path) in str(refused.value)
        (root / "folder").mkdir()
        with pytest.raises(OutsideRoot, match=r"regular file|cannot be opened"):
            read_inside(str(root), str(root / "folder"))
