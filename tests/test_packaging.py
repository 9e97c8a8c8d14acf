"""The package installs as one ``airflow_epochs`` tree and registers itself with Airflow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_epochs import get_provider_info

REPO = Path(__file__).resolve().parent.parent


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_no_generic_top_level_names_outside_the_repo(tmp_path):
    probe = (
        "import importlib.util, json\n"
        "names = ['operators', 'sensors', 'provider', 'dags', 'hooks', 'triggers', 'coordination']\n"
        "print(json.dumps({n: importlib.util.find_spec(n) is not None for n in names}))\n"
    )
    result = _python(probe, tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == dict.fromkeys(
        ["operators", "sensors", "provider", "dags", "hooks", "triggers", "coordination"], False
    )


def test_subpackages_import_under_airflow_epochs_and_ship_py_typed(tmp_path):
    code = (
        "import airflow_epochs, airflow_epochs.operators, airflow_epochs.sensors.frontier, "
        "airflow_epochs.coordination, airflow_epochs.hooks.zookeeper, airflow_epochs.triggers.frontier\n"
        "import pathlib; print(pathlib.Path(airflow_epochs.__file__).parent.joinpath('py.typed').exists())\n"
    )
    result = _python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_coordination_core_imports_nothing_from_airflow(tmp_path):
    code = (
        "import sys, airflow_epochs.coordination, airflow_epochs.embedded_zookeeper\n"
        "print(sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.')))\n"
    )
    result = _python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_provider_info_names_importable_modules():
    import importlib

    info = get_provider_info()
    for section in ("hooks", "operators", "sensors", "triggers"):
        for entry in info[section]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
    # every public module of the operator, sensor and trigger folders is declared (helpers aside)
    helpers = {"__init__", "base", "shared_client", "async_zk"}
    for section, folder in (("operators", "operators"), ("sensors", "sensors"), ("triggers", "provider/triggers")):
        on_disk = {p.stem for p in (REPO / folder).glob("*.py")} - helpers
        declared = {m.rpartition(".")[2] for entry in info[section] for m in entry["python-modules"]}
        assert declared == on_disk, section
    for conn in info["connection-types"]:
        module, _, cls = conn["hook-class-name"].rpartition(".")
        assert getattr(importlib.import_module(module), cls).conn_type == conn["connection-type"]


@pytest.mark.integration
def test_airflow_cli_lists_provider_and_accepts_connection_type(airflow_home):
    env = {**os.environ, "AIRFLOW_HOME": str(airflow_home)}
    airflow = str(Path(sys.executable).parent / "airflow")
    listed = subprocess.run([airflow, "providers", "list", "-o", "json"], env=env, capture_output=True,
                            text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr[-2000:]
    packages = {p["package_name"]: p for p in json.loads(listed.stdout[listed.stdout.index("["):])}
    assert "airflow-provider-epochs" in packages

    added = subprocess.run(
        [airflow, "connections", "add", "zk_cli_probe", "--conn-type", "zookeeper", "--conn-host",
         "zk1:2181,zk2:2181", "--conn-schema", "/probe"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert added.returncode == 0, added.stderr[-2000:]
    got = subprocess.run([airflow, "connections", "get", "zk_cli_probe", "-o", "json"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    assert json.loads(got.stdout[got.stdout.index("["):])[0]["conn_type"] == "zookeeper"


@pytest.mark.integration
def test_providers_manager_sees_hook_fields_and_trigger(airflow_home):
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    manager = ProvidersManager()
    assert "airflow-provider-epochs" in manager.providers
    # Hooks are the task runtime's business since Airflow 3.2 (ProvidersManager.hooks is deprecated).
    hook = ProvidersManagerTaskRuntime().hooks["zookeeper"]
    assert hook is not None and hook.hook_class_name == "airflow_epochs.hooks.zookeeper.ZooKeeperHook"
    assert manager.field_behaviours["zookeeper"]["relabeling"]["schema"] == "Chroot"
    assert "extra__zookeeper__session_timeout" in manager.connection_form_widgets
    assert manager.connection_form_widgets["extra__zookeeper__keyfile_password"].is_sensitive
    triggers = {t.trigger_class_name for t in manager.trigger}
    assert "airflow_epochs.triggers.frontier" in triggers
