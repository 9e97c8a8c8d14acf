"""Corrections (one family): a sealed (epoch, partition) gets a new version, and exactly the seals that
read the old version are re-produced, each once.

- :mod:`.corrections`: :class:`Corrections`, bound as ``ledger.corrections``;
- :mod:`.reseal`: opening and voting a new version; :mod:`.invalidation`: the plan of stale seals
  and its progress; :mod:`.versions`: reads of versions; :mod:`.records`, :mod:`.errors`.
"""

from airflow_epochs.coordination.recipes.corrections.corrections import Corrections

__all__ = ["Corrections"]
