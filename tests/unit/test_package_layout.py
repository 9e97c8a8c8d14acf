"""The package's layout, without building it: every subpackage imports under ``airflow_epochs`` with
``py.typed``, the provider info names importable modules, the core imports nothing from Airflow,
and the build system asks for a setuptools that reads the licence expression."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from airflow_epochs import get_provider_info

REPO = Path(__file__).resolve().parents[2]


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


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
        "import sys, airflow_epochs.coordination, airflow_epochs.servers.embedded_zookeeper\n"
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
    helpers = {"__init__", "base", "shared_client", "async_zk", "rearming_client", "lifecycle", "notices",
               "definition", "opening", "stages", "sealed_events"}
    for section, folder in (("operators", "operators"), ("sensors", "sensors"), ("triggers", "provider/triggers")):
        on_disk = {p.stem for p in (REPO / folder).glob("*.py")} - helpers
        declared = {m.rpartition(".")[2] for entry in info[section] for m in entry["python-modules"]}
        assert declared == on_disk, section
    for decorator in info["task-decorators"]:  # what `task.<name>` finds, through the provider info
        module, _, function = decorator["class-name"].rpartition(".")
        assert callable(getattr(importlib.import_module(module), function)), decorator
    for conn in info["connection-types"]:
        module, _, cls = conn["hook-class-name"].rpartition(".")
        assert getattr(importlib.import_module(module), cls).conn_type == conn["connection-type"]


def test_the_build_system_asks_for_a_setuptools_that_reads_the_license_expression():
    import tomllib

    from packaging.requirements import Requirement
    from packaging.version import Version

    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert isinstance(project["project"]["license"], str)  # a PEP 639 expression, not a table
    (setuptools,) = [Requirement(r) for r in project["build-system"]["requires"] if r.startswith("setuptools")]
    # setuptools reads license expressions from 77.0 (77.0.3 fixed its import errors); older ones refuse them.
    assert not setuptools.specifier.contains(Version("76.1.0"))
    assert setuptools.specifier.contains(Version("77.0.3"))


