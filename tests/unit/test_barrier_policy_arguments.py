"""Barriers on a real ZooKeeper: many participants in threads and processes, O(1) writes per arrival,
one release watch per waiter, and every straggler policy with a participant frozen past the timeout.

(The server-free tests of integration/test_barriers.py.)"""

from __future__ import annotations

import pytest

from airflow_epochs.coordination.base.errors import InvalidInput
from airflow_epochs.coordination.recipes.barriers import (
    StragglerPolicy,
)


def test_policy_arguments_are_checked():
    with pytest.raises(InvalidInput, match="positive integer k"):
        StragglerPolicy.quorum(0, 5)
    with pytest.raises(InvalidInput, match="positive number of seconds"):
        StragglerPolicy.fail(-1)
    with pytest.raises(InvalidInput, match="fail, quorum or rerun"):
        StragglerPolicy("maybe", 5)


