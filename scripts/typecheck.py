"""``mypy --strict`` on the whole ``airflow_epochs`` package, laid out as it installs.

mypy cannot follow setuptools' editable finder, and the source tree is not the package's layout
(``provider/`` is ``airflow_epochs``, ``operators/`` is ``airflow_epochs.operators``, ...). This builds
that layout as a tree of links under ``.epochs/typecheck``, from the same ``package-dir`` map in
pyproject.toml that setuptools installs from (so a new subpackage is checked once it is installable),
and runs mypy on it. Usage: ``python scripts/typecheck.py [extra mypy arguments]``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / ".epochs" / "typecheck"
PACKAGE = "airflow_epochs"


def build_tree(root: Path = ROOT, tree: Path = TREE) -> Path:
    """Link every module of every package of the ``package-dir`` map into ``tree``; returns ``tree``."""
    with open(root / "pyproject.toml", "rb") as fh:
        package_dir: dict[str, str] = tomllib.load(fh)["tool"]["setuptools"]["package-dir"]
    if tree.is_symlink() or tree.is_file():
        tree.unlink()
    shutil.rmtree(tree, ignore_errors=True)  # rebuilt every time: no link to a module that is gone
    for package, folder in sorted(package_dir.items()):
        target = tree.joinpath(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        source = root / folder
        for module in sorted([*source.glob("*.py"), *source.glob("py.typed")]):
            # relative links: the tree stays valid wherever the checkout lives
            (target / module.name).symlink_to(os.path.relpath(module, target))
    return tree


def main(argv: list[str]) -> int:
    tree = build_tree()
    env = {**os.environ, "MYPYPATH": str(tree)}
    command = [sys.executable, "-m", "mypy", "--strict", "-p", PACKAGE, *argv]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
