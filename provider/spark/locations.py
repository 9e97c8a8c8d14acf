"""Validation of storage and input locations (paths or URIs) before anything is written.

A location must be a non-empty path or URI without control characters (a NUL cuts a path short in C
libraries, a newline forges log lines) and without ``..`` segments, also once percent-decoded
(pyarrow decodes ``%2e%2e`` into ``..``) and normalised (garbage collection deletes under the storage
root: a root that climbs out of itself could point it anywhere). Messages never show the credentials a
URI may carry.
"""

from __future__ import annotations

from urllib.parse import unquote

from airflow_epochs.coordination.base.errors import InvalidInput
from airflow_epochs.redaction import redact_uri

MAX_LOCATION_LENGTH = 4096


def validate_location(what: str, location: object) -> str:
    """Return ``location`` if it is usable as the ``what`` location, else raise :class:`InvalidInput`."""
    if not isinstance(location, str) or not location.strip():
        raise InvalidInput(f"{what} location must be a non-empty path or URI, not {location!r}")
    shown = redact_uri(location)
    if len(location) > MAX_LOCATION_LENGTH:
        raise InvalidInput(f"{what} location {shown[:60]!r}... is longer than {MAX_LOCATION_LENGTH} characters")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in location):
        raise InvalidInput(f"{what} location {shown!r} holds control characters (NUL, newline, ...)")
    path = location.split("://", 1)[1] if "://" in location else location
    path = path.split("?", 1)[0].split("#", 1)[0]
    for _ in range(4):  # every decoding a reader may apply, until nothing changes
        if ".." in path.replace("\\", "/").split("/"):
            raise InvalidInput(f"{what} location {shown!r} has a '..' segment (after percent-decoding)")
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in path):
            raise InvalidInput(f"{what} location {shown!r} holds encoded control characters")
        decoded = unquote(path)
        if decoded == path:
            break
        path = decoded
    else:
        raise InvalidInput(f"{what} location {shown!r} is percent-encoded more than three times")
    return location
