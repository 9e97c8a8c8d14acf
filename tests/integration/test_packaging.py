"""The package installs as one ``airflow_epochs`` tree and registers itself with Airflow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


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


def test_the_wheel_holds_one_airflow_epochs_tree_with_its_metadata(tmp_path):
    """`pip wheel . --no-deps` (with build isolation: the build system's own setuptools) gives one
    ``airflow_epochs`` tree that holds every package of the package-dir map and the data it needs,
    a PEP 639 license expression, and the three entry points. (scripts/wheel_check.sh, run by CI,
    installs this wheel into a fresh virtualenv and runs those entry points.)"""
    import shutil
    import tomllib
    import zipfile

    # From a copy, as in a fresh clone (setuptools builds in the source tree and would leave build/ there).
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for folder in ("provider", "operators", "sensors"):
        shutil.copytree(REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "--quiet",
                            "--no-deps", "--wheel-dir", str(tmp_path / "dist"), str(source)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("airflow_provider_epochs-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"airflow_epochs", wheel.name.rsplit("-", 3)[0] + ".dist-info"}
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    for package, folder in setuptools["package-dir"].items():
        modules = {p.name for p in (REPO / folder).glob("*.py")}
        inside = "/".join(package.split(".")) + "/"
        shipped = {n[len(inside):] for n in names if n.startswith(inside) and "/" not in n[len(inside):]}
        assert modules and modules <= shipped, package
    assert set(setuptools["packages"]) == set(setuptools["package-dir"])
    assert "airflow_epochs/py.typed" in names
    assert any(n.startswith("airflow_epochs/ui/static/") for n in names)
    with zipfile.ZipFile(wheel) as archive:
        info = wheel.name.rsplit("-", 3)[0] + ".dist-info"
        metadata = archive.read(f"{info}/METADATA").decode()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert "provider_info = airflow_epochs:get_provider_info" in entry_points
    assert "epochs = airflow_epochs.ui.plugin:EpochsPlugin" in entry_points
    assert "airflow-epochs = airflow_epochs.cli:main" in entry_points


