"""What takes a whole ledger: the coordinator's leader-aware open, ordered submission and
reconfiguration. Above the face, beside ``declared``.
"""
