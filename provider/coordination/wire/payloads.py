"""Versioned JSON payloads for znodes, with a schema check on read and a size cap on write.

Every znode the core writes carries ``{"schema": 1, "kind": <kind>, ...}``. Reading checks the
schema version, the kind and the type of each required field, so a znode written by an
incompatible version (or by hand) is reported as :class:`CorruptPayload` instead of being
misread.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from airflow_epochs.coordination.base.errors import CorruptPayload, InvalidInput, PayloadTooLarge
from airflow_epochs.coordination.base.names import MAX_EPOCH

# 2: ledger v2 (per-producer vote znodes, attempt nodes as fencing targets, request ids everywhere).
_SCHEMA_VERSION = 2
# ZooKeeper refuses znodes (and whole multi-op requests) over about 1 MB; staying far below keeps a
# transaction holding a vote, a seal and a history record well inside that limit.
MAX_PAYLOAD_BYTES = 64 * 1024
# A snapshot is a pointer (a path or URI and a little metadata), never the state itself.
_MAX_SNAPSHOT_BYTES = 2 * 1024
# Upstream pipelines one vote may name in its lineage vector.
MAX_UPSTREAM = 64

# JSON nested deeper than this is refused on read and write: a record is a few levels deep, and a
# forged one nested thousands deep would otherwise raise RecursionError in every reader.
MAX_JSON_DEPTH = 64

JSON = Any  # JSON-compatible value; the encoder is the real check

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def _json_depth_exceeds(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON ``text`` nests arrays and objects deeper than ``limit`` (bounded work: one pass)."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    if text.count("[") + text.count("{") <= limit:  # the usual case: too few brackets to matter
        return False
    depth = 0
    for bracket in _BRACKET.findall(_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        if depth > limit:
            return True
    return False


# The largest integer a record holds (ZooKeeper's zxids and sequence numbers are 64-bit): a longer
# literal is forged, and converting one of thousands of digits costs quadratic time.
MAX_INT_DIGITS = 19
# The latest time a record may name (9999-12-31T23:59:59Z): a lease "until" 1e300 or NaN is forged, and
# every reader that turns it into a date or a duration would fail on it.
MAX_TIMESTAMP = 253402300799.0


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a record holds")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is not a finite number")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits is not a number a record holds")
    return int(text)


def loads_bounded(text: str | bytes, *, limit: int = MAX_JSON_DEPTH) -> JSON:
    """``json.loads`` that refuses (:class:`ValueError`, one line) JSON nested deeper than ``limit``, and
    numbers no record holds: ``NaN``, ``Infinity``, a float that overflows, an integer longer than
    :data:`MAX_INT_DIGITS` digits."""
    if _json_depth_exceeds(text, limit):
        raise ValueError(f"JSON nested deeper than {limit} levels")
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_bounded_int)
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise ValueError(f"JSON nested deeper than {limit} levels") from None

_NUMBER = (float, int)
# kind -> required field -> accepted Python types
_SCHEMAS: dict[str, dict[str, tuple[type, ...]]] = {
    "pipeline": {"first_epoch": (int,), "newest_epoch": (int,), "created_at": _NUMBER, "configs": (list,),
                 "compacted_through": (int,)},
    "config": {"from_epoch": (int,), "partitions": (dict,)},
    "epoch": {"state": (str,), "attempt": (int,), "owner": (str,), "config_version": (int,),
              "generation": (int,), "opened_at": _NUMBER},
    "attempt": {"token": (int,), "owner": (str,), "started_at": _NUMBER, "request": (str,), "state": (str,)},
    "vote": {"manifest": (dict,), "voted_at": _NUMBER, "request": (str,)},
    "seal": {"partition": (str,), "attempt": (int,), "generation": (int,), "sealed_at": _NUMBER,
             "request": (str,), "snapshot_producers": (list,), "producers": (int,), "config_version": (int,)},
    "epoch_seal": {"attempt": (int,), "generation": (int,), "sealed_at": _NUMBER, "request": (str,)},
    "frontier": {"epoch": (int,)},
    "snapshot_pointer": {"partition": (str,), "current": (dict,)},
    "request": {"call": (str,), "at": _NUMBER},
    "event": {"event": (str,), "at": _NUMBER, "detail": (dict,)},
    "lease": {"owner": (str,), "until": _NUMBER, "since": _NUMBER, "request": (str,)},
    "archive": {"through": (int,), "epochs": (int,)},
    "barrier": {"policy": (str,), "timeout": _NUMBER, "deadline": _NUMBER, "registered": (int,)},
    "arrival": {"at": _NUMBER, "request": (str,)},
    "release": {"decision": (str,), "arrived": (int,), "late": (list,), "at": _NUMBER},
    "consumer": {"acked": (int,), "registered_at": _NUMBER},
    "asset_cursor": {"following": (int,)},
    "delivery_rewinds": {"count": (int,), "entries": (list,)},
    "staged_vote": {"ti": (dict,), "partition_key": (str,), "request": (str,)},
    "staged_key": {"partition_key": (str,)},
    "declared_succeeded": {"ti": (dict,), "try": (int,)},
    "staged_pruned": {"through": (int,)},
    "seal_stats": {"partition": (str,), "through": (int,), "window": (int,), "producers": (dict,)},
    "deadline": {"partition": (str,), "mode": (str,), "declarer": (str,)},
    "late_alert": {"epoch": (int,), "partition": (str,), "deadline_at": _NUMBER, "raised_at": _NUMBER,
                   "raised_by": (str,), "missing": (list,)},
    "declared_filter": {"conn": (str,), "root": (str,), "pipelines": (list,), "fetched_at": _NUMBER,
                        "declarations": (dict,)},
    # re-seals (wire/versions.py)
    "versions": {"epoch": (int,), "partition": (str,), "latest": (int,), "versions": (list,)},
    "sealed_version": {"epoch": (int,), "partition": (str,), "version": (int,), "request": (str,),
                       "sealed_at": _NUMBER, "votes": (dict,)},
    "correction": {"id": (str,), "origin": (list,), "request": (str,), "state": (str,), "plan": (list,)},
}


# Numbers whose range a reader relies on (a negative frontier or an epoch past the last one is a forged or
# corrupt record, never a state): kind -> field -> (lowest, highest).
_RANGES: dict[str, dict[str, tuple[int, int]]] = {
    "frontier": {"epoch": (0, MAX_EPOCH)},
    "pipeline": {"first_epoch": (0, MAX_EPOCH), "newest_epoch": (0, MAX_EPOCH), "compacted_through": (0, MAX_EPOCH)},
}


def encode(kind: str, body: Mapping[str, JSON], *, limit: int = MAX_PAYLOAD_BYTES) -> bytes:
    """Encode ``body`` as a ``kind`` payload; raise if it is not JSON or larger than ``limit``."""
    if kind not in _SCHEMAS:
        raise ValueError(f"unknown payload kind {kind!r}")
    document = {"schema": _SCHEMA_VERSION, "kind": kind, **body}
    _check_fields(kind, document, error=InvalidInput)
    return _serialised(kind, document, limit)


def _serialised(kind: str, document: JSON, limit: int) -> bytes:
    """``document`` as compact JSON, refused (nothing written) if it is not JSON, too deep or too large."""
    try:
        raw = json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"{kind} payload is not JSON-serialisable: {_one_line(exc)}") from None
    if _json_depth_exceeds(raw):
        raise InvalidInput(f"{kind} payload nests deeper than {MAX_JSON_DEPTH} levels")
    if len(raw) > limit:
        raise PayloadTooLarge(f"{kind} payload is {len(raw)} bytes; the limit is {limit} bytes")
    return raw


def decode(kind: str, raw: bytes | None, *, path: str = "?") -> dict[str, JSON]:
    """Decode a ``kind`` payload read from ``path``; raise :class:`CorruptPayload` if it does not fit."""
    if not raw:
        raise CorruptPayload(f"{path}: empty znode where a {kind} payload was expected")
    try:
        document = loads_bounded(raw)
    except ValueError as exc:
        raise CorruptPayload(f"{path}: not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise CorruptPayload(f"{path}: expected a JSON object, got {type(document).__name__}")
    if document.get("schema") != _SCHEMA_VERSION:
        hint = " (written by airflow-epochs 0.1: this version cannot read it; recreate the pipeline under a " \
            "new root or name)" if document.get("schema") == 1 else ""
        raise CorruptPayload(
            f"{path}: schema {document.get('schema')!r} is not supported (this version reads {_SCHEMA_VERSION}){hint}"
        )
    if document.get("kind") != kind:
        raise CorruptPayload(f"{path}: holds a {document.get('kind')!r} payload, expected {kind!r}")
    _check_fields(kind, document, error=CorruptPayload, path=path)
    return document


def encode_row(kind: str, fields: list[JSON], *, limit: int = MAX_PAYLOAD_BYTES) -> bytes:
    """Encode ``fields`` as a compact ``kind`` payload: the JSON array ``[schema, kind, *fields]``.

    For znodes there are very many of at once (an open epoch's votes): no field names, so each is
    about half the bytes of the object form. The caller's decoder checks each field's type."""
    if kind not in _SCHEMAS:
        raise ValueError(f"unknown payload kind {kind!r}")
    return _serialised(kind, [_SCHEMA_VERSION, kind, *fields], limit)


def is_row(raw: bytes | None) -> bool:
    """Whether ``raw`` is in the compact form of :func:`encode_row` (else the object form)."""
    return raw is not None and raw.lstrip()[:1] == b"["


def decode_row(kind: str, raw: bytes, *, path: str = "?") -> list[JSON]:
    """The fields of a compact ``kind`` payload read from ``path`` (schema and kind checked);
    :class:`CorruptPayload` if it is not one."""
    try:
        document = loads_bounded(raw)
    except ValueError as exc:
        raise CorruptPayload(f"{path}: not JSON ({exc})") from None
    if not isinstance(document, list) or len(document) < 2:
        raise CorruptPayload(f"{path}: expected a compact {kind} payload [schema, kind, ...]")
    if document[0] != _SCHEMA_VERSION or isinstance(document[0], bool):
        raise CorruptPayload(
            f"{path}: schema {document[0]!r} is not supported (this version reads {_SCHEMA_VERSION})")
    if document[1] != kind:
        raise CorruptPayload(f"{path}: holds a {document[1]!r} payload, expected {kind!r}")
    return document[2:]


def body(document: Mapping[str, JSON]) -> dict[str, JSON]:
    """A decoded payload without its envelope, ready to be changed and re-encoded."""
    return {k: v for k, v in document.items() if k not in ("schema", "kind")}


def check_manifest(manifest: object, *, what: str = "manifest") -> dict[str, JSON]:
    """Validate a user-supplied manifest: a JSON object of bounded size."""
    if not isinstance(manifest, Mapping):
        raise InvalidInput(f"{what} must be a mapping, not {type(manifest).__name__}")
    try:
        raw = json.dumps(dict(manifest), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"{what} is not JSON-serialisable: {_one_line(exc)}") from None
    if _json_depth_exceeds(raw):
        raise InvalidInput(f"{what} nests deeper than {MAX_JSON_DEPTH} levels")
    if len(raw) > MAX_PAYLOAD_BYTES // 2:
        raise PayloadTooLarge(
            f"{what} is {len(raw)} bytes; keep manifests under {MAX_PAYLOAD_BYTES // 2} bytes "
            "(paths, counts and checksums, never data)"
        )
    loaded: dict[str, JSON] = json.loads(raw)
    return loaded


def check_snapshot(snapshot: object) -> JSON:
    """Validate a snapshot pointer: any JSON value (None for no snapshot) of at most
    :data:`_MAX_SNAPSHOT_BYTES` bytes; it points at state, it never holds it."""
    if snapshot is None:
        return None
    try:
        raw = json.dumps(snapshot, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"snapshot pointer is not JSON-serialisable: {_one_line(exc)}") from None
    if _json_depth_exceeds(raw):
        raise InvalidInput(f"snapshot pointer nests deeper than {MAX_JSON_DEPTH} levels")
    if len(raw) > _MAX_SNAPSHOT_BYTES:
        raise PayloadTooLarge(
            f"snapshot pointer is {len(raw)} bytes; the limit is {_MAX_SNAPSHOT_BYTES} (a path or URI, never state)"
        )
    return json.loads(raw)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def _check_fields(kind: str, document: Mapping[str, JSON], *, error: type[Exception], path: str = "") -> None:
    where = f"{path}: " if path else ""
    for field, types in _SCHEMAS[kind].items():
        value = document.get(field)
        if value is None or isinstance(value, bool) or not isinstance(value, types):
            raise error(f"{where}{kind} payload field {field!r} is {value!r}, expected {types[0].__name__}")
        # A time or a duration in seconds: never negative, never past the year 9999.
        if types == _NUMBER and isinstance(value, (int, float)) and not 0 <= value <= MAX_TIMESTAMP:
            raise error(f"{where}{kind} payload field {field!r} is {value!r}, outside 0..{MAX_TIMESTAMP:.0f}")
        bounds = _RANGES.get(kind, {}).get(field)
        if bounds is not None and isinstance(value, int) and not bounds[0] <= value <= bounds[1]:
            low, high = bounds
            raise error(f"{where}{kind} payload field {field!r} is {value!r}, outside {low}..{high}")
