"""What a ``spark-submit`` of an epoch job may be given: allow-lists per setting, and the master modes.

Code reaches a job only through arguments the DAG author writes: ``application``, ``py_files``,
``files``, ``archives`` and ``jars``, which must be local files under an allowed root (Airflow's DAGs
folder, plus ``[epochs] extra_allowed_code_roots``): never a URL another host serves. Every
``conf`` key and ``env_vars`` name passes only if it is on an explicit allow-list: tuning settings
(:data:`CONF_ALLOWED`, :data:`ENV_ALLOWED`, names under :data:`ENV_JOB_PREFIX`) and the names a
deployment admin adds in Airflow's configuration (``[epochs] extra_allowed_conf`` and
``extra_allowed_env_vars``, comma-separated). Whatever the lists say, a name that loads a class, a
library or a file, or redirects traffic (``OPENSSL_CONF``, ``AWS_CONFIG_FILE``, ``SSL_CERT_FILE``,
``HTTPS_PROXY``, ``spark.io.compression.codec``, ``spark.sql.cache.serializer``...) is never
accepted (:data:`CONF_NEVER_WORDS`, :data:`ENV_NEVER_WORDS`).

Master modes: ``local``, standalone ``spark://`` in client mode, YARN (client and cluster) and
Kubernetes (with the cncf.kubernetes provider installed) are accepted; standalone cluster mode is
refused up front, since Spark does not run Python applications in cluster mode on a standalone
master, and so is Mesos (gone from Spark 4) and anything else. Pure logic; the admin's additions are
read from Airflow's configuration when Airflow is there (or from ``AIRFLOW__EPOCHS__...``).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_epochs.coordination.base.errors import InvalidInput

SUBMIT_OPTIONS = frozenset({
    "conf", "py_files", "files", "archives", "jars", "driver_memory", "executor_memory", "executor_cores",
    "total_executor_cores", "num_executors", "deploy_mode", "yarn_queue", "principal", "keytab",
    "proxy_user", "status_poll_interval", "env_vars",
})

# Spark settings a job may tune: sizes, counts, timeouts and switches, each taking a number, a size or a
# boolean (never a class, a path or a URL that Spark would load).
CONF_ALLOWED = frozenset({
    "spark.driver.memory", "spark.driver.memoryOverhead", "spark.driver.cores", "spark.driver.maxResultSize",
    "spark.executor.memory", "spark.executor.memoryOverhead", "spark.executor.cores", "spark.executor.instances",
    "spark.executor.heartbeatInterval", "spark.cores.max", "spark.default.parallelism", "spark.task.cpus",
    "spark.task.maxFailures", "spark.dynamicAllocation.enabled", "spark.dynamicAllocation.minExecutors",
    "spark.dynamicAllocation.maxExecutors", "spark.dynamicAllocation.initialExecutors",
    "spark.dynamicAllocation.executorIdleTimeout", "spark.dynamicAllocation.schedulerBacklogTimeout",
    "spark.dynamicAllocation.shuffleTracking.enabled", "spark.memory.fraction", "spark.memory.storageFraction",
    "spark.memory.offHeap.enabled", "spark.memory.offHeap.size", "spark.shuffle.compress",
    "spark.shuffle.spill.compress", "spark.shuffle.file.buffer", "spark.speculation", "spark.speculation.multiplier",
    "spark.speculation.quantile", "spark.locality.wait", "spark.network.timeout", "spark.sql.shuffle.partitions",
    "spark.sql.adaptive.enabled", "spark.sql.adaptive.coalescePartitions.enabled",
    "spark.sql.adaptive.skewJoin.enabled", "spark.sql.autoBroadcastJoinThreshold", "spark.sql.broadcastTimeout",
    "spark.sql.files.maxPartitionBytes", "spark.sql.files.maxRecordsPerFile", "spark.sql.session.timeZone",
    "spark.sql.ansi.enabled", "spark.sql.sources.partitionOverwriteMode", "spark.ui.enabled",
    "spark.ui.showConsoleProgress", "spark.eventLog.enabled", "spark.rdd.compress", "spark.broadcast.compress",
    "spark.hadoop.fs.s3a.endpoint", "spark.hadoop.fs.s3a.connection.maximum",
    "spark.hadoop.fs.s3a.fast.upload", "spark.kubernetes.namespace", "spark.kubernetes.driver.request.cores",
    "spark.kubernetes.executor.request.cores", "spark.kubernetes.executor.limit.cores", "spark.yarn.am.memory",
    "spark.yarn.am.cores", "spark.yarn.maxAppAttempts",
})
# Words that, anywhere in a key, mean it loads code, a class, a library or a file, or holds an environment:
# refused even if an admin lists the key.
CONF_NEVER_WORDS = (
    "class", "jar", "extension", "listener", "plugin", "javaoptions", "librarypath", "python", "command",
    "script", "provider", "factory", "catalog", "metastore", "impl", "manager", "env", "filter", "redaction",
    "codec", "serializer", "signer", "loader", "agent", "keystore", "truststore", "credential", "proxy",
    "master", "submit", "dir", "path",
)
# Environment variables a job may set: time zone, locale and thread counts of numeric libraries.
ENV_ALLOWED = frozenset({
    "TZ", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "LC_MONETARY",
    "LC_MESSAGES", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
})
# The job's own settings: no library reads names under this prefix.
ENV_JOB_PREFIX = "EPOCHS_JOB_"
# Fragments of names that load libraries, configuration, certificates or code, or redirect traffic:
# refused even if an admin lists the name.
ENV_NEVER_WORDS = (
    "PATH", "HOME", "FILE", "CONF", "DIR", "PROXY", "OPT", "LIB", "PRELOAD", "SSL", "CERT", "TLS", "CA_BUNDLE",
    "KRB5", "MASTER", "PYTHON", "JAVA", "SPARK", "HADOOP", "YARN", "AWS", "GOOGLE", "AZURE", "BASH", "SHELL",
    "PERL", "RUBY", "NODE", "GCONV", "LOCPATH", "NLSPATH", "HOSTALIASES", "RES_OPTIONS", "LOCALDOMAIN", "TMP",
    "TEMP", "PLUGIN", "MODULE", "LOADER", "AGENT",
)
_ENV_NEVER_PREFIXES = ("LD_", "DYLD_", "_", "BASH_FUNC_")
_ENV_NEVER_EXACT = frozenset({"ENV", "IFS", "PS4", "PROMPT_COMMAND", "CLASSPATH", "MAIL", "USER", "LOGNAME"})

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_MEMORY = re.compile(r"[1-9][0-9]{0,6}[kmgtKMGT]?")
_NAME = re.compile(r"[A-Za-z0-9_.@/\-]{1,256}")
CODE_OPTIONS = ("py_files", "files", "archives", "jars")


def _text(what: str, value: object, *, allow_comma: bool = True) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"submit_options {what} must be a non-empty string, not {value!r}")
    if any(not ch.isprintable() for ch in value) or (not allow_comma and "," in value):
        raise InvalidInput(f"submit_options {what} {value!r} holds control characters"
                           + ("" if allow_comma else " or a ','"))
    return value


def _deployment_setting(option: str) -> str:
    """``[epochs] <option>`` from Airflow's configuration (or ``AIRFLOW__EPOCHS__<OPTION>`` without Airflow)."""
    try:
        from airflow.configuration import conf  # lazily: this module is pure logic elsewhere
    except ImportError:
        return os.environ.get(f"AIRFLOW__EPOCHS__{option.upper()}", "")
    return str(conf.get("epochs", option, fallback="") or "")


def _listed(option: str) -> frozenset[str]:
    return frozenset(part.strip() for part in _deployment_setting(option).split(",") if part.strip())


def check_conf_key(key: object, *, extra: Iterable[str] | None = None) -> str:
    """Return ``key`` if a job may set it (:data:`CONF_ALLOWED` or an admin's ``[epochs] extra_allowed_conf``,
    and no word of :data:`CONF_NEVER_WORDS`), else raise :class:`InvalidInput` naming it."""
    if not isinstance(key, str) or not re.fullmatch(r"spark\.[A-Za-z0-9_.\-]{1,200}", key):
        raise InvalidInput(f"submit_options conf key {key!r} is not a Spark setting (spark.*)")
    lowered = key.lower()
    never = [word for word in CONF_NEVER_WORDS if word in lowered]
    if never:
        raise InvalidInput(f"submit_options conf key {key!r} is refused: it names {never[0]!r} (code, classes, "
                           "libraries, files, interpreters, JVM options and environments are not configurable here)")
    admin = _listed("extra_allowed_conf") if extra is None else frozenset(extra)
    if key not in CONF_ALLOWED and key not in admin:
        raise InvalidInput(f"submit_options conf key {key!r} is not on the allow-list (tuning settings such as "
                           "spark.sql.shuffle.partitions; an admin adds more in [epochs] extra_allowed_conf)")
    return key


def check_env_name(name: object, *, extra: Iterable[str] | None = None) -> str:
    """Return ``name`` if a job's environment may set it (:data:`ENV_ALLOWED`, ``EPOCHS_JOB_*`` or an admin's
    ``[epochs] extra_allowed_env_vars``, and nothing that loads code or files), else raise :class:`InvalidInput`."""
    if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
        raise InvalidInput(f"submit_options env_vars name {name!r} is not an environment variable name")
    upper = name.upper()
    if name not in ENV_ALLOWED and (upper in _ENV_NEVER_EXACT or upper.startswith(_ENV_NEVER_PREFIXES)
                                    or any(word in upper for word in ENV_NEVER_WORDS)):
        raise InvalidInput(f"submit_options env_vars {name!r} is refused: it changes which binaries, interpreters, "
                           "libraries, configuration files or proxies are used")
    admin = _listed("extra_allowed_env_vars") if extra is None else frozenset(extra)
    if name not in ENV_ALLOWED and not name.startswith(ENV_JOB_PREFIX) and name not in admin:
        allowed = ", ".join(sorted(ENV_ALLOWED))
        raise InvalidInput(f"submit_options env_vars {name!r} is not on the allow-list ({allowed}, {ENV_JOB_PREFIX}*; "
                           "an admin adds more in [epochs] extra_allowed_env_vars)")
    return name


def code_roots() -> list[str]:
    """Folders code files may come from: Airflow's DAGs folder and ``[epochs] extra_allowed_code_roots``."""
    roots = [posixpath.normpath(os.path.abspath(os.path.expanduser(r))) for r in _listed("extra_allowed_code_roots")]
    try:
        from airflow.configuration import conf
    except ImportError:
        return roots
    dags = conf.get("core", "dags_folder", fallback="")
    return [posixpath.normpath(os.path.abspath(os.path.expanduser(dags))), *roots] if dags else roots


def check_code_path(what: str, path: str, roots: Sequence[str] | None = None) -> str:
    """``path`` if it is a local file path under an allowed root (:func:`code_roots`), else :class:`InvalidInput`."""
    if re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:", path) and not path.startswith("/"):
        raise InvalidInput(f"submit_options {what} {path!r} is a URL: code files must be local paths under an "
                           "allowed root")
    if not path.startswith("/") or ".." in path.split("/"):
        raise InvalidInput(f"submit_options {what} {path!r} must be an absolute local path without '..'")
    normal = posixpath.normpath(path)
    allowed = code_roots() if roots is None else [posixpath.normpath(r) for r in roots]
    if not any(normal == root or normal.startswith(root.rstrip("/") + "/") for root in allowed):
        shown = ", ".join(allowed) or "none"
        raise InvalidInput(f"submit_options {what} {path!r} is not under an allowed root ({shown}; an admin adds "
                           "roots in [epochs] extra_allowed_code_roots)")
    return normal


def _positive(what: str, value: object, top: int = 100_000) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdigit() \
            or not 0 < int(value) <= top:
        raise InvalidInput(f"submit_options {what} must be an integer from 1 to {top}, not {value!r}")
    return int(value)


def _file_list(what: str, value: object) -> str:
    items: Sequence[object] = value.split(",") if isinstance(value, str) else value \
        if isinstance(value, (list, tuple)) else [value]
    if not items:
        raise InvalidInput(f"submit_options {what} is empty")
    checked = [_text(what, item, allow_comma=False) for item in items]
    return ",".join(check_code_path(what, item) for item in checked)


def validate_submit_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The options, checked key by key (and normalised: file lists joined with ','); raises
    :class:`InvalidInput` naming the first bad key or value."""
    out: dict[str, Any] = {}
    for key, value in (options or {}).items():
        if key not in SUBMIT_OPTIONS:
            raise InvalidInput(f"submit_options {key!r} is not accepted (allowed: {sorted(SUBMIT_OPTIONS)})")
        if key == "conf":
            if not isinstance(value, Mapping):
                raise InvalidInput(f"submit_options conf must be a mapping, not {type(value).__name__}")
            out[key] = {check_conf_key(k): _text(f"conf {k}", str(v)) for k, v in value.items()}
        elif key == "env_vars":
            if not isinstance(value, Mapping):
                raise InvalidInput(f"submit_options env_vars must be a mapping, not {type(value).__name__}")
            out[key] = {check_env_name(k): _text(f"env_vars {k}", str(v)) for k, v in value.items()}
        elif key in CODE_OPTIONS:
            out[key] = _file_list(key, value)
        elif key in ("driver_memory", "executor_memory"):
            if not isinstance(value, str) or not _MEMORY.fullmatch(value):
                raise InvalidInput(f"submit_options {key} must look like 512m or 2g, not {value!r}")
            out[key] = value
        elif key in ("executor_cores", "total_executor_cores", "num_executors", "status_poll_interval"):
            out[key] = _positive(key, value)
        elif key == "deploy_mode":
            if value not in ("client", "cluster"):
                raise InvalidInput(f"submit_options deploy_mode must be client or cluster, not {value!r}")
            out[key] = value
        elif key in ("yarn_queue", "proxy_user", "principal"):
            if not isinstance(value, str) or not _NAME.fullmatch(value):
                raise InvalidInput(f"submit_options {key} {value!r} is not a plain name")
            out[key] = value
        else:  # keytab: a path
            out[key] = _text(key, value, allow_comma=False)
    return out


def spark_master(conn_type: str | None, host: str | None, port: int | None) -> str:
    """The master URL a Spark connection stands for, as the Spark provider's ``SparkSubmitHook`` reads it."""
    whole_url = conn_type == "spark" and bool(host) and ("://" in (host or "") or not port)
    master = (host or "") if whole_url else f"{conn_type}://{host or ''}"
    return f"{master}:{port}" if port else master


def check_master(master: str, deploy_mode: str | None, *, kubernetes_available: bool) -> str:
    """The mode of a master (``local``, ``standalone``, ``yarn``, ``kubernetes``), or :class:`InvalidInput`
    when the project cannot run an epoch job there (said before anything is submitted)."""
    cluster = deploy_mode == "cluster"
    if re.fullmatch(r"local(\[(\*|[1-9][0-9]{0,3})(,[0-9]{1,3})?\])?", master):
        if cluster:
            raise InvalidInput(f"master {master!r} runs in client mode only, not deploy_mode 'cluster'")
        return "local"
    if master.startswith("spark://"):
        if cluster:
            raise InvalidInput(f"master {master!r}: Spark does not run Python applications in cluster mode on a "
                               "standalone master; use client mode (the default: the driver runs on the Airflow "
                               "worker, the executors on the cluster)")
        return "standalone"
    if master == "yarn" or master.startswith("yarn://"):
        return "yarn"
    if master.startswith("k8s://"):
        if not kubernetes_available:
            raise InvalidInput(f"master {master!r} needs the apache-airflow-providers-cncf-kubernetes package "
                               "(the Spark provider tracks Kubernetes drivers through it)")
        return "kubernetes"
    raise InvalidInput(f"master {master!r} is not supported: use local[*], spark://host:port, yarn or "
                       "k8s://https://host:port")
