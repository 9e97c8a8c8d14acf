"""A real ZooKeeper server (or an N-node ensemble on loopback) for development, the demo, tests and CI.

Nothing is installed: the server runs on the local ``java`` with ZooKeeper jars already on the
machine, in this order of preference: ``$ZOOKEEPER_HOME`` (``lib/`` or the folder itself), the
pyspark wheel's ``jars/`` folder (pyspark 4.x ships ZooKeeper 3.9), Debian's ``zookeeper`` package.

Two traps seen with the pyspark jars are handled here: the server needs snappy-java on its class
path (without it the port listens but every client is told "not currently serving requests"), and
the four-letter words must be whitelisted: only ``srvr`` (mode and version) and ``mntr`` (metrics)
are, never ``envi`` or ``conf``, which tell any local user the server's environment and paths.

Secure by default: the server's folder is 0700 and every file in it 0600 (the Java process runs with
umask 077), because ZooKeeper's transaction log holds everything the ACLs protect. With ``tls`` it
also serves TLS on a ``secureClientPort`` (Netty, PEM key and trust stores; see
:mod:`airflow_epochs.servers.dev_certificates` for test certificates). With ``auth`` every session must
authenticate and ``/`` is ours alone (see :mod:`airflow_epochs.servers.zookeeper_security`);
:func:`airflow_epochs.servers.secured_zookeeper.secured_server` turns both on with kept credentials.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from airflow_epochs.connection.credentials import ServerAuth
from airflow_epochs.connection.zookeeper import ZooKeeperSettings
from airflow_epochs.private_files import open_private_log, private_dir, tighten, write_private
from airflow_epochs.process_identity import ProcessIdentity, identify, launch_environment
from airflow_epochs.servers.die_with_parent import launcher
from airflow_epochs.servers.zookeeper_runtime import (
    FOUR_LETTER_WORDS,
    LISTEN_BACKLOG,
    LOG_FILE_SIZE,
    JavaNotFound,
    ZooKeeperError,
    ZooKeeperJarsNotFound,
    ZooKeeperStartError,
    candidate_jar_dirs,
    find_java,
    find_zookeeper_jars,
    four_letter_word,
    free_port,
    log4j_config,
    pending_handshake_limit,
)
from airflow_epochs.servers.zookeeper_security import ServerTls, lock_root

__all__ = [  # the runtime's names too: one import for a test or a script that starts a server
    "FOUR_LETTER_WORDS",
    "EmbeddedZooKeeper",
    "JavaNotFound",
    "ServerAuth",
    "ServerTls",
    "ZooKeeperEnsemble",
    "ZooKeeperError",
    "ZooKeeperJarsNotFound",
    "ZooKeeperStartError",
    "candidate_jar_dirs",
    "find_java",
    "find_zookeeper_jars",
    "four_letter_word",
    "free_port",
]


def _host(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


@dataclass
class _Member:
    myid: int
    client_port: int
    peer_port: int
    election_port: int
    directory: Path
    secure_port: int | None = None
    address: str = "127.0.0.1"
    tls_only: ServerTls | None = None  # serves no plaintext port: speak TLS to it (our client certificate)
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def config_file(self) -> Path:
        return self.directory / "zoo.cfg"

    @property
    def log_file(self) -> Path:
        return self.directory / "zookeeper.log"

    def mode(self) -> str | None:
        """``standalone``, ``leader`` or ``follower`` while serving; None otherwise."""
        tls = self.tls_only
        answer = four_letter_word(self.client_port, host=self.address, timeout=1.0 if tls is None else 2.0,
                                  **(tls.client_files() if tls is not None else {}))
        for line in answer.splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class ZooKeeperEnsemble:
    """``size`` ZooKeeper servers on loopback (``size=1`` is a standalone server).

    :param size: number of members (1 for standalone, 3 or 5 for a quorum).
    :param directory: where data, configs and logs go; a temporary folder (removed on stop) if None.
    :param client_ports: fixed client ports, one per member; free ports are chosen if None.
    :param tick_time_ms: ZooKeeper's tick; session timeouts range from 2 to 120 ticks.
    :param java: the ``java`` to use (see :func:`find_java`).
    :param jar_dirs: folders to find jars in (see :func:`find_zookeeper_jars`).
    :param heap_mb: maximum JVM heap per member.
    :param max_client_connections: connections one client address may hold (ZooKeeper's
        ``maxClientCnxns``; its default is 60, 0 means no limit).
    :param tls: also serve TLS on a ``secureClientPort`` per member (see :class:`ServerTls`).
    :param secure_ports: fixed TLS ports, one per member (with ``tls``); free ports are chosen if None.
    :param auth: require every client to authenticate (ZooKeeper's enforced ``digest`` authentication)
        and give ``/`` and ``/zookeeper`` this identity's ACL alone at start (see :class:`ServerAuth`).
    :param address: the loopback address to bind (``127.0.0.1`` or ``::1``).
    :param die_with_parent: the members stop when this process exits, even by ``kill -9`` (Linux;
        start them from a thread that lives as long as the run, see :mod:`airflow_epochs.servers.die_with_parent`).
    :param plaintext_port: also serve the plaintext ``clientPort``; with ``False`` (``tls`` needed) only
        the TLS port is opened, and :attr:`hosts` and the client ports name it.
    :param max_pending_handshakes: TLS handshakes pending at once, beyond which new connections are closed
        (:func:`~airflow_epochs.servers.zookeeper_runtime.pending_handshake_limit` by default).
    """

    log_file_size = LOG_FILE_SIZE  # each member's log rolls over at this size (LOG_FILES files kept)

    def __init__(
        self,
        size: int = 3,
        *,
        directory: str | Path | None = None,
        client_ports: Sequence[int] | None = None,
        tick_time_ms: int = 500,
        java: str | None = None,
        jar_dirs: Iterable[Path | str] | None = None,
        heap_mb: int = 256,
        max_client_connections: int = 60,
        tls: ServerTls | None = None,
        secure_ports: Sequence[int] | None = None,
        auth: ServerAuth | None = None,
        address: str = "127.0.0.1",
        die_with_parent: bool = False,
        plaintext_port: bool = True,
        max_pending_handshakes: int | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"an ensemble needs at least one member, not {size}")
        if client_ports is not None and len(client_ports) != size:
            raise ValueError(f"{len(client_ports)} client ports given for {size} members")
        if not plaintext_port and tls is None:
            raise ValueError("a server without a plaintext port needs tls")
        if secure_ports is not None and (tls is None or len(secure_ports) != size):
            raise ValueError(f"{len(secure_ports)} secure ports given for {size} members"
                             + ("" if tls else " of a server without tls"))
        self.java = find_java(java)
        self.classpath = find_zookeeper_jars(jar_dirs)
        self.size = size
        self.tick_time_ms = tick_time_ms
        self.heap_mb = heap_mb
        self.max_client_connections = max_client_connections
        self.max_pending_handshakes = max_pending_handshakes or pending_handshake_limit(heap_mb)
        self.tls = tls
        self.auth = auth
        self.address = address
        self.die_with_parent = die_with_parent
        self._own_dir = directory is None
        self.directory = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="airflow-epochs-zk-"))
        private_dir(self.directory)
        self.plaintext_port = plaintext_port
        self.members = []
        for i in range(size):
            secure_port = (secure_ports[i] if secure_ports else free_port()) if tls else None
            # Without a plaintext port the TLS port is the one clients use: client_port names it.
            client_port = (client_ports[i] if client_ports else free_port()) if plaintext_port else secure_port
            self.members.append(_Member(
                myid=i + 1, client_port=client_port or 0, peer_port=free_port(), election_port=free_port(),
                directory=self.directory / f"member-{i + 1}", secure_port=secure_port, address=address,
                tls_only=None if plaintext_port else tls))

    # -- addresses ---------------------------------------------------------------------------

    @property
    def hosts(self) -> str:
        """The connection string of every member, for kazoo or an Airflow connection."""
        return ",".join(_host(m.address, m.client_port) for m in self.members)

    @property
    def secure_hosts(self) -> str:
        """The TLS connection string of every member (``tls`` must be set)."""
        if self.tls is None:
            raise ValueError("this server was started without tls")
        return ",".join(_host(m.address, m.secure_port or 0) for m in self.members)

    def client_settings(self) -> ZooKeeperSettings:
        """How our clients connect: over TLS (checking the certificate against the server's trust store,
        its CA) when the server serves it, with its digest credentials when it requires them."""
        extra: dict[str, object] = {}
        if self.tls is not None:
            extra = {"use_tls": True, **self.tls.client_files()}
        return ZooKeeperSettings.from_fields(
            host=self.secure_hosts if self.tls else self.hosts, extra=extra,
            login=self.auth.user if self.auth else None, password=self.auth.password if self.auth else None)

    def member_hosts(self, index: int) -> str:
        return _host(self.address, self.members[index].client_port)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> ZooKeeperEnsemble:
        """Start every member and wait until all of them serve."""
        for index in range(self.size):
            self._launch(index)
        self.wait_serving(timeout=timeout)
        if self.auth is not None:
            lock_root(self.client_settings())
        return self

    def wait_serving(self, indexes: Iterable[int] | None = None, timeout: float = 60.0) -> None:
        """Wait until the given members (all by default) serve requests."""
        wanted = list(range(self.size)) if indexes is None else list(indexes)
        deadline = time.monotonic() + timeout
        while True:
            pending = [i for i in wanted if self.members[i].mode() is None]
            if not pending:
                return
            for i in pending:
                member = self.members[i]
                if member.process is not None and member.process.poll() is not None:
                    raise ZooKeeperStartError(
                        f"ZooKeeper member {member.myid} exited with code {member.process.returncode}; "
                        f"log tail:\n{self.log_tail(i)}"
                    )
            if time.monotonic() > deadline:
                raise ZooKeeperStartError(
                    f"ZooKeeper members {[self.members[i].myid for i in pending]} did not serve within "
                    f"{timeout:g} s; log tail of member {self.members[pending[0]].myid}:\n{self.log_tail(pending[0])}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop every member (TERM, then KILL) and remove a temporary directory."""
        for index in range(self.size):
            self.kill(index, sig=signal.SIGTERM)
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def kill(self, index: int, *, sig: int = signal.SIGKILL) -> None:
        """Stop one member: SIGKILL by default (a crash), SIGTERM for a clean stop."""
        member = self.members[index]
        process = member.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(sig)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def restart(self, index: int, *, timeout: float = 60.0) -> None:
        """Start a stopped member again (same ports and data) and wait until it serves."""
        self.kill(index)
        self._launch(index)
        self.wait_serving([index], timeout=timeout)

    def leader(self) -> int | None:
        """Index of the member that is leader (or standalone), or None."""
        for index, member in enumerate(self.members):
            if member.running() and member.mode() in ("leader", "standalone"):
                return index
        return None

    def followers(self) -> list[int]:
        return [i for i, m in enumerate(self.members) if m.running() and m.mode() == "follower"]

    def identity(self, index: int) -> ProcessIdentity | None:
        """The running member's process identity (recorded to stop or adopt it safely later)."""
        process = self.members[index].process
        return identify(process.pid) if process is not None and process.poll() is None else None

    def log_tail(self, index: int, lines: int = 30) -> str:
        member = self.members[index]
        text = ""
        for path in (member.log_file, member.directory / "stdout.log"):
            if path.exists():
                text += path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> ZooKeeperEnsemble:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- internals ---------------------------------------------------------------------------

    def _write_config(self, member: _Member) -> None:
        data_dir = private_dir(member.directory / "data")
        lines = [
            f"tickTime={self.tick_time_ms}",
            "initLimit=20",
            "syncLimit=10",
            f"dataDir={data_dir}",
            *([f"clientPort={member.client_port}", f"clientPortAddress={member.address}"]
              if self.plaintext_port else []),
            "admin.enableServer=false",
            f"4lw.commands.whitelist={','.join(FOUR_LETTER_WORDS)}",
            f"maxSessionTimeout={120 * self.tick_time_ms}",
            "autopurge.purgeInterval=0",
            f"maxClientCnxns={self.max_client_connections}",
        ]
        if self.auth is not None:  # ZooKeeper sets unknown keys as "zookeeper."-prefixed system properties
            lines.append(f"DigestAuthenticationProvider.superDigest={self.auth.super_digest()}")
        if self.tls is not None:
            lines += [
                f"secureClientPort={member.secure_port}",
                f"secureClientPortAddress={member.address}",
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                f"ssl.keyStore.location={Path(self.tls.keystore).resolve()}",
                "ssl.keyStore.type=PEM",
                f"ssl.trustStore.location={Path(self.tls.truststore).resolve()}",
                "ssl.trustStore.type=PEM",
                f"ssl.clientAuth={self.tls.client_auth}",
                # Every local user connects from 127.0.0.1: the client certificate, not the address, says who.
                "ssl.clientHostnameVerification=false",
                f"netty.server.outstandingHandshake.limit={self.max_pending_handshakes}",  # a flood keeps fds
                f"clientPortListenBacklog={LISTEN_BACKLOG}",  # a flood's churn slowed by its dropped SYNs
            ]
        if self.size > 1:
            write_private(data_dir / "myid", f"{member.myid}\n")
            lines += [
                f"server.{m.myid}={_host(m.address, m.peer_port)}:{m.election_port}" for m in self.members
            ]
            if self.tls is not None:  # members speak mutual TLS to each other too: no other user votes or syncs
                lines += [
                    "sslQuorum=true",
                    f"ssl.quorum.keyStore.location={Path(self.tls.keystore).resolve()}",
                    "ssl.quorum.keyStore.type=PEM",
                    f"ssl.quorum.trustStore.location={Path(self.tls.truststore).resolve()}",
                    "ssl.quorum.trustStore.type=PEM",
                    "ssl.quorum.hostnameVerification=false",
                ]
        write_private(member.config_file, "\n".join(lines) + "\n")
        write_private(member.directory / "log4j2.properties", log4j_config(member.log_file, size=self.log_file_size))

    def _launch(self, index: int) -> None:
        member = self.members[index]
        private_dir(member.directory)
        tighten(member.directory)  # files of an earlier run, possibly from a version that left them 0644
        self._write_config(member)
        argv = [
            self.java,
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # faster start; a test server needs no C2 compiler
            "-Dzookeeper.admin.enableServer=false",
            f"-Dlog4j2.configurationFile={member.directory / 'log4j2.properties'}",
            *(self.auth.jvm_properties() if self.auth else []),
            "-cp",
            os.pathsep.join(str(j) for j in self.classpath),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(member.config_file),
        ]
        if self.die_with_parent:
            argv = [*launcher(), *argv]
        with open(open_private_log(member.directory / "stdout.log"), "ab") as out:
            member.process = subprocess.Popen(  # argv list, no shell; umask: the data it writes is 0600
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                umask=0o077, env=launch_environment(),  # its nonce: what a later stop checks it by
                cwd=member.directory,  # a folder of ours, never the caller's working folder
            )


class EmbeddedZooKeeper(ZooKeeperEnsemble):
    """One standalone ZooKeeper server on 127.0.0.1.

    ::

        with EmbeddedZooKeeper() as zk:
            client = KazooClient(hosts=zk.hosts)
    """

    def __init__(
        self,
        *,
        directory: str | Path | None = None,
        port: int | None = None,
        tick_time_ms: int = 500,
        java: str | None = None,
        jar_dirs: Iterable[Path | str] | None = None,
        heap_mb: int = 256,
        max_client_connections: int = 60,
        tls: ServerTls | None = None,
        secure_port: int | None = None,
        auth: ServerAuth | None = None,
        address: str = "127.0.0.1",
        die_with_parent: bool = False,
        plaintext_port: bool = True,
        max_pending_handshakes: int | None = None,
    ) -> None:
        super().__init__(
            1,
            directory=directory,
            client_ports=[port] if port else None,
            tick_time_ms=tick_time_ms,
            java=java,
            jar_dirs=jar_dirs,
            heap_mb=heap_mb,
            max_client_connections=max_client_connections,
            tls=tls,
            secure_ports=[secure_port] if secure_port else None,
            auth=auth,
            address=address,
            die_with_parent=die_with_parent,
            plaintext_port=plaintext_port,
            max_pending_handshakes=max_pending_handshakes,
        )

    @property
    def port(self) -> int:
        return self.members[0].client_port

    @property
    def secure_port(self) -> int | None:
        return self.members[0].secure_port

    @property
    def pid(self) -> int | None:
        process = self.members[0].process
        return process.pid if process is not None else None

    def serving(self) -> bool:
        return self.members[0].mode() is not None

