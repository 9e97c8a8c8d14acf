"""The cluster run's report (tests/helpers/cluster_outcome.py): a takeover's recovery split into the lease
it waited out and the rest. Pure arithmetic and text; the takeover itself runs in ``scripts/cluster.sh faults``."""

from __future__ import annotations

import pytest
from cluster_outcome import Fault, Outcome, every_day_reported, faults_markdown, takeover_parts


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
