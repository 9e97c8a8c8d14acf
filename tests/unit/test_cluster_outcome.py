"""The cluster run's report (tests/helpers/cluster_outcome.py): a takeover's recovery split into the lease
it waited out and the rest. Pure arithmetic and text; the takeover itself runs in ``scripts/cluster.sh faults``."""

from __future__ import annotations

import pytest
from cluster_outcome import (
    Fault,
    Outcome,
    days_not_reported_once,
    days_reported_once,
    every_day_reported,
    faults_markdown,
    takeover_parts,
)


def test_a_takeover_splits_into_the_lease_left_the_wake_up_and_the_epoch_under_the_new_leader():
    # stopped at 1000; the first's lease ran to 1580; the second took the leadership at 1588, sealed at 1703
    parts = takeover_parts(1000.0, 1580.0, 1588.0, 1703.0)
    assert parts == {"lease left at the stop": 580.0, "lease expiry to the leadership taken": 8.0,
                     "leadership taken to the epoch sealed": 115.0}
    assert sum(parts.values()) == pytest.approx(703.0)


@pytest.mark.parametrize(("lease_until", "expected"), [
    (900.0, (0.0, 20.0, 30.0)),  # the lease had run out before the stop: nothing of it was waited out
    (1030.0, (20.0, 0.0, 30.0)),  # a clock skew: the lease's expiry read after the new leader took it
])
def test_the_parts_always_add_up_to_the_stop_to_seal_time(lease_until, expected):
    parts = takeover_parts(1000.0, lease_until, 1020.0, 1050.0)
    assert tuple(parts.values()) == expected
    assert sum(parts.values()) == pytest.approx(50.0)


def test_the_faults_table_says_what_a_recovery_is_made_of_and_dashes_where_it_is_not_split():
    takeover = Fault("first deployment stopped mid-epoch: takeover", "scheduler, scheduler-2", 1000.0,
                     "during epoch.join of epoch 4", 703.0, "restarted", takeover_parts(1000, 1580, 1588, 1703))
    worker = Fault("celery worker killed mid-Spark-task", "celery-worker-1", 10.0, "epoch 1 epoch.join", 55.2)
    table = faults_markdown([worker, takeover])
    assert "| celery worker killed mid-Spark-task | celery-worker-1 | epoch 1 epoch.join | 55.2 | - | - |" in table
    assert ("| 703.0 | lease left at the stop 580.0 s; lease expiry to the leadership taken 8.0 s; leadership taken "
            "to the epoch sealed 115.0 s | restarted |") in table
    assert faults_markdown([]) == ""
    # the run's report ends with the same table
    assert Outcome("celery", 3, faults=[worker]).markdown().endswith("\n\n" + faults_markdown([worker]))


def test_a_run_waits_for_a_report_of_every_day_not_for_a_total_a_duplicate_fills():
    # issue 36's takeover: day 2 reported in both deployments, day 5 not yet: 5 runs for 5 days, not done
    takeover = {1: 1, 2: 2, 3: 1, 4: 1}
    assert sum(takeover.values()) == 5 and not every_day_reported(takeover, 5)
    assert every_day_reported({**takeover, 5: 1}, 5)
    assert not every_day_reported({}, 1) and every_day_reported({}, 0)


def test_days_reported_once_counts_a_doubled_day_and_a_missing_day_against_the_figure():
    # the total / days figure would read 1.00 here: day 2 twice, day 5 never
    takeover = {1: 1, 2: 2, 3: 1, 4: 1}
    assert days_reported_once(takeover, 5) == pytest.approx(3 / 5)
    assert days_not_reported_once(takeover, 5) == {2: 2, 5: 0}
    outcome = Outcome("celery", 5, report_runs=takeover)
    assert outcome.report_runs_per_day == pytest.approx(0.6) and not outcome.one_report_run_per_day
    assert "not once: {2: 2, 5: 0}" in outcome.markdown()
    # a run of a day that was not run is off too; each day once is 1.0 with nothing listed
    assert days_not_reported_once({1: 1, 2: 1, 3: 1}, 2) == {3: 1}
    whole = Outcome("celery", 3, report_runs={1: 1, 2: 1, 3: 1})
    assert whole.report_runs_per_day == 1.0 and whole.one_report_run_per_day and whole.report_days_off == {}
    assert days_reported_once({}, 0) == 0.0


def test_a_fault_that_did_not_recover_says_so_and_a_start_awaits_no_recovery():
    lost = Fault("Spark worker killed mid-job", "spark-worker-1", 10.0, "epoch 3 epoch.join",
                 failure="TimeoutError: (3, daily) not sealed within 600 s")
    start = Fault("second deployment started mid-run", "second", 5.0, "own metadata DB", awaited=False)
    assert lost.recovery() == "did not recover: TimeoutError: (3, daily) not sealed within 600 s"
    assert start.recovery() == "a start, no recovery awaited"
    assert Fault("ZooKeeper leader killed", recovered_s=1.25).recovery() == "recovered after 1.2 s"
    assert Fault("scheduler killed").recovery() == "no recovery seen (the run ended first)"
    table = faults_markdown([lost, start])
    assert "| did not recover: TimeoutError: (3, daily) not sealed within 600 s |" in table
    assert "| second deployment started mid-run | second | own metadata DB | - |" in table
    assert "recovered after not recovered" not in table
