"""Keeping secrets out of logs: URI credentials, ZooKeeper auth requests, registered secrets.

Two layers. Where Airflow is present, every secret the provider handles (connection passwords, the
Spark Connect token, the password part of a storage URI) is registered with Airflow's secrets masker
(:func:`register_secret`), which masks it in every line of the task's log, whoever writes the line.
Everywhere, and for text that reaches a log outside a task (the CLI, a plain script, kazoo's own
DEBUG log), :func:`redact` masks what a pattern can recognise: the userinfo of URIs, the values of
query parameters not known to be plain, and the ``auth`` field of kazoo's Auth request, escaped quotes included.

No Airflow import at module level: the coordination core and Spark drivers use this too.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

MASK = "***"

# scheme://userinfo@host: everything up to the last '@' on the line (within 1 KiB): a secret may hold a raw
# '/', '#', '?', space, quote or '<' that a URI parser would not expect. A text with a later '@' on the
# line is over-masked, which is the safe side. file:///... has no userinfo (its first character is '/').
_URI_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^\s/@][^\n]{0,1024}@)")
# ?name=value &name=value ;name=value (pyarrow's S3 URIs, Spark Connect URLs, presigned URLs, JDBC-style
# strings): every value is masked up to the next '&', ';' or the line's end, unless the name is on
# this allow-list of settings that are never secret (a deny-list of secret words missed sig=, apikey=,
# X-Amz-Signature, X-Goog-Signature...).
PLAIN_PARAMETERS = frozenset({
    "region", "endpoint_override", "scheme", "format", "version", "use_ssl", "allow_bucket_creation",
    "allow_bucket_deletion", "user.name", "replication", "buffer_size", "default_block_size", "epoch",
    "attempt", "run", "partition", "pipeline", "x-amz-algorithm", "x-amz-date", "x-amz-expires",
    "x-amz-signedheaders", "x-goog-algorithm", "x-goog-date", "x-goog-expires", "x-goog-signedheaders",
    "sv", "se", "st", "sp", "sr", "spr", "srt", "ss",
})
_PARAMETER = re.compile(r"(?P<key>[?&;](?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)=)(?P<value>[^&;\n]*)")
_PLAIN_VALUE = re.compile(r"[^\s'\"#<>]*")
# kazoo's DEBUG log of an Auth request: auth='user:pass', auth="user:pa'ss", auth='user:pa\'s"s', auth=b'...'.
# A quoted value ends at the first unescaped closing quote.
_KAZOO_AUTH = re.compile(r"""auth=b?(?P<q>['"])(?:\\.|(?!(?P=q)).)*(?:(?P=q)|$)""", re.DOTALL)


def _parameter(match: re.Match[str]) -> str:
    if match.group("name").lower() not in PLAIN_PARAMETERS:
        return f"{match.group('key')}{MASK}"
    value = match.group("value")
    plain = _PLAIN_VALUE.match(value)
    head = plain.group(0) if plain else ""
    return f"{match.group('key')}{head}{_redact_parameters(value[len(head):])}"


def _redact_parameters(text: str) -> str:
    return _PARAMETER.sub(_parameter, text)


def redact_uri(text: str) -> str:
    """``text`` with the userinfo of every URI and the value of every parameter not known to be plain
    (:data:`PLAIN_PARAMETERS`) masked."""
    text = _URI_USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    return _redact_parameters(text)


def redact(text: str) -> str:
    """``text`` with everything a pattern can recognise as a credential masked (URIs, kazoo auth)."""
    if "auth=" in text:
        text = _KAZOO_AUTH.sub(f"auth='{MASK}'", text)
    return redact_uri(text)


def uri_secrets(location: str) -> list[str]:
    """The secret parts of a URI (the userinfo's password, or the whole userinfo, and credential query
    values), decoded and as written, for registration with a secrets masker."""
    found: list[str] = []
    for match in _URI_USERINFO.finditer(location):
        userinfo = match.group("userinfo")[:-1]
        _, sep, password = userinfo.partition(":")
        for value in (password if sep else userinfo, userinfo):
            found += [value, unquote(value)]
    for match in _PARAMETER.finditer(location):
        if match.group("name").lower() not in PLAIN_PARAMETERS:
            found += [match.group("value"), unquote(match.group("value"))]
    with contextlib.suppress(ValueError):
        parts = urlsplit(location)
        if parts.password:
            found.append(parts.password)
    return [value for value in dict.fromkeys(found) if value]


def register_secret(*values: str | None) -> None:
    """Have Airflow's secrets masker mask these values in every log line of this task (no-op without
    Airflow). The quoted form Python's ``repr`` gives a value is registered too: that is how a value
    with a quote or a backslash appears inside a logged structure."""
    sdk_forms: list[str] = []  # each value and its quoted form (how repr shows it inside a structure)
    for value in values:
        if value:
            sdk_forms += [repr(value)[1:-1], value]
    if not sdk_forms or "airflow" not in sys.modules:  # no Airflow loaded here: no Airflow log to mask,
        return  # and importing it would read its configuration too early (the patterns protect the rest)
    try:
        from airflow.sdk.log import mask_secret
    except ImportError:  # no Airflow here: the patterns of redact() are the protection
        return
    # Airflow core keeps a second masker, which its own log configuration uses (``airflow dags test`` and
    # ``dag.test()`` print task logs through it). It is told first and silently, also of the twice-quoted
    # form: the task SDK's public mask_secret then also tells the supervisor, and under ``dags test`` logs
    # that request at DEBUG with the value quoted once more.
    with contextlib.suppress(ImportError):
        from airflow._shared.secrets_masker import mask_secret as core_mask_secret

        for form in dict.fromkeys([repr(f)[1:-1] for f in sdk_forms] + sdk_forms):
            core_mask_secret(form)
    for form in dict.fromkeys(sdk_forms):
        mask_secret(form)


def register_uri_secrets(locations: Iterable[str]) -> None:
    """Register the secret parts of every URI in ``locations`` (see :func:`uri_secrets`)."""
    for location in locations:
        register_secret(*uri_secrets(location))


class RedactingFilter(logging.Filter):
    """A logging filter that applies :func:`redact` to each record's final message."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken record is logging's problem, not a reason to drop it
            return True
        redacted = redact(message)
        if redacted != message:
            record.msg = redacted
            record.args = None
        return True
