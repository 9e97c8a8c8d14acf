"""What takes a whole ledger: the coordinator's leader-aware open, ordered submission, reconfiguration
and declared producers' votes. The top layer, above the ledger face.
"""
