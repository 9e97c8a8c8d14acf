"""What a znode read answers, by name: the bytes and stat of a read (:class:`Znode`) and a record decoded
from one with the stat it was read at (:class:`Found`). kazoo answers a bare ``(data, stat)`` tuple; the
kernel's reads answer these, so a caller writes ``raw.data`` and ``found.stat.version``, never ``raw[0]``
(``tests/unit/test_znode_answers.py`` holds it)."""

from __future__ import annotations

from typing import Generic, NamedTuple, TypeVar

from kazoo.protocol.states import ZnodeStat

__all__ = ["Found", "Znode"]

T = TypeVar("T")


class Znode(NamedTuple):
    """A znode as one read saw it."""

    data: bytes
    stat: ZnodeStat


class Found(NamedTuple, Generic[T]):
    """A record decoded from a znode, and the stat of the read it came from (its ``version`` fences a
    write that must not overwrite a newer one, its ``czxid``/``mzxid`` order it)."""

    record: T
    stat: ZnodeStat
