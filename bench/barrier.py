"""Barrier (group ``barrier``): N participants pass a barrier, ours against kazoo's DoubleBarrier.

Fair by construction: every participant's thread is started and its client connected before a start
gate opens; each participant arrives (ours: ``arrive`` then ``wait``; the peer: ``enter``) and
records when it passed. Two clocks, the same for both sides:

- release: from the release (the first participant to pass is the one that committed it: it returns
  right after, while everyone else waits on a watch) to each participant passing, the p50 and p95;
- whole: from the open gate (everyone starts arriving at once) to each participant passing.

Also the ZooKeeper requests per participant (the server's packet count over the run) and the client
CPU per participant. ``REPEATS`` runs of each side, alternating which goes first.
"""

from __future__ import annotations

import threading
import time

from common import REPEATS, Gate, alternate, client, compare, cpu_seconds, packets, pct

from airflow_epochs.coordination import EpochLedger, PipelineConfig, StragglerPolicy

CLIENTS = 8


class BarrierRuns:
    def __init__(self, hosts: str, port: int, n: int) -> None:
        self.hosts, self.port, self.n = hosts, port, n
        self.clients = [client(hosts) for _ in range(CLIENTS)]
        self.names = [f"w{i}" for i in range(n)]
        self.runs = 0
        self.extra: dict[str, list[tuple[float, float, float]]] = {"ours": [], "peer": []}

    def close(self) -> None:
        for zk in self.clients:
            zk.stop()
            zk.close()

    def _run(self, side: str, participant: callable) -> float:  # type: ignore[valid-type]
        gate = Gate(self.n)
        passed: list[float] = []
        errors: list[BaseException] = []
        lock = threading.Lock()

        def body(i: int) -> None:
            gate.wait_ready()
            gate.go.wait()
            try:
                participant(i)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
                return
            with lock:
                passed.append(time.perf_counter())

        threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(self.n)]
        for thread in threads:
            thread.start()
        before = packets(self.port)
        cpu0 = cpu_seconds()
        started = gate.open()
        for thread in threads:
            thread.join(600)
        cpu = (cpu_seconds() - cpu0) / self.n
        requests = (packets(self.port) - before) / self.n
        if errors or len(passed) != self.n:
            raise RuntimeError(f"{side}: {len(errors)} errors, {len(passed)}/{self.n} passed: {errors[:2]!r}")
        released = min(passed)
        after_release = [p - released for p in passed]
        whole = [p - started for p in passed]
        self.extra[side].append((pct(after_release, 0.95), requests, cpu, pct(whole, 0.5)))
        return pct(after_release, 0.5)

    def ours(self) -> float:
        self.runs += 1
        pipeline = f"bar{self.n}-{self.runs}"
        ledger = EpochLedger(self.clients[0], pipeline, owner="bench")
        ledger.create_pipeline(PipelineConfig({"out": ("job",)}))
        attempt = ledger.open_epoch(1)
        EpochLedger(self.clients[0], pipeline).barrier(1, "b").declare(StragglerPolicy.fail(600), self.names)
        barriers = [EpochLedger(zk, pipeline).barrier(1, "b", generation=attempt.generation) for zk in self.clients]

        def participant(i: int) -> None:
            barrier = barriers[i % CLIENTS]
            if not barrier.arrive(self.names[i]).released:
                barrier.wait(timeout=300)

        return self._run("ours", participant)

    def peer(self) -> float:
        self.runs += 1
        path = f"/bench/double{self.n}-{self.runs}"
        self.clients[0].ensure_path(path)
        barriers = [self.clients[i % CLIENTS].DoubleBarrier(path, self.n, identifier=self.names[i])
                    for i in range(self.n)]

        def participant(i: int) -> None:
            barriers[i].enter()

        return self._run("peer", participant)


def run(hosts: str, port: int, sizes: tuple[int, ...], repeats: int = REPEATS) -> None:
    for n in sizes:
        runs = BarrierRuns(hosts, port, n)
        try:
            runs.ours()  # warm-up
            runs.peer()
            runs.extra = {"ours": [], "peer": []}
            mine, theirs = alternate(repeats, runs.ours, runs.peer)
            p95 = {side: [e[0] for e in runs.extra[side]] for side in runs.extra}
            req = {side: [e[1] for e in runs.extra[side]] for side in runs.extra}
            cpu = {side: [e[2] * 1000 for e in runs.extra[side]] for side in runs.extra}
            whole = {side: [e[3] * 1000 for e in runs.extra[side]] for side in runs.extra}
            name = "kazoo DoubleBarrier"
            compare(f"barrier_p50_n{n}", "barrier", f"barrier release -> each of {n} passes, p50",
                    [m * 1000 for m in mine], [t * 1000 for t in theirs], "ms", name)
            compare(f"barrier_p95_n{n}", "barrier", f"barrier release -> each of {n} passes, p95",
                    [m * 1000 for m in p95["ours"]], [t * 1000 for t in p95["peer"]], "ms", name)
            compare(f"barrier_whole_p50_n{n}", "barrier", f"barrier, all {n} start together -> each passes, p50",
                    whole["ours"], whole["peer"], "ms", name)
            compare(f"barrier_requests_n{n}", "barrier", f"ZooKeeper requests per participant, N={n}",
                    req["ours"], req["peer"], "requests", name)
            compare(f"barrier_cpu_n{n}", "barrier", f"client CPU per participant, N={n}",
                    cpu["ours"], cpu["peer"], "ms", name)
        finally:
            runs.close()
