"""One transaction family a module: opening an epoch, votes (single and pipelined), seals, aborts,
rollbacks, the configuration store, retention and compaction, delivery scopes. Built on ``state``.
"""
