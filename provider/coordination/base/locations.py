"""Storage locations parsed once into their canonical parts, refused unless spelled canonically.

A URI parser silently drops what follows ``#``, ``?`` or ``;`` (``file:///lake#`` opens ``/lake``, so
every folder derived from it would be the root itself) and decodes ``%`` escapes (``%2e%2e`` climbs out).
So a location is refused (:class:`LocationNotCanonical`, naming it) unless it is the one spelling of
its parts: a plain absolute path or ``scheme://authority/path`` with a scheme of :data:`SCHEMES`, no
query, fragment, parameters, escapes, credentials, ``.``/``..``/empty segments, trailing ``/``,
whitespace or control characters. Every location derived from one (:meth:`Location.child`) extends
the same text, so it stays canonical and inside. The storage root of Spark jobs and the archive of
compacted epochs are both parsed here. Messages show a location only up to its first ``?``, ``#`` or
``;`` and never the credentials of its authority.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from airflow_epochs.coordination.base.errors import InvalidInput

MAX_LOCATION_LENGTH = 4096
_USERINFO = re.compile(r"://[^/]*@")


def _shown(value: str) -> str:
    """``value`` for a message: no credentials, nothing after a ``?``, ``#`` or ``;``."""
    cut = min((i for i in (value.find(c) for c in "?#;") if i >= 0), default=len(value))
    return _USERINFO.sub("://***@", value[:cut]) + ("…" if cut < len(value) else "")


#: The schemes a storage location may use: local paths (plain or ``file:///``) and the remote
#: filesystems pyarrow opens (the archive accepts the same).
SCHEMES = ("file", "s3", "gs", "gcs", "hdfs", "abfs", "abfss")
# One path segment: letters, digits and the punctuation storage layouts use (``epoch=3``,
# ``run=ab12``, ``a-b_c.d``). No ``%`` (pyarrow decodes escapes), ``#``/``?``/``;`` (a URI parser
# cuts the path there), space, quote or backslash.
_SEGMENT = re.compile(r"[A-Za-z0-9_.=:@+,~-]+")
# A bucket or host[:port]; abfs adds ``container@account.host``. Lowercase: one spelling per place.
_AUTHORITY = re.compile(r"[a-z0-9]([a-z0-9._-]*[a-z0-9])?(:[0-9]{1,5})?")
_ABFS_AUTHORITY = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?@[a-z0-9]([a-z0-9.-]*[a-z0-9])?")


class LocationNotCanonical(InvalidInput):
    """A storage location is not in its one canonical spelling; nothing was read, written or deleted."""


@dataclass(frozen=True)
class Location:
    """A storage location parsed once into its parts; ``text`` is its canonical spelling (a plain
    absolute path or ``scheme://authority/path``), which every derived location extends."""

    scheme: str
    authority: str
    path: str  # absolute, normalised, no trailing '/' (except the filesystem root itself)
    text: str

    @property
    def local(self) -> bool:
        return self.scheme == "file"

    def child(self, *names: str) -> Location:
        """The location ``names`` below this one (each one plain segment, checked)."""
        for name in names:
            if not isinstance(name, str) or name in (".", "..") or not _SEGMENT.fullmatch(name):
                raise LocationNotCanonical(f"{name!r} is not a plain path segment under {_shown(self.text)!r}")
        tail = "/".join(names)
        return Location(self.scheme, self.authority, posixpath.join(self.path, tail),
                        f"{self.text.rstrip('/')}/{tail}")

    def contains(self, other: Location) -> bool:
        """Whether ``other`` is this location or lies below it (same filesystem; by its parsed path)."""
        if (other.scheme, other.authority) != (self.scheme, self.authority):
            return False
        return other.path == self.path or other.path.startswith(self.path.rstrip("/") + "/")

    def relative(self, other: Location) -> list[str]:
        """The segments leading from this location to ``other`` (which it must contain)."""
        if not self.contains(other):
            raise LocationNotCanonical(f"{_shown(other.text)!r} is not inside {_shown(self.text)!r}")
        rest = other.path[len(self.path.rstrip("/")):].strip("/")
        return rest.split("/") if rest else []


def parse_location(what: str, value: object) -> Location:
    """Parse ``value`` as a storage location, refusing (:class:`LocationNotCanonical`, naming it) anything
    but the canonical spelling: a scheme from :data:`SCHEMES` (or a plain absolute path), no query,
    fragment, parameters, percent-escapes, credentials, ``.``/``..`` or empty segments, trailing ``/``,
    whitespace or control characters."""
    if not isinstance(value, str) or not value:
        raise LocationNotCanonical(f"{what} location must be a non-empty path or URI, not {value!r}")
    shown = _shown(value)
    if len(value) > MAX_LOCATION_LENGTH:
        raise LocationNotCanonical(f"{what} location {shown[:60]!r}... is longer than {MAX_LOCATION_LENGTH} "
                                   "characters")

    def refuse(why: str) -> LocationNotCanonical:
        return LocationNotCanonical(f"{what} location {shown!r} is not canonical: {why}; nothing was read, "
                                    "written or deleted")

    bad = sorted({ch for ch in value if ord(ch) < 32 or ord(ch) == 127 or ch in "#?;% \\\"'<>`|^{}[]\t"})
    if bad:
        raise refuse(f"it holds {''.join(bad)!r} (no query, fragment, parameters, escapes, spaces or "
                     "control characters)")
    scheme, sep, rest = value.partition("://")
    if not sep:
        if ":" in value.split("/", 1)[0] and not value.startswith("/"):
            raise refuse("a URI needs '://' after its scheme")
        scheme, authority, path = "file", "", value
    else:
        if scheme not in SCHEMES:
            raise refuse(f"scheme {scheme!r} is not one of {list(SCHEMES)} (lowercase)")
        authority, slash, path = rest.partition("/")
        path = slash + path
        if scheme == "file":
            if authority:
                raise refuse("a file URI names no host (file:///absolute/path)")
        elif not (_ABFS_AUTHORITY if scheme.startswith("abfs") else _AUTHORITY).fullmatch(authority):
            raise refuse("its authority is not a lowercase bucket or host name (no credentials: give those to "
                         "the filesystem, not the location)")
    if not path.startswith("/"):
        raise refuse("a local location is an absolute path" if scheme == "file" and not sep
                     else "the path must be absolute")
    segments = path.split("/")[1:]
    if path != "/" and path.endswith("/"):
        raise refuse("it ends in '/'")
    if path != "/":
        for segment in segments:
            if segment in ("", ".", ".."):
                raise refuse(f"it has a {segment or 'empty'!r} segment" if segment else "it has an empty segment")
            if not _SEGMENT.fullmatch(segment):
                raise refuse(f"segment {segment!r} holds characters outside letters, digits and '_.=:@+,~-'")
    return Location(scheme, authority, path, value)
