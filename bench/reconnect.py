"""Watches through a leader failover (group ``reconnect``): N waits re-armed after the leader dies.

Ours: the triggers' shared client (:class:`~airflow_epochs.triggers.rearming_client.RearmingKazooClient`)
holding N exists-watches, one per waiter, on one session. Peer: one plain kazoo client per waiter, each
with its exists-watch; kazoo fires NONE on the lost connection and forgets the watch, so each waiter
sets it again (one ``exists`` each) once its client is connected, which is what a waiter on its own
client has to do.

One run of a side: a fresh 3-node ensemble's waits are armed, the leader is killed (SIGKILL), and as
soon as the two survivors serve again a writer creates a tenth of the waited-for nodes ("seals"), racing
the waiters' reconnects. Reported per side: seconds from the kill until every wait is armed again,
requests sent per waiter from the kill until every seal was heard of, the most requests ever
outstanding at once, and the seals missed (a sealed node whose waiter did not hear of it exactly once
within 60 s). The killed member is restarted between runs; the sides alternate.

    python bench/reconnect.py [--smoke]      # alone; bench/run.py includes it
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections import Counter
from typing import Any

from common import alternate, compare
from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import EventType, WatchedEvent

from airflow_epochs.servers.embedded_zookeeper import ZooKeeperEnsemble
from airflow_epochs.triggers.rearming_client import RearmingKazooClient

HEARD_TIMEOUT = 60.0


class Failover:
    """One ensemble, run after run: arm a side's waits, kill the leader, seal, measure."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.sealed = max(1, n // 10)
        self.cluster = ZooKeeperEnsemble(3, max_client_connections=0, heap_mb=512)
        self.cluster.start()
        self.runs = 0
        self.extra: dict[str, list[dict[str, float]]] = {"ours": [], "peer": []}

    def close(self) -> None:
        self.cluster.stop()

    def _writer(self) -> KazooClient:
        writer = KazooClient(hosts=self.cluster.hosts, timeout=30)
        writer.start(timeout=30)
        return writer

    def _fail_over(self, seal: list[str]) -> float:
        """Kill the leader, seal ``seal`` once the survivors serve; the kill's monotonic time."""
        leader = self.cluster.leader()
        if leader is None:
            raise RuntimeError("the ensemble has no leader")
        killed_at = time.monotonic()
        self.cluster.kill(leader)
        self._killed = leader
        self.cluster.wait_serving([i for i in range(3) if i != leader])
        writer = self._writer()
        try:
            for path in seal:
                writer.create(path)
        finally:
            writer.stop()
            writer.close()
        return killed_at

    def _heal(self) -> None:
        self.cluster.restart(self._killed)
        self.cluster.wait_serving()

    def _paths(self, side: str) -> list[str]:
        self.runs += 1
        base = f"/reconnect/{side}-{self.runs}"
        writer = self._writer()
        try:
            writer.ensure_path(base)
        finally:
            writer.stop()
            writer.close()
        return [f"{base}/w{i:05d}" for i in range(self.n)]

    @staticmethod
    def _missed(heard: Counter[str], seal: list[str]) -> int:
        deadline = time.monotonic() + HEARD_TIMEOUT
        while time.monotonic() < deadline and any(heard[p] < 1 for p in seal):
            time.sleep(0.05)
        return sum(1 for p in seal if heard[p] != 1) + sum(n for p, n in heard.items() if p not in seal)

    # -- ours: one re-arming session ---------------------------------------------------------

    def ours(self) -> float:
        paths = self._paths("ours")
        seal = paths[:: self.n // self.sealed][: self.sealed]
        heard: Counter[str] = Counter()
        lock = threading.Lock()
        client = RearmingKazooClient(hosts=self.cluster.hosts, timeout=30)
        client.start(timeout=30)

        def watch(event: WatchedEvent) -> None:
            if event.type == EventType.CREATED:
                with lock:
                    heard[event.path] += 1

        try:
            for start in range(0, self.n, 100):  # arm in windows of 100 outstanding
                answers = [client.exists_async(p, watch=watch) for p in paths[start:start + 100]]
                for answer in answers:
                    answer.get(timeout=30)
            while client.stats()["inflight"]:  # the arming answers' bookkeeping runs on kazoo's thread
                time.sleep(0.01)
            client.reset_stats()
            killed_at = self._fail_over(seal)
            while client.stats()["rearms_done"] < 1:
                if time.monotonic() - killed_at > HEARD_TIMEOUT:
                    raise RuntimeError("the waits were not re-armed")
                time.sleep(0.01)
            rearmed = time.monotonic() - killed_at
            missed = self._missed(heard, seal)
            stats = client.stats()
        finally:
            client.stop()
            client.close()
            self._heal()
        self.extra["ours"].append({"requests": stats["requests"] / self.n, "inflight_max": stats["inflight_max"],
                                   "missed": missed, "sessions": 1})
        return rearmed

    # -- peer: a kazoo client per waiter --------------------------------------------------------

    def peer(self) -> float:
        paths = self._paths("peer")
        seal = paths[:: self.n // self.sealed][: self.sealed]
        heard: Counter[str] = Counter()
        lock = threading.Lock()
        counts = {"inflight": 0, "inflight_max": 0, "requests": 0}
        lost_waits: set[str] = set()  # waiters whose watch kazoo dropped and who have not set it again
        measuring = threading.Event()
        clients = [KazooClient(hosts=self.cluster.hosts, timeout=30) for _ in paths]
        for started in [c.start_async() for c in clients]:
            started.wait(60)

        arming: set[str] = set()

        def waiter(client: KazooClient, path: str) -> None:
            def arm() -> None:
                with lock:
                    if path in arming:
                        return
                    arming.add(path)
                    counts["inflight"] += 1
                    counts["requests"] += 1
                    counts["inflight_max"] = max(counts["inflight_max"], counts["inflight"])
                answer = client.exists_async(path, watch=watch)
                answer.rawlink(armed)

            def armed(answer: Any) -> None:
                with lock:
                    arming.discard(path)
                    counts["inflight"] -= 1
                    if answer.successful():
                        lost_waits.discard(path)
                        if answer.value is not None:
                            heard[path] += 1  # sealed while this waiter's watch was gone
                if not answer.successful() and client.connected:  # lost again and already back
                    arm()

            def watch(event: WatchedEvent) -> None:
                if event.type == EventType.CREATED:
                    with lock:
                        heard[path] += 1
                elif event.type == EventType.NONE:
                    with lock:
                        lost_waits.add(path)  # kazoo dropped the watch with the connection
                    if client.connected and measuring.is_set():  # the reconnect came first
                        arm()

            def on_state(state: str) -> bool:
                if state == KazooState.CONNECTED and measuring.is_set():
                    with lock:
                        again = path in lost_waits
                    if again:
                        arm()
                return False

            client.add_listener(on_state)
            client.exists(path, watch=watch)

        try:
            for client, path in zip(clients, paths, strict=True):
                waiter(client, path)
            measuring.set()
            killed_at = self._fail_over(seal)
            while lost_waits or counts["inflight"] or not all(c.connected for c in clients):
                if time.monotonic() - killed_at > 5 * HEARD_TIMEOUT:
                    raise RuntimeError(f"{len(lost_waits)} of {self.n} waits were not re-armed")
                time.sleep(0.01)
            rearmed = time.monotonic() - killed_at
            missed = self._missed(heard, seal)
        finally:
            for client in clients:
                client.stop()
                client.close()
            self._heal()
        self.extra["peer"].append({"requests": counts["requests"] / self.n, "inflight_max": counts["inflight_max"],
                                   "missed": missed, "sessions": self.n})
        return rearmed


def run_all(smoke: bool) -> None:
    n = 50 if smoke else 1000
    repeats = 1 if smoke else 3
    bench = Failover(n)
    try:
        ours, peer = alternate(repeats, bench.ours, bench.peer)
    finally:
        bench.close()
    kazoo_each = f"kazoo client per waiter ({n} sessions)"
    compare(f"reconnect_rearm_s_n{n}", "reconnect", f"seconds from leader kill to {n} waits armed again",
            ours, peer, "s", kazoo_each)

    def col(side: str, key: str) -> list[float]:
        return [float(row[key]) for row in bench.extra[side]]

    compare(f"reconnect_requests_n{n}", "reconnect", "requests per waiter, kill until every seal heard of",
            col("ours", "requests"), col("peer", "requests"), "req/waiter", kazoo_each,
            note="ours: SetWatches batches (last zxid seen); peer: one exists per waiter, plus a session "
                 "reconnect each")
    compare(f"reconnect_inflight_max_n{n}", "reconnect", "most requests outstanding at once after the kill",
            col("ours", "inflight_max"), col("peer", "inflight_max"), "requests", kazoo_each)
    compare(f"reconnect_missed_seals_n{n}", "reconnect",
            f"seals ({max(1, n // 10)} made during the failover) not heard of exactly once",
            col("ours", "missed"), col("peer", "missed"), "seals", kazoo_each,
            note="0 is the promise; median of the runs (each run's count is in the spread)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    import logging

    logging.getLogger("kazoo").setLevel(logging.ERROR)
    run_all(args.smoke)
    return 0


if __name__ == "__main__":
    sys.exit(main())
