"""Validation of every name that becomes a znode path segment."""

from __future__ import annotations

import re

from airflow_epochs.coordination.base.errors import InvalidEpoch, InvalidInput, InvalidName, TooManyAttempts

MAX_NAME_LENGTH = 128
MAX_ROOT_LENGTH = 512
MAX_EPOCH = 9_999_999_999  # epochs are stored as 10 zero-padded digits
# Attempts one epoch may have (tokens count them, across its openings): the epoch's folder, which holds
# one ``a-<token>`` per attempt and a ``g-``/``b-`` per opening, stays under 150 KB as a listing.
MAX_ATTEMPTS = 4096

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
    # The common case first, in one regex match: the hot paths (votes) validate names often.
    if isinstance(value, str) and len(value) <= MAX_NAME_LENGTH and value not in (".", "..") \
            and _ALLOWED.fullmatch(value):
        return value
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


def validate_root(value: object) -> str:
    """Return ``value`` if it is a usable znode under which pipelines live, else raise :class:`InvalidInput`.

    An absolute path (``/airflow-epochs``, ``/teams/data/epochs``) of segments made of the name alphabet,
    never ``/`` itself and never under ``/zookeeper``, which ZooKeeper reserves for itself (quotas and
    the ensemble's configuration).
    """
    if not isinstance(value, str):
        raise InvalidInput(f"root must be a string, not {type(value).__name__}")
    if not value.startswith("/") or value == "/" or value.endswith("/"):
        raise InvalidInput(f"root {value!r} must be an absolute znode path such as '/airflow-epochs', "
                           "without a trailing '/'")
    if len(value) > MAX_ROOT_LENGTH:
        raise InvalidInput(f"root {value[:40]!r}... is longer than {MAX_ROOT_LENGTH} characters")
    for segment in value[1:].split("/"):
        if not segment:
            raise InvalidInput(f"root {value!r} has an empty segment ('//')")
        if segment in (".", "..") or not _ALLOWED.fullmatch(segment):
            raise InvalidInput(f"root {value!r}: segment {segment!r} is not allowed "
                               "(use A-Z a-z 0-9 _ . = : @ + -, and no '.' or '..' segments)")
    if value == "/zookeeper" or value.startswith("/zookeeper/"):
        raise InvalidInput(f"root {value!r} is under /zookeeper, which ZooKeeper reserves for itself")
    return value


def check_attempt_token(pipeline: str, epoch: int, token: int) -> int:
    """Return ``token`` if a new attempt with it fits the epoch's :data:`MAX_ATTEMPTS`, else refuse."""
    if token > MAX_ATTEMPTS:
        raise TooManyAttempts(
            f"pipeline {pipeline!r}: epoch {epoch} has had {token - 1} attempts, at most {MAX_ATTEMPTS}; no new "
            "attempt was started and nothing was written (find out why its attempts keep failing)"
        )
    return token


def validate_epoch(value: object, *, what: str = "epoch") -> int:
    """Return ``value`` if it is a valid epoch number (1 .. 9,999,999,999)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidEpoch(f"{what} must be an integer, not {value!r}")
    if value < 1 or value > MAX_EPOCH:
        raise InvalidEpoch(f"{what} {value!r} is outside 1..{MAX_EPOCH}")
    return value
