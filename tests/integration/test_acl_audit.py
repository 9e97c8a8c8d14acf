"""Recursive ACL verification on a real ZooKeeper: ``acl check`` walks the whole pipeline subtree and
names every node someone else may write or administer (deep ones included), ``acl repair`` fixes all
it may and names each node it may not, and ``check`` never says OK while such a node remains."""

from __future__ import annotations

import pytest
from kazoo.security import ACL, Id, Permissions, make_digest_acl

from airflow_epochs.cli import main
from airflow_epochs.coordination import EpochLedger, InsecureAcl, PipelineConfig
from airflow_epochs.coordination.base.acl import audit_pipeline_acls
from airflow_epochs.coordination.base.paths import PipelinePaths

pytestmark = pytest.mark.integration

OWNER, OWNER_PW = "etl", "pw-etl-Secret1"
OTHER, OTHER_PW = "someone", "pw-other-2"


def _client(zk_server, chroot, user, password):
    return zk_server.settings(chroot, login=user, password=password, use_acl=True).start_client()


def _cli(capsys, monkeypatch, zk_server, chroot, action):
    monkeypatch.setenv("AIRFLOW_EPOCHS_ZK_PASSWORD", OWNER_PW)
    code = main(["acl", action, "deep", *zk_server.cli_args(chroot, login=OWNER)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_nodes_below_the_top_administered_by_another_identity_are_found_and_named(zk_server, zk_chroot, capsys,
                                                                                  monkeypatch):
    owner = _client(zk_server, zk_chroot, OWNER, OWNER_PW)
    other = _client(zk_server, zk_chroot, OTHER, OTHER_PW)
    try:
        ledger = EpochLedger(owner, "deep", owner=OWNER)
        ledger.create_pipeline(PipelineConfig({"orders": ("ingest",)}))
        attempt = ledger.open_epoch(1)
        ledger.vote(attempt, "orders", "ingest", {"rows": 1})
        paths = PipelinePaths("deep", "/airflow-epochs")
        epoch_node = paths.epoch(1)
        mine = make_digest_acl(OWNER, OWNER_PW, all=True)
        # A careless moment: the epoch node opened to another identity, which plants two nodes of its own
        # below it (one it alone may read, one world-readable), then the node is closed again.
        owner.set_acls(epoch_node, [mine, make_digest_acl(OTHER, OTHER_PW, all=True)])
        hidden = f"{epoch_node}/planted-hidden"
        visible = f"{epoch_node}/planted-visible"
        other.create(hidden, b"x", acl=[make_digest_acl(OTHER, OTHER_PW, all=True)])
        other.create(visible, b"y", acl=[make_digest_acl(OTHER, OTHER_PW, all=True),
                                         ACL(Permissions.READ, Id("world", "anyone"))])
        owner.set_acls(epoch_node, [mine])
        # And one deep node of ours left world-writable.
        vote_dir = paths.epoch(1) + "/" + sorted(owner.get_children(paths.epoch(1)))[0]
        owner.set_acls(vote_dir, [mine, ACL(Permissions.ALL, Id("world", "anyone"))])

        found = {f.path: f for f in audit_pipeline_acls(owner, paths, batch=3)}  # small batches: several rounds
        assert set(found) == {hidden, visible, vote_dir}, found
        assert found[hidden].acl == "unreadable" and found[visible].foreign == ("digest:someone:cdrwa",)

        code, out, err = _cli(capsys, monkeypatch, zk_server, zk_chroot, "check")
        assert code == 2 and "3 node(s) writable or administrable by others" in err
        for path in (hidden, visible, vote_dir):
            assert f"insecure: {path} " in out

        code, out, err = _cli(capsys, monkeypatch, zk_server, zk_chroot, "repair")
        assert code == 2 and "cannot change the ACL of 2" in err and hidden in err and visible in err, err
        assert owner.get_acls(vote_dir)[0] == [mine]  # what could be repaired was, past the refusals
        with pytest.raises(InsecureAcl) as refused:
            from airflow_epochs.coordination import repair_pipeline_acls

            repair_pipeline_acls(owner, paths)
        assert set(refused.value.nodes) == {hidden, visible}

        # check never says OK while such a node exists; once removed (deleting needs rights on the parent,
        # which is ours), it does.
        code, out, err = _cli(capsys, monkeypatch, zk_server, zk_chroot, "check")
        assert code == 2 and "2 node(s)" in err and "only this connection" not in out
        owner.delete(hidden)
        owner.delete(visible)
        code, out, err = _cli(capsys, monkeypatch, zk_server, zk_chroot, "check")
        assert code == 0 and "only this connection's credentials can write anything under" in out, (out, err)
    finally:
        for client in (owner, other):
            client.stop()
            client.close()
