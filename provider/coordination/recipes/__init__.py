"""Coordination recipes bound to a ledger the way kazoo binds ``zk.Lock``: barriers, leadership and
leases, locks, consumers and backpressure, asset delivery, lineage. Built on ``protocol``.
"""
