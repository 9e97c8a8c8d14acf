"""Debian's chromium for the browser tests: where it is, how it starts on a machine without a display,
GPU or outside network, and a persistent context in a throw-away profile."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@contextlib.contextmanager
def chromium_context(*, width: int, height: int, prefix: str = "epochs-chromium-") -> Iterator[Any]:
    """A playwright persistent context of :data:`CHROMIUM` in a new profile folder (removed after)."""
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix=prefix)
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True,
            viewport={"width": width, "height": height})
        try:
            yield context
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)
