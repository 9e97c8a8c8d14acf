"""A process supervisor for a :class:`cluster_topology.Cluster` run inside a test or a benchmark."""

from __future__ import annotations

import threading

from cluster_topology import Cluster, say


class Supervisor:
    """A thread that calls :meth:`Cluster.supervise_once` every ``interval`` seconds (in a test or a
    benchmark, where no ``scripts/cluster.py up`` process supervises); ``restarted`` lists what it restarted."""

    def __init__(self, cluster: Cluster, interval: float = 2.0) -> None:
        self.cluster = cluster
        self.interval = interval
        self.restarted: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="cluster-supervisor", daemon=True)

    def _loop(self) -> None:
        while not self.stopping.wait(self.interval):
            for name in self.cluster.supervise_once():
                say(f"supervisor: {name} had died: restarted it, as a process supervisor would")
                self.restarted.append(name)

    def __enter__(self) -> Supervisor:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        self.thread.join(60)
