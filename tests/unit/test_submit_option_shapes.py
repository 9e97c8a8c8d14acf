"""No code execution through configuration, checked without Spark: submit_options key by key, each
Spark master mode accepted or refused up front, code files only under allowed roots."""

from __future__ import annotations

import pytest

from airflow_epochs.coordination import InvalidInput
from airflow_epochs.spark.submit_options import check_conf_key, check_master, validate_submit_options


@pytest.mark.parametrize("key", [
    "spark.driver.extraClassPath", "spark.executor.extraClassPath", "spark.driver.extraJavaOptions",
    "spark.executor.extraJavaOptions", "spark.driver.extraLibraryPath", "spark.executor.extraLibraryPath",
    "spark.pyspark.python", "spark.pyspark.driver.python", "spark.jars", "spark.jars.packages",
    "spark.sql.extensions", "spark.sql.queryExecutionListeners", "spark.sql.catalog.evil",
    "spark.sql.hive.metastore.jars", "spark.extraListeners", "spark.plugins", "spark.executorEnv.LD_PRELOAD",
    "spark.yarn.appMasterEnv.PATH", "spark.kubernetes.driverEnv.PYTHONPATH", "spark.ui.filters",
    "spark.hadoop.fs.s3a.aws.credentials.provider", "spark.hadoop.fs.s3a.impl", "spark.shuffle.manager",
    "spark.redaction.regex", "spark.kubernetes.container.image", "spark.python.worker.module",
    "spark.driver.resource.gpu.discoveryScript", "spark.sql.sources.commitProtocolClass", "spark.master",
    "spark.submit.pyFiles", "not.spark", "spark.sql.x\n",
])
def test_conf_keys_that_point_spark_at_code_are_refused(key):
    with pytest.raises(InvalidInput, match="conf key"):
        check_conf_key(key)


def test_tuning_conf_is_accepted():
    conf = {"spark.sql.shuffle.partitions": 4, "spark.ui.enabled": "false", "spark.executor.memory": "2g",
            "spark.dynamicAllocation.enabled": "true", "spark.sql.session.timeZone": "Europe/Amsterdam",
            "spark.kubernetes.namespace": "etl", "spark.speculation": True, "spark.network.timeout": "120s"}
    checked = validate_submit_options({"conf": conf})["conf"]
    assert (checked["spark.sql.shuffle.partitions"], checked["spark.speculation"]) == ("4", "true")


@pytest.mark.parametrize(("options", "message"), [
    # issue 35: an endpoint redirects the job's S3 traffic (and its credentials) to another host
    ({"conf": {"spark.hadoop.fs.s3a.endpoint": "http://attacker:9000"}}, "refused: it names 'endpoint'"),
    ({"conf": {"spark.executor.memory": "2g,spark.jars=x"}}, "shape"),
    ({"conf": {"spark.sql.shuffle.partitions": "4 --jars /tmp/x.jar"}}, "shape"),
    ({"conf": {"spark.sql.session.timeZone": "../../etc/shadow"}}, "shape"),
    ({"conf": {"spark.kubernetes.namespace": "kube-system/x"}}, "shape"),
    ({"env_vars": {"TZ": "/tmp/evil/zone"}}, "shape"),
    ({"env_vars": {"TZ": ":/etc/shadow"}}, "shape"),
    ({"env_vars": {"TZ": "Europe/../../tmp/x"}}, "shape"),
    ({"env_vars": {"LC_ALL": "/tmp/evil-locale"}}, "shape"),
    ({"env_vars": {"LANG": "en_US.UTF-8/../../tmp"}}, "shape"),
    ({"env_vars": {"LANGUAGE": "en:/tmp/x"}}, "shape"),
    ({"env_vars": {"OMP_NUM_THREADS": "-1"}}, "shape"),
    ({"keytab": "/etc/krb5.keytab"}, "allowed_keytab_roots"),
])
def test_values_are_held_to_the_shape_of_their_setting(options, message):
    with pytest.raises(InvalidInput, match=message) as refused:
        validate_submit_options(options)
    [(_, value)] = options.items()
    named = [value] if isinstance(value, str) else [*value, *value.values()]
    assert any(repr(n)[1:-1] in str(refused.value) for n in named)  # names the key or value


def test_shaped_env_values_and_a_keytab_under_an_admins_root_pass(monkeypatch, tmp_path):
    env = {"TZ": "America/New_York", "LANG": "en_US.UTF-8", "LC_ALL": "C.UTF-8", "LANGUAGE": "nl_NL:en",
           "OMP_NUM_THREADS": 4}
    assert validate_submit_options({"env_vars": env})["env_vars"]["OMP_NUM_THREADS"] == "4"
    monkeypatch.setenv("AIRFLOW__EPOCHS__ALLOWED_KEYTAB_ROOTS", str(tmp_path / "keytabs"))
    keytab = str(tmp_path / "keytabs" / "etl.keytab")
    assert validate_submit_options({"keytab": keytab, "principal": "etl@EXAMPLE.COM"})["keytab"] == keytab
    with pytest.raises(InvalidInput, match="not under an allowed root"):
        validate_submit_options({"keytab": str(tmp_path / "other.keytab")})


@pytest.mark.parametrize(("options", "message"), [
    ({"env_vars": {"PATH": "/tmp/evil"}}, "'PATH' is refused"),
    ({"env_vars": {"PYTHONPATH": "/tmp"}}, "'PYTHONPATH' is refused"),
    ({"env_vars": {"LD_PRELOAD": "/tmp/x.so"}}, "'LD_PRELOAD' is refused"),
    ({"env_vars": {"JAVA_TOOL_OPTIONS": "-javaagent:x"}}, "refused"),
    ({"env_vars": {"BASH_ENV": "/tmp/x"}}, "refused"),
    ({"env_vars": {"SPARK_CONF_DIR": "/tmp"}}, "refused"),
    ({"env_vars": {"PYSPARK_PYTHON": "/tmp/python"}}, "refused"),
    ({"env_vars": {"A B": "x"}}, "not an environment variable name"),
    ({"env_vars": ["PATH"]}, "must be a mapping"),
    ({"conf": {"spark.ui.enabled": "false\n--jars x"}}, "control characters"),
    ({"jars": "a.jar,,b.jar"}, "non-empty"),
    ({"py_files": ["deps.zip", "x\x00"]}, "control characters"),
    ({"driver_memory": "1g --conf x"}, "512m or 2g"),
    ({"num_executors": -1}, "from 1 to"),
    ({"num_executors": True}, "from 1 to"),
    ({"deploy_mode": "server"}, "client or cluster"),
    ({"yarn_queue": "q; rm"}, "plain name"),
    ({"spark_binary": "/bin/sh"}, "'spark_binary' is not accepted"),
    ({"application_args": ["--x"]}, "not accepted"),
])
def test_bad_submit_options_name_the_bad_value(options, message):
    with pytest.raises(InvalidInput, match=message):
        validate_submit_options(options)


def test_safe_env_vars_pass():
    assert validate_submit_options({"env_vars": {"TZ": "UTC", "EPOCHS_JOB_SETTING": 1}})["env_vars"] == {
        "TZ": "UTC", "EPOCHS_JOB_SETTING": "1"}


@pytest.mark.parametrize("name", [
    "OPENSSL_CONF", "AWS_CONFIG_FILE", "SSL_CERT_FILE", "HTTPS_PROXY", "https_proxy", "MASTER", "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE", "GIT_SSH_COMMAND", "KRB5_CONFIG", "MY_SETTING", "TMPDIR", "EPOCHS_JOB_PATH",
])
def test_env_vars_pass_only_from_the_allow_list(name):
    with pytest.raises(InvalidInput, match=rf"env_vars '{name}' is (refused|not on the allow-list)"):
        validate_submit_options({"env_vars": {name: "x"}})


@pytest.mark.parametrize("key", [
    "spark.io.compression.codec", "spark.sql.cache.serializer", "spark.hadoop.fs.s3a.custom.signers",
    "spark.sql.warehouse.dir", "spark.hadoop.fs.defaultFS", "spark.sql.streaming.stateStore.providerClass",
    "spark.ui.proxyBase", "spark.storage.decommission.fallbackStorage.path", "spark.sql.parquet.output.committer.class",
])
def test_conf_keys_pass_only_from_the_allow_list(key):
    with pytest.raises(InvalidInput, match=rf"conf key '{key}' is (refused|not on the allow-list)"):
        check_conf_key(key)


def test_every_listed_setting_passes_and_an_admin_adds_names(monkeypatch):
    from airflow_epochs.spark.submit_options import CONF_ALLOWED, ENV_ALLOWED, check_env_name

    for key in CONF_ALLOWED:
        assert check_conf_key(key) == key
    for name in ENV_ALLOWED:
        assert check_env_name(name) == name
    monkeypatch.setenv("AIRFLOW__EPOCHS__EXTRA_ALLOWED_ENV_VARS", "MY_SETTING, OPENSSL_CONF")
    monkeypatch.setenv("AIRFLOW__EPOCHS__EXTRA_ALLOWED_CONF",
                       "spark.sql.legacy.timeParserPolicy=LEGACY|CORRECTED,spark.io.compression.codec")
    assert validate_submit_options({"env_vars": {"MY_SETTING": "1"}, "conf": {
        "spark.sql.legacy.timeParserPolicy": "LEGACY"}})["env_vars"] == {"MY_SETTING": "1"}
    # What loads a library or a class stays refused even when an admin lists it: by its name, and, for a
    # setting whose name says nothing of it (spark.kryo.registrator is refused by name now; a future one
    # may not be), by its value, which must be a plain scalar (no dotted class name, path or URL).
    monkeypatch.setenv("AIRFLOW__EPOCHS__EXTRA_ALLOWED_CONF", "spark.sql.legacy.timeParserPolicy=LEGACY,"
                       "spark.kryo.x,spark.sql.sources.default,spark.kryo.registrator")
    for key, value in (("spark.kryo.x", "com.evil.Registrator"), ("spark.sql.sources.default", "org.evil.Source"),
                       ("spark.sql.sources.default", "evil"), ("spark.kryo.x", "http://h/x.jar")):
        with pytest.raises(InvalidInput, match="does not have the shape"):
            validate_submit_options({"conf": {key: value}})
    for key, value in (("spark.sql.legacy.timeParserPolicy", "/tmp/x"), ("spark.sql.legacy.timeParserPolicy", "EVIL")):
        with pytest.raises(InvalidInput, match="not one of the values"):
            validate_submit_options({"conf": {key: value}})
    with pytest.raises(InvalidInput, match="'registrator'"):
        validate_submit_options({"conf": {"spark.kryo.registrator": "com.evil.Registrator"}})
    with pytest.raises(InvalidInput, match="does not have the shape"):
        validate_submit_options({"env_vars": {"MY_SETTING": "/tmp/evil.so"}})
    with pytest.raises(InvalidInput, match="'OPENSSL_CONF' is refused"):
        check_env_name("OPENSSL_CONF")
    with pytest.raises(InvalidInput, match=r"'spark\.io\.compression\.codec' is refused"):
        check_conf_key("spark.io.compression.codec")


def test_code_files_are_local_paths_under_allowed_roots(monkeypatch, tmp_path):
    from airflow_epochs.spark.submit_options import check_code_path

    dags = tmp_path / "dags"
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    monkeypatch.setenv("AIRFLOW__EPOCHS__EXTRA_ALLOWED_CODE_ROOTS", str(tmp_path / "libs"))
    ok = validate_submit_options({"py_files": [f"{dags}/deps.zip", f"{tmp_path}/libs/x.egg"],
                                  "jars": f"{dags}/a.jar"})
    assert ok["py_files"] == f"{dags}/deps.zip,{tmp_path}/libs/x.egg"
    for option, value, message in (
        ("py_files", "http://evil.example/x.py", "is a URL"),
        ("jars", "https://evil.example/x.jar", "is a URL"),
        ("files", "s3://bucket/x", "is a URL"),
        ("jars", "local:/opt/x.jar", "is a URL"),
        ("py_files", "deps.zip", "absolute local path"),
        ("py_files", f"{dags}/../elsewhere/x.py", "without '..'"),
        ("archives", "/etc/passwd", "not under an allowed root"),
        ("jars", f"{dags}x/a.jar", "not under an allowed root"),
    ):
        with pytest.raises(InvalidInput, match=message):
            validate_submit_options({option: value})
    with pytest.raises(InvalidInput, match="not under an allowed root"):
        check_code_path("jars", "/srv/a.jar", roots=[str(dags)])


def test_master_modes():
    assert check_master("local[*]", None, kubernetes_available=False) == "local"
    assert check_master("local[2]", "client", kubernetes_available=False) == "local"
    assert check_master("spark://127.0.0.1:7077", None, kubernetes_available=False) == "standalone"
    assert check_master("yarn", "cluster", kubernetes_available=False) == "yarn"
    assert check_master("k8s://https://k:6443", "cluster", kubernetes_available=True) == "kubernetes"
    for master, mode, message in (
        ("spark://127.0.0.1:7077", "cluster", "does not run Python applications in cluster mode"),
        ("local[2]", "cluster", "client mode only"),
        ("k8s://https://k:6443", "cluster", "apache-airflow-providers-cncf-kubernetes"),
        ("mesos://m:5050", None, "not supported"),
        ("local[2]; rm -rf /", None, "not supported"),
    ):
        with pytest.raises(InvalidInput, match=message):
            check_master(master, mode, kubernetes_available=False)


def test_a_path_override_is_refused_at_parse_time():
    from airflow_epochs.operators import SparkEpochOperator

    with pytest.raises(ValueError, match="'PATH' is refused"):
        SparkEpochOperator(task_id="t", application="job.py", partition="p", storage="/s",
                           submit_options={"env_vars": {"PATH": "/tmp/fake-bin"}}, attempt_task_id="open")




@pytest.mark.parametrize(("name", "value"), [
    ("LOG4J_CONTEXT_SELECTOR", "org.evil.Selector"),  # issue 48: Spark's log4j2 loaded and ran this class
    ("LOG4J_CONTEXT_SELECTOR", "Selector"),  # a class of the default package, from a jar the DAGs folder holds
    ("SOCKS_SERVER", "attacker.example"),  # issue 48: redirects the job's traffic
    ("SOCKS_SERVER", "2130706433"),  # a number read as an IPv4 address
    ("GIT_SSH_COMMAND", "evil"),  # issue 48: a program name, found on the PATH
    ("MY_SELECTOR_CLASS", "Evil"),
])
def test_an_admin_listed_variable_passes_no_class_program_or_host(name, value):
    """Issue 48, item 6: an admin listing a variable by name does not let a DAG author hand it a class, a
    program or a host: names that select one are refused even when listed, and a name listed alone takes a
    number, size, duration or boolean, never a word."""
    from airflow_epochs.spark.submit_options import check_env_name, check_env_value

    with pytest.raises(InvalidInput, match=rf"'{name}' is refused|does not have the shape") as refused:
        check_env_value(check_env_name(name, extra=[name]), value, extra=[name])  # the admin listed the name
    assert name in str(refused.value)


def test_an_admin_listed_name_takes_values_and_only_the_words_listed_with_it(monkeypatch):
    """A word passes for an admin-listed name only when the admin lists it with the name; a listed word is
    itself held to a plain word (no dot, slash or colon), so not even the admin's list passes a class or a path."""
    monkeypatch.setenv("AIRFLOW__EPOCHS__EXTRA_ALLOWED_ENV_VARS", "MY_THREADS, MY_MODE=fast|slow")
    monkeypatch.setenv("AIRFLOW__EPOCHS__EXTRA_ALLOWED_CONF", "spark.sql.legacy.timeParserPolicy=LEGACY|CORRECTED")
    checked = validate_submit_options({"env_vars": {"MY_THREADS": 8, "MY_MODE": "slow"},
                                       "conf": {"spark.sql.legacy.timeParserPolicy": "CORRECTED"}})
    assert checked == {"env_vars": {"MY_THREADS": "8", "MY_MODE": "slow"},
                       "conf": {"spark.sql.legacy.timeParserPolicy": "CORRECTED"}}
    for value in ("2g", "1.5", "30s", "true"):
        assert validate_submit_options({"env_vars": {"MY_THREADS": value}})["env_vars"]["MY_THREADS"] == value
    for env, message in (({"MY_THREADS": "evil"}, "does not have the shape"), ({"MY_MODE": "fast.Evil"}, "not one of"),
                         ({"MY_MODE": "medium"}, "not one of the values")):
        with pytest.raises(InvalidInput, match=message):
            validate_submit_options({"env_vars": env})
    monkeypatch.setenv("AIRFLOW__EPOCHS__EXTRA_ALLOWED_ENV_VARS", "MY_MODE=org.evil.Class")
    with pytest.raises(InvalidInput, match=r"extra_allowed_env_vars entry 'MY_MODE=org\.evil\.Class'"):
        validate_submit_options({"env_vars": {"MY_MODE": "org.evil.Class"}})
