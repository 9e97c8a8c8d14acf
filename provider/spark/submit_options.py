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
accepted (:data:`CONF_NEVER_WORDS`, :data:`ENV_NEVER_WORDS`). Values are held to a shape too: each
listed setting to its own (:data:`CONF_SHAPES`, :data:`ENV_SHAPES`: a size, a count, a zone or locale
name, never a path), an admin-listed one to a plain scalar (:data:`ADMIN_CONF_SHAPE`: no dotted class
name, path or URL, so even an admin's list cannot make a setting load a class). An admin-listed name
takes a value, never a name: a number, size, duration or boolean (:data:`ADMIN_VALUE_SHAPE`), or one of
the words the admin lists with it (``NAME=fast|slow``), since any other word may be taken by a library
as the name of a class, a program or a host (``LOG4J_CONTEXT_SELECTOR=Evil``, ``GIT_SSH_COMMAND=evil``).
A ``keytab`` comes only from a folder an admin names in ``[epochs] allowed_keytab_roots`` (none by default).

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

# The shape a value must have: a setting holds a number, a size, a boolean, a duration or one of a few
# words, never a class, a path or a URL (``|``-separated words are the only ones accepted).
_SIZE = r"-?[0-9]{1,12}[kmgtpKMGTP]?[bB]?"
_INT = r"[0-9]{1,9}"
_FLOAT = r"[0-9]{1,6}(\.[0-9]{1,6})?"
_BOOL = r"true|false|TRUE|FALSE|True|False"
_DURATION = r"[0-9]{1,9}(ms|s|m|min|h|d)?"
_TIME_ZONE = r"UTC|GMT|Z|[+-][0-9]{2}:[0-9]{2}|[A-Z][A-Za-z_+-]{1,30}(/[A-Z][A-Za-z0-9_+-]{0,30}){1,2}"
_K8S_CPU = r"[0-9]{1,4}(\.[0-9]{1,3}|m)?"
_DNS_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
#: Each allowed Spark setting and the regular expression its whole value must match.
CONF_SHAPES: dict[str, str] = {
    **dict.fromkeys(("spark.driver.memory", "spark.driver.memoryOverhead", "spark.driver.maxResultSize",
                     "spark.executor.memory", "spark.executor.memoryOverhead", "spark.memory.offHeap.size",
                     "spark.shuffle.file.buffer", "spark.sql.autoBroadcastJoinThreshold",
                     "spark.sql.files.maxPartitionBytes", "spark.yarn.am.memory"), _SIZE),
    **dict.fromkeys(("spark.driver.cores", "spark.executor.cores", "spark.executor.instances", "spark.cores.max",
                     "spark.default.parallelism", "spark.task.cpus", "spark.task.maxFailures",
                     "spark.dynamicAllocation.minExecutors", "spark.dynamicAllocation.maxExecutors",
                     "spark.dynamicAllocation.initialExecutors", "spark.sql.shuffle.partitions",
                     "spark.sql.files.maxRecordsPerFile", "spark.hadoop.fs.s3a.connection.maximum",
                     "spark.yarn.am.cores", "spark.yarn.maxAppAttempts"), _INT),
    **dict.fromkeys(("spark.memory.fraction", "spark.memory.storageFraction", "spark.speculation.multiplier",
                     "spark.speculation.quantile"), _FLOAT),
    **dict.fromkeys(("spark.dynamicAllocation.enabled", "spark.dynamicAllocation.shuffleTracking.enabled",
                     "spark.memory.offHeap.enabled", "spark.shuffle.compress", "spark.shuffle.spill.compress",
                     "spark.speculation", "spark.sql.adaptive.enabled",
                     "spark.sql.adaptive.coalescePartitions.enabled", "spark.sql.adaptive.skewJoin.enabled",
                     "spark.sql.ansi.enabled", "spark.ui.enabled", "spark.ui.showConsoleProgress",
                     "spark.eventLog.enabled", "spark.rdd.compress", "spark.broadcast.compress",
                     "spark.hadoop.fs.s3a.fast.upload"), _BOOL),
    **dict.fromkeys(("spark.executor.heartbeatInterval", "spark.dynamicAllocation.executorIdleTimeout",
                     "spark.dynamicAllocation.schedulerBacklogTimeout", "spark.locality.wait",
                     "spark.network.timeout", "spark.sql.broadcastTimeout"), _DURATION),
    **dict.fromkeys(("spark.kubernetes.driver.request.cores", "spark.kubernetes.executor.request.cores",
                     "spark.kubernetes.executor.limit.cores"), _K8S_CPU),
    "spark.sql.session.timeZone": _TIME_ZONE,
    "spark.sql.sources.partitionOverwriteMode": "static|dynamic|STATIC|DYNAMIC",
    "spark.kubernetes.namespace": _DNS_LABEL,
}
# Spark settings a job may tune: sizes, counts, timeouts and switches (never a class, a path or a URL that
# Spark would load or connect to: ``spark.hadoop.fs.s3a.endpoint`` redirected S3 traffic, so it left).
CONF_ALLOWED = frozenset(CONF_SHAPES)
#: What a setting or variable an admin lists by name alone may hold: a number, size, duration or boolean.
#: Never a word: a library may take any word as the name of a class (``LOG4J_CONTEXT_SELECTOR=Evil``,
#: ``spark.sql.sources.default=evil``), a program on the PATH (``GIT_SSH_COMMAND=evil``) or a host; an
#: admin who means words lists them with the name (``NAME=fast|slow``, see :func:`admin_allowed`).
ADMIN_VALUE_SHAPE = rf"{_SIZE}|{_FLOAT}|{_DURATION}|{_BOOL}"
#: What an admin-listed Spark setting listed alone holds: :data:`ADMIN_VALUE_SHAPE`.
ADMIN_CONF_SHAPE = ADMIN_VALUE_SHAPE
#: A word an admin lists for a name (``NAME=word|word``): letters, digits, ``_``, ``+`` and ``-``; no dot,
#: slash or colon, so not even the admin's list holds a dotted class name, a path or a URL.
LISTED_VALUE_SHAPE = r"[A-Za-z0-9_+-]{1,64}"
# Words that, anywhere in a key, mean it loads code, a class, a library or a file, or holds an environment:
# refused even if an admin lists the key.
CONF_NEVER_WORDS = (
    "class", "jar", "extension", "listener", "plugin", "javaoptions", "librarypath", "python", "command",
    "script", "provider", "factory", "catalog", "metastore", "impl", "manager", "env", "filter", "redaction",
    "codec", "serializer", "signer", "loader", "agent", "keystore", "truststore", "credential", "proxy",
    "master", "submit", "dir", "path", "registrator", "endpoint", "url", "uri", "host", "address", "keytab",
    "principal", "secret", "token", "selector", "server", "socks", "program",
)
# Environment variables a job may set, with the shape of their values: a time zone name (never a path
# or ':file', which would load any file as zone data), a locale name (never a path, which glibc would
# load locale data from), a thread count.
_LOCALE = r"C|POSIX|[a-z]{2,3}(_[A-Z]{2})?(\.[A-Za-z0-9-]{1,16})?(@[a-z]{1,16})?|C\.(UTF-8|utf8)"
#: Each allowed environment variable and the regular expression its whole value must match.
ENV_SHAPES: dict[str, str] = {
    "TZ": _TIME_ZONE + r"|[A-Z]{3,5}[+-]?[0-9]{1,2}([A-Z]{3,5})?",
    "LANGUAGE": rf"({_LOCALE})(:({_LOCALE})){{0,15}}",
    **dict.fromkeys(("LANG", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "LC_MONETARY",
                     "LC_MESSAGES"), _LOCALE),
    **dict.fromkeys(("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"),
                    r"[1-9][0-9]{0,3}"),
}
ENV_ALLOWED = frozenset(ENV_SHAPES)
#: An admin-listed environment variable holds a value, as an admin-listed setting does.
ADMIN_ENV_SHAPE = ADMIN_VALUE_SHAPE
# The job's own settings: no library reads names under this prefix.
ENV_JOB_PREFIX = "EPOCHS_JOB_"
# Fragments of names that load libraries, configuration, certificates or code, or redirect traffic:
# refused even if an admin lists the name.
ENV_NEVER_WORDS = (
    "PATH", "HOME", "FILE", "CONF", "DIR", "PROXY", "OPT", "LIB", "PRELOAD", "SSL", "CERT", "TLS", "CA_BUNDLE",
    "KRB5", "MASTER", "PYTHON", "JAVA", "SPARK", "HADOOP", "YARN", "AWS", "GOOGLE", "AZURE", "BASH", "SHELL",
    "PERL", "RUBY", "NODE", "GCONV", "LOCPATH", "NLSPATH", "HOSTALIASES", "RES_OPTIONS", "LOCALDOMAIN", "TMP",
    "TEMP", "PLUGIN", "MODULE", "LOADER", "AGENT", "COMMAND", "CMD", "PROGRAM", "EDITOR", "PAGER",
    "BROWSER", "ASKPASS", "SSH", "SELECTOR", "CLASS", "FACTORY", "PROVIDER", "HANDLER", "IMPL", "LOG4J",
    "SERVER", "SOCKS", "HOST", "ENDPOINT", "URL", "URI", "ADDR",
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


def deployment_setting(option: str) -> str:
    """``[epochs] <option>`` from Airflow's configuration (or ``AIRFLOW__EPOCHS__<OPTION>`` without Airflow)."""
    try:
        from airflow.configuration import conf  # lazily: this module is pure logic elsewhere
    except ImportError:
        return os.environ.get(f"AIRFLOW__EPOCHS__{option.upper()}", "")
    return str(conf.get("epochs", option, fallback="") or "")


def listed_setting(option: str) -> frozenset[str]:
    """The comma-separated names of ``[epochs] <option>``."""
    return _listed(option)


def _listed(option: str) -> frozenset[str]:
    return frozenset(part.strip() for part in deployment_setting(option).split(",") if part.strip())


def admin_allowed(option: str, extra: Iterable[str] | None = None) -> dict[str, frozenset[str] | None]:
    """The names an admin lists in ``[epochs] <option>`` (or ``extra``), each with the words listed for it
    (``NAME=fast|slow``), or None when listed alone (it then takes :data:`ADMIN_VALUE_SHAPE`).

    :raises InvalidInput: a listed word that is not :data:`LISTED_VALUE_SHAPE`, naming the entry.
    """
    entries = deployment_setting(option).split(",") if extra is None else list(extra)
    allowed: dict[str, frozenset[str] | None] = {}
    for entry in (part.strip() for part in entries):
        if not entry:
            continue
        name, listed, values = (part.strip() for part in entry.partition("="))
        if not listed:
            allowed[name] = None
            continue
        words = [word.strip() for word in values.split("|")]
        bad = [word for word in words if not re.fullmatch(LISTED_VALUE_SHAPE, word)]
        if bad:
            raise InvalidInput(f"[epochs] {option} entry {entry!r}: the listed value {bad[0]!r} is not a plain word "
                               "or number (letters, digits, '_', '+', '-'; never a class, a path or a host)")
        allowed[name] = frozenset(words)
    return allowed


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
    if key not in CONF_ALLOWED and key not in admin_allowed("extra_allowed_conf", extra):
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
    if name not in ENV_ALLOWED and not name.startswith(ENV_JOB_PREFIX) \
            and name not in admin_allowed("extra_allowed_env_vars", extra):
        allowed = ", ".join(sorted(ENV_ALLOWED))
        raise InvalidInput(f"submit_options env_vars {name!r} is not on the allow-list ({allowed}, {ENV_JOB_PREFIX}*; "
                           "an admin adds more in [epochs] extra_allowed_env_vars)")
    return name


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, (int, float, str)) else repr(value)


def _admin_value(what: str, option: str, name: str, text: str, extra: Iterable[str] | None) -> str:
    """``text`` if the admin-listed ``name`` may take it: one of its listed words, or a value of
    :data:`ADMIN_VALUE_SHAPE` when it is listed alone."""
    words = admin_allowed(option, extra).get(name)
    if words is not None and text not in words:
        raise InvalidInput(f"submit_options {what} {name} value {text!r} is not one of the values [epochs] {option} "
                           f"lists for it ({', '.join(sorted(words))})")
    if words is None and not re.fullmatch(ADMIN_VALUE_SHAPE, text):
        raise InvalidInput(f"submit_options {what} {name} value {text!r} does not have the shape of the setting (an "
                           "admin-listed name takes a number, size, duration or boolean, never a word a library could "
                           f"load or run as a class, a program or a host; an admin lists words as {name}=word|word)")
    return text


def check_conf_value(key: str, value: object, *, extra: Iterable[str] | None = None) -> str:
    """``value`` as a string if it has the shape ``key`` takes (:data:`CONF_SHAPES`; an admin-listed key: its
    listed words or :data:`ADMIN_CONF_SHAPE`, see :func:`admin_allowed`), else :class:`InvalidInput` naming both."""
    text = _text(f"conf {key}", _scalar(value))
    shape = CONF_SHAPES.get(key)
    if shape is None:
        return _admin_value("conf", "extra_allowed_conf", key, text, extra)
    if not re.fullmatch(shape, text):
        raise InvalidInput(f"submit_options conf {key} value {text!r} does not have the shape of the setting "
                           "(a number, size, duration, boolean or one of its words: never a class, a path or a URL)")
    return text


def check_env_value(name: str, value: object, *, extra: Iterable[str] | None = None) -> str:
    """``value`` as a string if it has the shape ``name`` takes (:data:`ENV_SHAPES`; ``EPOCHS_JOB_*``: any
    one-line text; an admin-listed name: its listed words or :data:`ADMIN_ENV_SHAPE`), else :class:`InvalidInput`."""
    text = _scalar(value)
    if name.startswith(ENV_JOB_PREFIX) and name not in ENV_SHAPES:
        return _text(f"env_vars {name}", text)
    shape = ENV_SHAPES.get(name)
    if shape is None:
        return _admin_value("env_vars", "extra_allowed_env_vars", name, text, extra)
    if not re.fullmatch(shape, text):
        raise InvalidInput(f"submit_options env_vars {name} value {text!r} does not have the shape of the "
                           "variable (a zone or locale name, a count: never a path)")
    return text


def keytab_roots() -> list[str]:
    """Folders a keytab may come from: ``[epochs] allowed_keytab_roots`` (none by default: no keytab)."""
    return [posixpath.normpath(os.path.abspath(os.path.expanduser(r))) for r in _listed("allowed_keytab_roots")]


def code_roots() -> list[str]:
    """Folders code files may come from: Airflow's DAGs folder and ``[epochs] extra_allowed_code_roots``."""
    roots = [posixpath.normpath(os.path.abspath(os.path.expanduser(r))) for r in _listed("extra_allowed_code_roots")]
    try:
        from airflow.configuration import conf
    except ImportError:
        return roots
    dags = conf.get("core", "dags_folder", fallback="")
    return [posixpath.normpath(os.path.abspath(os.path.expanduser(dags))), *roots] if dags else roots


def check_code_path(what: str, path: str, roots: Sequence[str] | None = None,
                    setting: str = "extra_allowed_code_roots") -> str:
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
                           f"roots in [epochs] {setting})")
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
            out[key] = {check_conf_key(k): check_conf_value(k, v) for k, v in value.items()}
        elif key == "env_vars":
            if not isinstance(value, Mapping):
                raise InvalidInput(f"submit_options env_vars must be a mapping, not {type(value).__name__}")
            out[key] = {check_env_name(k): check_env_value(k, v) for k, v in value.items()}
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
        else:  # keytab: a credential file, only from a folder an admin names for keytabs
            keytab = _text(key, value, allow_comma=False)
            out[key] = check_code_path(key, keytab, roots=keytab_roots(), setting="allowed_keytab_roots")
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
