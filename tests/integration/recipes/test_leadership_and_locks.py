"""Leadership lease across deployments and named resource locks, on a real ZooKeeper."""

from __future__ import annotations

import datetime
import threading
import time

import pytest

from airflow_epochs.coordination import (
    EpochLedger,
    InvalidInput,
    LockTimeout,
    NotLeader,
    PipelineConfig,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def pipeline(zk):
    EpochLedger(zk, "lead", owner="setup").create_pipeline(PipelineConfig({"out": ("job",)}))
    return "lead"


def test_lease_renews_refuses_and_expires_to_a_standby(zk_factory, pipeline):
    short = datetime.timedelta(seconds=2)
    leader = EpochLedger(zk_factory(), pipeline, owner="deploy-a").lease(duration=short)
    standby = EpochLedger(zk_factory(), pipeline, owner="deploy-b").lease(duration=short)
    first = leader.acquire()
    assert first.owner == "deploy-a" and leader.is_held()
    assert leader.acquire().until >= first.until  # renewal by the holder
    with pytest.raises(NotLeader) as refused:
        standby.acquire()
    assert refused.value.holder == "deploy-a" and "deploy-b' is a standby" in str(refused.value)
    deadline = time.monotonic() + 10
    while True:  # the leader stops renewing: the standby takes over once the lease has run out
        try:
            standby.acquire()
            break
        except NotLeader:
            assert time.monotonic() < deadline, "standby never took over"
            time.sleep(0.25)
    assert not leader.is_held() and standby.is_held()
    with pytest.raises(NotLeader):
        leader.acquire()
    events = [(e.event, e.detail.get("owner")) for e in EpochLedger(zk_factory(), pipeline).history()]
    assert events.count(("leader_changed", "deploy-a")) == 1
    assert events.count(("leader_changed", "deploy-b")) == 1


def test_release_hands_over_at_once(zk, pipeline):
    leader = EpochLedger(zk, pipeline, owner="deploy-a").lease()
    standby = EpochLedger(zk, pipeline, owner="deploy-b").lease()
    leader.acquire()
    assert not standby.release()  # not the holder: nothing happens
    assert leader.release()
    assert standby.acquire().owner == "deploy-b"


def test_lease_rejects_bad_duration(zk, pipeline):
    with pytest.raises(InvalidInput, match="at least 1 s"):
        EpochLedger(zk, pipeline, owner="a").lease(duration=datetime.timedelta(milliseconds=10))


def test_exclusive_lock_times_out_with_the_resource_named(zk_factory, pipeline):
    holder, waiter = zk_factory(), zk_factory()
    with EpochLedger(holder, pipeline).lock("flights-output", identifier="spark-1"):
        started = time.monotonic()
        with pytest.raises(LockTimeout, match=r"'flights-output' within 0\.5 s"), \
                EpochLedger(waiter, pipeline).lock("flights-output", timeout=0.5):
            pass
        assert time.monotonic() - started >= 0.5
    with EpochLedger(waiter, pipeline).lock("flights-output", timeout=5):
        pass


def test_read_locks_share_and_exclude_writers(zk_factory, pipeline):
    a, b, c = zk_factory(), zk_factory(), zk_factory()
    inside = threading.Event()
    release = threading.Event()

    def reader():
        with EpochLedger(b, pipeline).lock("snapshot", mode="read", timeout=5):
            inside.set()
            release.wait(10)

    with EpochLedger(a, pipeline).lock("snapshot", mode="read", timeout=5):
        thread = threading.Thread(target=reader)
        thread.start()
        assert inside.wait(5), "a second reader must get in while a reader holds the lock"
        with pytest.raises(LockTimeout), EpochLedger(c, pipeline).lock("snapshot", mode="write", timeout=0.5):
            pass
        release.set()
        thread.join()
    with EpochLedger(c, pipeline).lock("snapshot", mode="write", timeout=5):
        pass


def test_lock_arguments_are_checked_before_anything_is_written(zk, pipeline):
    with pytest.raises(InvalidInput, match="lock mode"), EpochLedger(zk, pipeline).lock("x", mode="shared"):
        pass
    with pytest.raises(InvalidInput, match="positive"), EpochLedger(zk, pipeline).lock("x", timeout=0):
        pass
    assert zk.get_children("/airflow-epochs/lead/locks") == []
