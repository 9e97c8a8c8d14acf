"""Barrier straggler policies' arguments are checked before anything is written."""

from __future__ import annotations

import pytest

from airflow_epochs.coordination.base.errors import InvalidInput
from airflow_epochs.coordination.recipes.barriers.barrier import (
    StragglerPolicy,
)


def test_policy_arguments_are_checked():
    with pytest.raises(InvalidInput, match="positive integer k"):
        StragglerPolicy.quorum(0, 5)
    with pytest.raises(InvalidInput, match="positive number of seconds"):
        StragglerPolicy.fail(-1)
    with pytest.raises(InvalidInput, match="fail, quorum or rerun"):
        StragglerPolicy("maybe", 5)


