"""Deadline alert callbacks for the tests: each appends the alert it got, as one JSON line, to ``out``
(a file, so that alerts from several processes, triggerers included, can be counted)."""

from __future__ import annotations

import json
import os
import time
from typing import Any


async def record_alert(*, out: str, alert: dict[str, Any], tag: str = "") -> None:
    """An ``AsyncCallback`` target, as Airflow's deadline alerts call theirs."""
    with open(out, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"alert": alert, "tag": tag, "pid": os.getpid(), "at": time.time()}) + "\n")


def record_alert_sync(*, out: str, alert: dict[str, Any]) -> None:
    """A plain callable (a ``SyncCallback`` target): the trigger runs it in a thread."""
    with open(out, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"alert": alert, "tag": "sync", "pid": os.getpid(), "at": time.time()}) + "\n")
