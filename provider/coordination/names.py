"""Validation of every name that becomes a znode path segment."""

from __future__ import annotations

import re

from airflow_epochs.coordination.errors import InvalidEpoch, InvalidName

MAX_NAME_LENGTH = 128
MAX_EPOCH = 9_999_999_999  # epochs are stored as 10 zero-padded digits

# A conservative, printable ASCII alphabet: it keeps paths readable in zkCli and safe as file
# and URL segments, and allows partition names such as "region=eu" or "date:2013-01-01".
_ALLOWED = re.compile(r"[A-Za-z0-9_.=:@+\-]+")
_KINDS = ("pipeline", "partition", "producer", "barrier", "consumer", "resource", "owner", "input")


def validate_name(kind: str, value: object) -> str:
    """Return ``value`` if it is a valid ``kind`` name, else raise :class:`InvalidName`.

    :param kind: what the name is for (``pipeline``, ``partition``, ``producer`` ...).
    :param value: the candidate name.
    """
    if kind not in _KINDS:
        raise ValueError(f"unknown name kind {kind!r}")
    if not isinstance(value, str):
        raise InvalidName(kind, value, f"must be a string, not {type(value).__name__}")
    if not value:
        raise InvalidName(kind, value, "must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidName(kind, value, f"longer than {MAX_NAME_LENGTH} characters")
    if value in (".", ".."):
        raise InvalidName(kind, value, "'.' and '..' are reserved path segments")
    if "/" in value:
        raise InvalidName(kind, value, "must not contain '/'")
    if any(not ch.isprintable() or ch.isspace() for ch in value):
        raise InvalidName(kind, value, "must not contain control, whitespace or non-printable characters")
    if not _ALLOWED.fullmatch(value):
        bad = sorted({ch for ch in value if not _ALLOWED.fullmatch(ch)})
        raise InvalidName(kind, value, f"characters {''.join(bad)!r} are not allowed (use A-Z a-z 0-9 _ . = : @ + -)")
    return value


def validate_epoch(value: object, *, what: str = "epoch") -> int:
    """Return ``value`` if it is a valid epoch number (1 .. 9,999,999,999)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidEpoch(f"{what} must be an integer, not {value!r}")
    if value < 1 or value > MAX_EPOCH:
        raise InvalidEpoch(f"{what} {value!r} is outside 1..{MAX_EPOCH}")
    return value
