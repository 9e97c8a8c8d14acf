"""The recipe families, one folder each (its records, paths, reads, writes and async watch):
``barriers``, ``leadership``, ``backpressure``, ``delivery``, ``deadlines``, ``corrections``; and small
one-module recipes beside them: ``locks``, ``waits``, ``lineage``. Each is built as
``Recipe(ctx, ...)`` on a pipeline's context and bound to the ledger in one line, the way kazoo binds
``zk.Lock``. A family imports the kernel and only the families it names.
"""
