"""Versioned JSON payloads for znodes, with a schema check on read and a size cap on write.

Every znode the core writes carries ``{"schema": 1, "kind": <kind>, ...}``. Reading checks the
schema version, the kind and the type of each required field, so a znode written by an
incompatible version (or by hand) is reported as :class:`CorruptPayload` instead of being
misread.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_epochs.coordination.errors import CorruptPayload, InvalidInput, PayloadTooLarge

SCHEMA_VERSION = 1
# ZooKeeper refuses znodes (and whole multi-op requests) over about 1 MB; staying far below keeps a
# transaction holding a vote, a seal and a history record well inside that limit.
MAX_PAYLOAD_BYTES = 64 * 1024

JSON = Any  # JSON-compatible value; the encoder is the real check

# kind -> required field -> accepted Python types
_SCHEMAS: dict[str, dict[str, tuple[type, ...]]] = {
    "pipeline": {"first_epoch": (int,), "newest_epoch": (int,), "created_at": (float, int)},
    "config": {"from_epoch": (int,), "partitions": (dict,)},
    "epoch": {"state": (str,), "attempt": (int,), "attempt_state": (str,), "owner": (str,),
              "config_version": (int,), "generation": (int,)},
    "attempt": {"token": (int,), "owner": (str,), "started_at": (float, int)},
    "tally": {"votes": (dict,)},
    "progress": {"sealed": (list,)},
    "vote": {"producer": (str,), "attempt": (int,), "manifest": (dict,), "voted_at": (float, int)},
    "seal": {"partition": (str,), "attempt": (int,), "producers": (list,), "sealed_at": (float, int)},
    "frontier": {"epoch": (int,)},
    "event": {"event": (str,), "at": (float, int), "detail": (dict,)},
    "barrier": {"policy": (str,), "timeout": (float, int), "deadline": (float, int), "registered": (int,)},
    "arrival": {"at": (float, int)},
    "release": {"decision": (str,), "arrived": (list,), "late": (list,), "at": (float, int)},
    "consumer": {"acked": (int,), "registered_at": (float, int)},
}


def encode(kind: str, body: Mapping[str, JSON], *, limit: int = MAX_PAYLOAD_BYTES) -> bytes:
    """Encode ``body`` as a ``kind`` payload; raise if it is not JSON or larger than ``limit``."""
    if kind not in _SCHEMAS:
        raise ValueError(f"unknown payload kind {kind!r}")
    document = {"schema": SCHEMA_VERSION, "kind": kind, **body}
    _check_fields(kind, document, error=InvalidInput)
    try:
        raw = json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{kind} payload is not JSON-serialisable: {exc}") from exc
    if len(raw) > limit:
        raise PayloadTooLarge(f"{kind} payload is {len(raw)} bytes; the limit is {limit} bytes")
    return raw


def decode(kind: str, raw: bytes | None, *, path: str = "?") -> dict[str, JSON]:
    """Decode a ``kind`` payload read from ``path``; raise :class:`CorruptPayload` if it does not fit."""
    if not raw:
        raise CorruptPayload(f"{path}: empty znode where a {kind} payload was expected")
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise CorruptPayload(f"{path}: not JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise CorruptPayload(f"{path}: expected a JSON object, got {type(document).__name__}")
    if document.get("schema") != SCHEMA_VERSION:
        raise CorruptPayload(
            f"{path}: schema {document.get('schema')!r} is not supported (this version reads {SCHEMA_VERSION})"
        )
    if document.get("kind") != kind:
        raise CorruptPayload(f"{path}: holds a {document.get('kind')!r} payload, expected {kind!r}")
    _check_fields(kind, document, error=CorruptPayload, path=path)
    return document


def body(document: Mapping[str, JSON]) -> dict[str, JSON]:
    """A decoded payload without its envelope, ready to be changed and re-encoded."""
    return {k: v for k, v in document.items() if k not in ("schema", "kind")}


def check_manifest(manifest: object, *, what: str = "manifest") -> dict[str, JSON]:
    """Validate a user-supplied manifest: a JSON object of bounded size."""
    if not isinstance(manifest, Mapping):
        raise InvalidInput(f"{what} must be a mapping, not {type(manifest).__name__}")
    try:
        raw = json.dumps(dict(manifest), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{what} is not JSON-serialisable: {exc}") from exc
    if len(raw) > MAX_PAYLOAD_BYTES // 2:
        raise PayloadTooLarge(
            f"{what} is {len(raw)} bytes; keep manifests under {MAX_PAYLOAD_BYTES // 2} bytes "
            "(paths, counts and checksums, never data)"
        )
    loaded: dict[str, JSON] = json.loads(raw)
    return loaded


def _check_fields(kind: str, document: Mapping[str, JSON], *, error: type[Exception], path: str = "") -> None:
    where = f"{path}: " if path else ""
    for field, types in _SCHEMAS[kind].items():
        value = document.get(field)
        if value is None or isinstance(value, bool) or not isinstance(value, types):
            raise error(f"{where}{kind} payload field {field!r} is {value!r}, expected {types[0].__name__}")
