"""Bad input catalogue: each mistake gets its own exception naming the bad value, and ZooKeeper is
left exactly as it was (the whole subtree is compared before and after).

(The server-free tests of integration/test_bad_input.py.)"""

from __future__ import annotations

import pytest

from airflow_epochs.coordination import (
    InvalidName,
    validate_name,
)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("", "must not be empty"),
        ("a/b", "must not contain '/'"),
        (".", "reserved"),
        ("..", "reserved"),
        ("tab\there", "control, whitespace or non-printable"),
        ("bell\x07", "control, whitespace or non-printable"),
        ("x" * 129, "longer than 128"),
        ("naïve", "not allowed"),
        ("semi;colon", "not allowed"),
        (42, "must be a string"),
    ],
)
def test_invalid_names(value, reason):
    with pytest.raises(InvalidName, match=reason) as caught:
        validate_name("partition", value)
    assert caught.value.value == value


def test_good_names_pass():
    for name in ("flights", "region=eu", "date:2013-01-01", "a.b", "user@host", "x" * 128):
        assert validate_name("partition", name) == name


