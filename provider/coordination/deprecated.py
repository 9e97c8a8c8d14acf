"""What moved, in one place: old import paths and old names keep working for a release and warn.

- Modules of the core that moved into the recipe families (``recipes/<family>/``) and ``declared/``
  are found under their old dotted names by a finder installed when the package is imported: the
  old name is the new module itself (same objects), and importing it warns once.
- The module-level shortcuts over a ledger (``register_consumer(ledger, ...)`` and the like) are the
  ledger's own handles now; the old functions call them and warn.

The changelog lists every entry. Nothing in the package imports an old name (a test holds it).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_epochs.coordination.ledger import EpochLedger
    from airflow_epochs.coordination.recipes.backpressure.consumers import ConsumerState
    from airflow_epochs.coordination.recipes.lineage import LineageItem

_CORE = "airflow_epochs.coordination."

# old module (below the core) -> where it lives now
MOVED_MODULES: dict[str, str] = {
    "recipes.barrier_values": "recipes.barriers.records",
    "recipes.barrier_state": "recipes.barriers.barrier",
    "recipes.leadership": "recipes.leadership.lease",
    "recipes.backpressure": "recipes.backpressure.consumers",
    "wire.consumer_records": "recipes.backpressure.records",
    "recipes.asset_delivery": "recipes.delivery.delivery",
    "protocol.delivery_scopes": "recipes.delivery.scopes",
    "wire.deadline_records": "recipes.deadlines.records",
    "state.seal_stats": "recipes.deadlines.stats",
    "state.alert_archive": "recipes.deadlines.alerts",
    "recipes.versions_face": "recipes.corrections.corrections",
    "protocol.reseal": "recipes.corrections.reseal",
    "protocol.invalidation": "recipes.corrections.invalidation",
    "state.versions": "recipes.corrections.versions",
    "wire.versions": "recipes.corrections.records",
    "base.reseal_errors": "recipes.corrections.errors",
    "services.declared_votes": "declared.votes",
    "services.declared_reruns": "declared.reruns",
    "services.declared_staging": "declared.staging",
    "wire.declared_records": "declared.records",
}
# Old modules whose names are now family packages: importing them gives the package, whose public
# names are those the old module exported (``recipes.barriers``, ``recipes.deadlines``).
# ``wire.recipe_nodes`` was split between three families: its names are found by attribute.
_SPLIT = {"wire.recipe_nodes": {
    "Holding": "recipes.leadership.records", "LeaseNode": "recipes.leadership.records",
    "BarrierNode": "recipes.barriers.records", "ArrivalNode": "recipes.barriers.records",
    "ReleaseNode": "recipes.barriers.records", "RetiredScope": "recipes.delivery.records",
    "DeliveryCursor": "recipes.delivery.records"}}


class _SplitModule(ModuleType):
    """An old module whose names now live in several modules (each found on first use)."""

    def __init__(self, name: str, names: dict[str, str]) -> None:
        super().__init__(name)
        self._names = names

    def __getattr__(self, attr: str) -> Any:
        target = self._names.get(attr)
        if target is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        return getattr(importlib.import_module(_CORE + target), attr)


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module name of the core and hands out the module it moved to, with a warning."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None,
                  ) -> importlib.machinery.ModuleSpec | None:
        old = fullname[len(_CORE):] if fullname.startswith(_CORE) else None
        if old is None or (old not in MOVED_MODULES and old not in _SPLIT):
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        old = spec.name[len(_CORE):]
        new = MOVED_MODULES.get(old)
        warnings.warn(f"{spec.name} is deprecated: import {_CORE + new if new else 'its names from their families'}"
                      " instead", DeprecationWarning, stacklevel=2)
        if new is None:
            return _SplitModule(spec.name, _SPLIT[old])
        return importlib.import_module(_CORE + new)

    def exec_module(self, module: ModuleType) -> None:
        """The module is the new one, already executed."""


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (the package's index calls it)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())


# -- the module-level shortcuts over a ledger ------------------------------------------------


def _warn(old: str, new: str) -> None:
    warnings.warn(f"airflow_epochs.coordination.{old}() is deprecated: use {new}", DeprecationWarning, stacklevel=3)


def register_consumer(ledger: EpochLedger, consumer: str, *, acked: int | None = None,
                      request_id: str | None = None) -> ConsumerState:
    """Deprecated: ``ledger.consumer(consumer).register(...)``."""
    _warn("register_consumer", "ledger.consumer(name).register(...)")
    return ledger.consumer(consumer).register(acked=acked, request_id=request_id)


def acknowledge(ledger: EpochLedger, consumer: str, epoch: int) -> ConsumerState:
    """Deprecated: ``ledger.consumer(consumer).acknowledge(epoch)``."""
    _warn("acknowledge", "ledger.consumer(name).acknowledge(epoch)")
    return ledger.consumer(consumer).acknowledge(epoch)


def unregister_consumer(ledger: EpochLedger, consumer: str, *, request_id: str | None = None) -> bool:
    """Deprecated: ``ledger.consumer(consumer).unregister(...)``."""
    _warn("unregister_consumer", "ledger.consumer(name).unregister(...)")
    return ledger.consumer(consumer).unregister(request_id=request_id)


def consumers(ledger: EpochLedger) -> list[ConsumerState]:
    """Deprecated: ``ledger.backpressure().consumers()``."""
    _warn("consumers", "ledger.backpressure().consumers()")
    return ledger.backpressure().consumers()


def lineage_of(ledger: EpochLedger, epoch: int, partition: str) -> LineageItem | None:
    """Deprecated: ``ledger.lineage(epoch, partition)``."""
    _warn("lineage_of", "ledger.lineage(epoch, partition)")
    return ledger.lineage(epoch, partition)


SHORTCUTS = ("register_consumer", "acknowledge", "unregister_consumer", "consumers", "lineage_of")
