"""The installed layout of policyopt, for the layer contract (import-linter) and the import graph (grimp).

The repository keeps ``problems/`` and ``solvers/`` at its top level and installs them inside the package as
``policyopt.problems`` / ``policyopt.solvers`` (``package-dir`` in ``pyproject.toml``).  An editable install maps them
in with an import hook, which grimp cannot see (it walks the package's folder), so the contracts are checked on what
a user installs: the project is built and installed with pip into a scratch folder (``pip install --target``, the
same wheel a user gets) and ``lint-imports`` runs there.

``python tests/_layout.py`` (run by ``make test`` before pytest) does that and exits with lint-imports' code.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "policyopt", "problems", "solvers")


def build_installed(dest: Path) -> Path:
    """Install the project as a user would (built wheel, no dependencies) under `dest`; return the folder to import from.

    The sources are copied first, so no ``build/`` folder of the working tree (stale files included) takes part.
    """
    dest = Path(dest)
    src, site = dest / "src", dest / "site"
    src.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile", "--disable-pip-version-check",
                    "--target", str(site), str(src)], check=True, capture_output=True, text=True)
    return site


def _env(site: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(site)  # before site-packages, so the editable install's mapping is not used
    return env


def lint(site: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` with the repository's contracts, on the installed layout in `site`."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        raise RuntimeError("lint-imports is missing: install the test extra (pip install -e '.[test]')")
    return subprocess.run([exe, "--no-cache", str(ROOT / "pyproject.toml")], cwd=site, env=_env(site),
                          capture_output=True, text=True, timeout=300)


def run_python(site: Path, code: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter that imports policyopt from the installed layout in `site`."""
    return subprocess.run([sys.executable, "-c", code], cwd=site, env=_env(site), capture_output=True, text=True,
                          timeout=300)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="policyopt-layout-") as tmp:
        site = build_installed(Path(tmp))
        run = lint(site)
        sys.stdout.write(run.stdout)
        sys.stderr.write(run.stderr)
        return run.returncode


if __name__ == "__main__":
    sys.exit(main())
