"""Redaction masks every credential form of issue 35 (``sig=``, ``apikey=``, ``X-Amz-Signature``,
``X-Goog-Signature``; raw ``#``, ``?``, space, ``'``, ``<`` inside a URI's credentials): parameters are
masked unless their name is on an allow-list of plain settings."""

from __future__ import annotations

import pytest

from airflow_epochs.redaction import redact, redact_uri, uri_secrets

SECRET = "S3CR3T"


@pytest.mark.parametrize("text", [
    f"https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig={SECRET}&se=2026",
    f"https://example/x?apikey={SECRET}",
    f"https://example/x?api_key={SECRET}&region=eu",
    f"https://bucket.s3.amazonaws.com/o?X-Amz-Algorithm=AWS4&X-Amz-Signature={SECRET}&X-Amz-Date=1",
    f"https://storage.googleapis.com/b/o?X-Goog-Signature={SECRET}",
    f"s3://bucket/x?region=eu&anything_unknown={SECRET}",
    f"sc://localhost:15002/;token={SECRET}",
    f"s3://AKIA:{SECRET}#tail@bucket/x",
    f"s3://AKIA:{SECRET}?tail@bucket/x",
    f"s3://AKIA:{SECRET} tail@bucket/x",
    f"s3://AKIA:{SECRET}'tail@bucket/x",
    f"s3://AKIA:{SECRET}<tail@bucket/x",
    f"s3://AKIA:pre#{SECRET}@bucket/x",
    f"s3://AKIA:pre {SECRET}@bucket/x",
    f"s3://AKIA:pre'{SECRET}@bucket/x",
    f"s3://AKIA:pre<{SECRET}@bucket/x",
    f"s3://AKIA:pre?{SECRET}@bucket/x",
    f"postgresql://user:pa/ss{SECRET}@host:5432/db",
])
def test_every_credential_form_is_masked(text):
    assert SECRET not in redact(f"reading {text} and more"), redact(text)
    assert SECRET not in redact_uri(text)


def test_plain_settings_and_paths_stay_readable():
    assert redact("s3://bucket/lake/p?region=eu-west-1") == "s3://bucket/lake/p?region=eu-west-1"
    assert redact("file:///data/lake/epoch=3/attempt=2") == "file:///data/lake/epoch=3/attempt=2"
    assert redact("/data/lake/p/x/epoch=3") == "/data/lake/p/x/epoch=3"


def test_the_secret_parts_are_registered_for_masking():
    assert SECRET in uri_secrets(f"https://h/o?sig={SECRET}&sv=1")
    assert "1" not in uri_secrets(f"https://h/o?sig={SECRET}&sv=1")
    assert f"{SECRET} tail" in uri_secrets(f"s3://AKIA:{SECRET} tail@bucket/x")
