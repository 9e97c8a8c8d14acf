"""Asset delivery (one family): seals handed to Airflow as asset events, in epoch order, once per
delivery scope.

- :mod:`.delivery`: a scope's cursor and claims, the next seal or re-sealed version to deliver;
- :mod:`.scopes`: listing and retiring scopes, and the floor they set for compaction;
- :mod:`.records`: the cursor's and a retired scope's records; the asset event's own record;
- :mod:`.paths`: the znodes below ``asset-events/``.
"""

from airflow_epochs.coordination.recipes.delivery.scopes import (
    DeliveryScopeHeld,
    RetiredScope,
    UnknownDeliveryScope,
    delivery_scopes,
    retire_delivery_scope,
)

__all__ = ["DeliveryScopeHeld", "RetiredScope", "UnknownDeliveryScope", "delivery_scopes", "retire_delivery_scope"]
