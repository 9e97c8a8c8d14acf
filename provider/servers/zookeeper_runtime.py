"""What the embedded ZooKeeper runs on: the local ``java``, a set of ZooKeeper jars already on the
machine, a free loopback port, and the four-letter admin words it answers.

Jars are looked for, in this order: ``$ZOOKEEPER_HOME`` (``lib/`` or the folder itself), the pyspark
wheel's ``jars/`` folder (pyspark 4.x ships ZooKeeper 3.9), Debian's ``zookeeper`` package. The server
needs snappy-java on its class path: without it the port listens but every client is told "not
currently serving requests".
"""

from __future__ import annotations

import importlib.util
import os
import resource
import shutil
import socket
from collections.abc import Iterable
from pathlib import Path

from airflow_epochs.connection.probe import four_letter_word

__all__ = [
    "FOUR_LETTER_WORDS",
    "LISTEN_BACKLOG",
    "JavaNotFound",
    "ZooKeeperError",
    "ZooKeeperJarsNotFound",
    "ZooKeeperStartError",
    "candidate_jar_dirs",
    "find_java",
    "find_zookeeper_jars",
    "four_letter_word",
    "free_port",
    "log4j_config",
    "pending_handshake_limit",
]

# Jars the server needs, by file-name prefix. netty is for the client port's TLS option; the
# log4j trio makes the server's own log (and startup errors) readable.
_REQUIRED = ("zookeeper-jute", "zookeeper", "snappy-java", "slf4j-api")
_OPTIONAL = (
    "netty-buffer", "netty-codec-4", "netty-codec-base", "netty-common", "netty-handler-4", "netty-resolver-4",
    "netty-transport-4", "netty-transport-classes-epoll", "netty-transport-native-unix-common",
    "log4j-slf4j2-impl", "log4j-api", "log4j-core", "commons-io", "metrics-core", "audience-annotations",
    "commons-cli", "jline",
)
# Only the words this project uses: srvr (mode, version), mntr (metrics in tests and benchmarks).
FOUR_LETTER_WORDS = ("srvr", "mntr")
_DEBIAN_DIRS = ("/usr/share/zookeeper/lib", "/usr/share/zookeeper", "/usr/share/java")


# Heap one pending TLS handshake holds on the server (its Netty channel, buffers and SSLEngine): about 10 KB,
# measured after a full collection with 12,000 idle sockets held (2026-12, ZooKeeper 3.9.5, Netty 4.2).
HANDSHAKE_HEAP_BYTES = 10 * 1024
_FALLBACK_DESCRIPTORS = 1 << 20  # fs.nr_open's default: the kernel's cap on an unlimited hard limit
# Connections the kernel queues for the TLS port before the server accepts them (``clientPortListenBacklog``;
# the kernel's somaxconn, 4,096 here, by default). Under a flood of idle sockets, every one the server closes
# at the handshake limit is opened again at once: with a long queue the server spends its CPU accepting and
# closing them (at a load average of 10, new clients of ours then timed out and a held session expired);
# with a short one the kernel drops their SYNs, each retried a second or more later, which slows the
# flood's churn to what the server keeps up with (new clients in 0.2 to 7 s at the same load). Our clients
# retry their connection too, at most a second apart; a burst of more connections than this at once waits a
# SYN retry (1 s) for some of them.
LISTEN_BACKLOG = 64


def pending_handshake_limit(heap_mb: int) -> int:
    """How many TLS handshakes a server started from here lets be pending at once (ZooKeeper's
    ``zookeeper.netty.server.outstandingHandshake.limit``: it closes every connection beyond it at once):
    three quarters of the file descriptors its JVM may hold (the JVM raises its soft limit to our hard
    one) and no more than 60 % of its heap holds, so that a flood of idle sockets from another local user
    never uses up the descriptors (without a limit, 20,000 of them did: the server then accepted
    nothing, our established sessions expired and no new one started) nor the heap. A lower limit keeps
    more descriptors free but lets fewer handshakes through: at 8,192 against 20,000 sockets new clients
    of ours took up to 34 s, at 15,000 up to 12 s."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    descriptors = _FALLBACK_DESCRIPTORS if hard == resource.RLIM_INFINITY else hard
    return max(64, min(descriptors * 3 // 4, heap_mb * (1 << 20) * 6 // 10 // HANDSHAKE_HEAP_BYTES))


class ZooKeeperError(RuntimeError):
    """Base class of the embedded server's errors."""


class JavaNotFound(ZooKeeperError):
    """No ``java`` executable was found."""


class ZooKeeperJarsNotFound(ZooKeeperError):
    """No folder with a usable set of ZooKeeper jars was found."""


class ZooKeeperStartError(ZooKeeperError):
    """The server process exited or did not start serving in time."""


def find_java(java: str | None = None) -> str:
    """The ``java`` to run: ``java`` if given, else ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    candidates: list[str] = []
    if java:
        candidates.append(java)
    else:
        if os.environ.get("JAVA_HOME"):
            candidates.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
        found = shutil.which("java")
        if found:
            candidates.append(found)
    for candidate in candidates:
        path = shutil.which(candidate) if os.sep not in candidate else candidate
        if path and os.access(path, os.X_OK):
            return path
    raise JavaNotFound(
        f"no Java runtime found (tried {candidates or ['$JAVA_HOME/bin/java', 'java on PATH']}); "
        "install Java 17, e.g. 'apt-get install -y openjdk-17-jre-headless', or set JAVA_HOME"
    )


def _pyspark_jar_dir() -> Path | None:
    spec = importlib.util.find_spec("pyspark")  # locate without importing pyspark (slow)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "jars"


def candidate_jar_dirs() -> list[Path]:
    """Folders searched for ZooKeeper jars, most preferred first."""
    dirs: list[Path] = []
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        dirs += [Path(home) / "lib", Path(home)]
    pyspark = _pyspark_jar_dir()
    if pyspark is not None:
        dirs.append(pyspark)
    dirs += [Path(d) for d in _DEBIAN_DIRS]
    return dirs


def find_zookeeper_jars(search: Iterable[Path | str] | None = None) -> list[Path]:
    """The class path for the server: the first folder holding every required jar wins.

    :param search: folders to look in instead of :func:`candidate_jar_dirs`.
    """
    folders = [Path(d) for d in (search if search is not None else candidate_jar_dirs())]
    problems: list[str] = []
    for folder in folders:
        if not folder.is_dir():
            continue
        jars = sorted(p for p in folder.iterdir() if p.suffix == ".jar")
        chosen: list[Path] = []
        missing: list[str] = []
        for prefix in _REQUIRED:
            hits = [j for j in jars if _matches(j.name, prefix)]
            if hits:
                chosen += hits
            else:
                missing.append(prefix)
        if missing:
            problems.append(f"{folder}: missing {', '.join(missing)}")
            continue
        for prefix in _OPTIONAL:
            chosen += [j for j in jars if _matches(j.name, prefix)]
        return list(dict.fromkeys(chosen))
    detail = "; ".join(problems) if problems else "none of the folders exist"
    raise ZooKeeperJarsNotFound(
        f"no ZooKeeper jars found in {[str(f) for f in folders]} ({detail}). Install pyspark 4.x (its jars "
        "include ZooKeeper), set ZOOKEEPER_HOME, or 'apt-get install -y zookeeper'"
    )


def _matches(name: str, prefix: str) -> bool:
    if prefix == "zookeeper":  # the server jar itself, not zookeeper-jute or zookeeper-prometheus...
        return name == "zookeeper.jar" or (name.startswith("zookeeper-") and name[10:11].isdigit())
    return name.startswith(prefix)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# The server's log rotates: refused connections (another user's flood) each log a line or a stack trace,
# which once grew an unrotated log by 90 MB a minute. At most LOG_FILES files of LOG_FILE_SIZE each.
LOG_FILE_SIZE = "10MB"
LOG_FILES = 3


def log4j_config(log_file: Path, *, size: str = LOG_FILE_SIZE, files: int = LOG_FILES) -> str:
    """The server's log4j2 configuration (the pyspark wheel carries log4j2): ``log_file``, rolled over at
    ``size`` into ``log_file.1`` .. ``log_file.<files - 1>``, the oldest deleted."""
    return (
        "status = error\n"
        "appender.file.type = RollingFile\n"
        "appender.file.name = F\n"
        f"appender.file.fileName = {log_file}\n"
        f"appender.file.filePattern = {log_file}.%i\n"
        "appender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = %d{ISO8601} %-5p [%t] %c{1} - %m%n\n"
        "appender.file.policies.type = Policies\n"
        "appender.file.policies.size.type = SizeBasedTriggeringPolicy\n"
        f"appender.file.policies.size.size = {size}\n"
        "appender.file.strategy.type = DefaultRolloverStrategy\n"
        f"appender.file.strategy.max = {files - 1}\n"
        "appender.file.strategy.fileIndex = min\n"
        "rootLogger.level = info\n"
        "rootLogger.appenderRef.f.ref = F\n"
    )
