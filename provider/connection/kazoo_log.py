"""kazoo's reconnect chatter folded into two lines per outage: kazoo logs every try of every host while
ZooKeeper is away ("Connection dropped", "Connecting to ...", "Connection time-out", ...: 39 warnings in
one task's try during a 135 s outage), which buries the task's own lines. A client's log says once that
ZooKeeper went away, then once that it is back, with how long it was and how many lines were folded.
What is not reconnect chatter (a session that expired, a retry policy given up, authentication
failures, errors) is always logged as kazoo wrote it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import MutableMapping
from typing import Any

__all__ = ["ReconnectFolding"]

# Lines that say the connection went away (the first one of an outage is kept)
AWAY = ("Connection dropped", "Connection time-out", "Transition to CONNECTING", "Zookeeper connection lost")
# Lines of each further try while it is away (folded)
RETRYING = (*AWAY, "Connecting to ", "Closing connection to ", "Cannot resolve ")
BACK = "Zookeeper connection established"


class ReconnectFolding(logging.LoggerAdapter):  # type: ignore[type-arg]  # generic only in typeshed
    """The logger of one kazoo client (kazoo calls ``log``, ``warning``, ``info``, ``exception`` on it):
    the first line of an outage and the line of its end, the tries between them counted, not logged.

    :param logger: the logger the lines go to (the package's redacting kazoo logger).
    :param clock: monotonic seconds (tests).
    """

    def __init__(self, logger: logging.Logger, *, clock: Any = time.monotonic) -> None:
        super().__init__(logger, {})
        self.clock = clock
        self.away_since: float | None = None
        self.folded = 0

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        return msg, kwargs

    def log(self, level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
        text = str(msg)
        if self.away_since is None:
            if level >= logging.WARNING and text.startswith(AWAY):
                self.away_since, self.folded = self.clock(), 0
                text = f"{text} (ZooKeeper is away: its reconnect tries are folded until it is back)"
                self.logger.log(level, text, *args, **kwargs)
                return
        elif text.startswith(BACK):
            lasted, folded = self.clock() - self.away_since, self.folded
            self.away_since = None
            self.logger.log(max(level, logging.INFO), "%s after %.1f s away (%d reconnect lines folded)",
                            text % args if args else text, lasted, folded, **kwargs)
            return
        elif text.startswith(RETRYING):
            self.folded += 1
            return
        self.logger.log(level, msg, *args, **kwargs)

    def warn(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        """kazoo still calls the old name (an unknown watch event)."""
        self.log(logging.WARNING, msg, *args, **kwargs)
