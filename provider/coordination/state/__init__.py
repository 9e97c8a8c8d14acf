"""Reads of a pipeline's state: the pipeline context a call works in, the reader, the history, the
archive read-through and retired partitions. Built on ``wire`` and ``base``.
"""
