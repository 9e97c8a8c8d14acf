"""What a ``spark-submit`` of an epoch job may be given: an allow-list per setting, and the master modes.

Code reaches a job only through arguments the DAG author writes: ``application``, ``py_files`` and
``jars``. No setting may point Spark at other binaries, class paths, interpreters, JVM options or
listener classes, and no environment variable may change what runs (``PATH``, ``PYTHONPATH``,
``LD_*``...): a ``PATH`` override once ran a fake ``spark-submit``. Pure logic, no Airflow import.

``conf`` keys must belong to a tuning family (:data:`CONF_FAMILIES`) and must not name a class,
a path to code or an environment (:data:`CONF_DENIED_WORDS`, which wins). Master modes: ``local``,
standalone ``spark://`` in client mode, YARN (client and cluster) and Kubernetes (with the
cncf.kubernetes provider installed) are accepted; standalone cluster mode is refused up front, since
Spark does not run Python applications in cluster mode on a standalone master, and so is Mesos
(gone from Spark 4) and anything else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_epochs.coordination.errors import InvalidInput

SUBMIT_OPTIONS = frozenset({
    "conf", "py_files", "files", "archives", "jars", "driver_memory", "executor_memory", "executor_cores",
    "total_executor_cores", "num_executors", "deploy_mode", "yarn_queue", "principal", "keytab",
    "proxy_user", "status_poll_interval", "env_vars",
})

# Families of Spark settings that tune resources and behaviour (a key equals an entry or extends it with '.').
CONF_FAMILIES = (
    "spark.driver.memory", "spark.driver.memoryOverhead", "spark.driver.cores", "spark.driver.maxResultSize",
    "spark.executor.memory", "spark.executor.memoryOverhead", "spark.executor.cores", "spark.executor.instances",
    "spark.executor.heartbeatInterval", "spark.cores.max", "spark.default.parallelism", "spark.task.cpus",
    "spark.task.maxFailures", "spark.dynamicAllocation", "spark.memory", "spark.shuffle", "spark.speculation",
    "spark.locality.wait", "spark.network.timeout", "spark.sql", "spark.ui", "spark.eventLog.enabled",
    "spark.rdd.compress", "spark.io.compression", "spark.broadcast", "spark.storage", "spark.kryoserializer.buffer",
    "spark.hadoop.fs", "spark.kubernetes.namespace", "spark.kubernetes.driver.request.cores",
    "spark.kubernetes.executor.request.cores", "spark.kubernetes.executor.limit.cores", "spark.yarn.am.memory",
    "spark.yarn.am.cores", "spark.yarn.maxAppAttempts",
)
# Words that, anywhere in a key, mean it names code, a class, an interpreter, JVM options or an environment.
CONF_DENIED_WORDS = (
    "class", "jar", "extension", "listener", "plugin", "javaoptions", "librarypath", "python", "command",
    "script", "provider", "factory", "catalog", "metastore", "impl", "manager", "env", "filter", "redaction",
)
# Environment variables that change which binaries, interpreters, libraries or JVM options run.
ENV_DENIED = frozenset({
    "PATH", "CLASSPATH", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "IFS", "PS4", "PROMPT_COMMAND", "PERL5OPT",
    "PERL5LIB", "RUBYOPT", "NODE_OPTIONS", "GCONV_PATH", "HOME",
})
ENV_DENIED_PREFIXES = ("LD_", "DYLD_", "PYTHON", "PYSPARK_", "JAVA", "_JAVA", "JDK_", "SPARK_", "HADOOP_", "YARN_",
                       "BASH_FUNC_")

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_MEMORY = re.compile(r"[1-9][0-9]{0,6}[kmgtKMGT]?")
_NAME = re.compile(r"[A-Za-z0-9_.@/\-]{1,256}")


def _text(what: str, value: object, *, allow_comma: bool = True) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"submit_options {what} must be a non-empty string, not {value!r}")
    if any(not ch.isprintable() for ch in value) or (not allow_comma and "," in value):
        raise InvalidInput(f"submit_options {what} {value!r} holds control characters"
                           + ("" if allow_comma else " or a ','"))
    return value


def check_conf_key(key: object) -> str:
    """Return ``key`` if a job may set it, else raise :class:`InvalidInput` naming it."""
    if not isinstance(key, str) or not re.fullmatch(r"spark\.[A-Za-z0-9_.\-]{1,200}", key):
        raise InvalidInput(f"submit_options conf key {key!r} is not a Spark setting (spark.*)")
    lowered = key.lower()
    denied = [word for word in CONF_DENIED_WORDS if word in lowered]
    if denied:
        raise InvalidInput(f"submit_options conf key {key!r} is refused: it names {denied[0]!r} (code, classes, "
                           "interpreters, JVM options and environments are not configurable here)")
    if not any(key == family or key.startswith(family + ".") for family in CONF_FAMILIES):
        raise InvalidInput(f"submit_options conf key {key!r} is not in an allowed family; allowed: "
                           f"{', '.join(CONF_FAMILIES)}")
    return key


def check_env_name(name: object) -> str:
    """Return ``name`` if a job's environment may set it, else raise :class:`InvalidInput` naming it."""
    if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
        raise InvalidInput(f"submit_options env_vars name {name!r} is not an environment variable name")
    upper = name.upper()
    if upper in ENV_DENIED or upper.startswith(ENV_DENIED_PREFIXES):
        raise InvalidInput(f"submit_options env_vars {name!r} is refused: it changes which binaries, interpreters, "
                           "libraries or JVM options run")
    return name


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
    return ",".join(_text(what, item, allow_comma=False) for item in items)


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
        elif key in ("py_files", "files", "archives", "jars"):
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
