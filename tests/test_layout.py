"""The package layout keeps its promises: the design card's top level, layers (import-linter), no import cycle, no
private name across modules.

The repository's top level holds ``policyopt/``, ``problems/`` and ``solvers/``; the last two are installed inside the
package as ``policyopt.problems`` / ``policyopt.solvers``.  The layer contract lives in ``pyproject.toml``
([tool.importlinter]); grimp cannot see a subpackage mapped in by an editable install, so the contract and the import
graph are checked on the installed layout (the project built and installed with pip into a scratch folder, see
``tests/_layout.py``).  ``make test`` runs the contract before pytest, and this module runs it again.
"""

from __future__ import annotations

import ast
import json
import shutil
import tomllib
from pathlib import Path

import pytest

from _layout import ROOT, build_installed, lint, run_python

PACKAGE = ROOT / "policyopt"
#: source folder -> the installed package it becomes
SOURCE_PACKAGES = {ROOT / "policyopt": "policyopt", ROOT / "problems": "policyopt.problems",
                   ROOT / "solvers": "policyopt.solvers"}


def _module_name(path: Path) -> str:
    folder = next(f for f in SOURCE_PACKAGES if f in path.parents)
    parts = [SOURCE_PACKAGES[folder], *path.relative_to(folder).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _sources() -> list[Path]:
    return sorted(p for folder in SOURCE_PACKAGES for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The project as pip installs it (a built wheel, no dependencies), in a scratch folder."""
    return build_installed(tmp_path_factory.mktemp("installed"))


def test_top_level_is_the_design_cards():
    for name in ("pyproject.toml", "README.md", "policyopt", "problems", "solvers", "tests", "notebooks"):
        assert (ROOT / name).exists(), name
    assert not (PACKAGE / "problems").exists() and not (PACKAGE / "solvers").exists()


def test_every_package_folder_is_installed():
    """The explicit package list of pyproject.toml names every folder with an __init__.py (none is left out of wheels)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    found = {_module_name(p) for p in _sources() if p.name == "__init__.py"}
    assert set(config["packages"]) == found
    assert config["package-dir"] == {"policyopt": "policyopt", "policyopt.problems": "problems",
                                     "policyopt.solvers": "solvers"}


def test_module_names_follow_the_installed_layout():
    assert _module_name(ROOT / "problems" / "fran.py") == "policyopt.problems.fran"
    assert _module_name(ROOT / "solvers" / "__init__.py") == "policyopt.solvers"
    assert _module_name(PACKAGE / "privacy" / "tpl_loss.py") == "policyopt.privacy.tpl_loss"


def test_installed_wheel_has_the_subpackages(installed):
    run = run_python(installed, "import json, policyopt, policyopt.problems, policyopt.solvers, policyopt.solvers.exact;"
                                "print(json.dumps([policyopt.__file__, policyopt.problems.__file__, policyopt.solvers.__file__]))")
    assert run.returncode == 0, run.stderr
    files = [Path(f) for f in json.loads(run.stdout)]
    assert [f.relative_to(installed).as_posix() for f in files] == [
        "policyopt/__init__.py", "policyopt/problems/__init__.py", "policyopt/solvers/__init__.py"]
    assert not (installed / "problems").exists() and not (installed / "solvers").exists()  # no generic top-level names


def test_editable_install_maps_the_subpackages():
    import policyopt.problems
    import policyopt.solvers

    assert Path(policyopt.problems.__file__) == ROOT / "problems" / "__init__.py"
    assert Path(policyopt.solvers.__file__) == ROOT / "solvers" / "__init__.py"


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """Absolute module name of an ``from X import ...`` statement inside `module`."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_imports() -> list[str]:
    """Every ``from other_module import _name`` in the package (dunder names are public)."""
    found = []
    for path in _sources():
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _resolve(node, module, path.name == "__init__.py")
                if source == module:
                    continue
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {source}.{alias.name}")
    return found


def test_no_private_name_crosses_a_module():
    assert private_imports() == []


def test_private_import_detector_finds_one(tmp_path):
    # the detector itself: a private import must be reported (guards against a check that cannot fail)
    tree = ast.parse("from policyopt.models.markov import _gth_stationary, MarkovChain\n")
    node = tree.body[0]
    assert _resolve(node, "policyopt.models.cmc", False) == "policyopt.models.markov"
    assert [a.name for a in node.names if a.name.startswith("_")] == ["_gth_stationary"]
    rel = ast.parse("from ..errors import fmt\n").body[0]
    assert _resolve(rel, "policyopt.models.cmc", False) == "policyopt.errors"


def _import_graph(site: Path) -> dict[str, set[str]]:
    """grimp's import graph of the installed package (grimp comes with import-linter, a test extra)."""
    run = run_python(site, "import grimp, json; g = grimp.build_graph('policyopt'); "
                           "print(json.dumps({m: sorted(g.find_modules_directly_imported_by(m)) for m in g.modules}))")
    assert run.returncode == 0, run.stderr
    return {m: set(v) for m, v in json.loads(run.stdout).items()}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]; counter[0] += 1
        stack.append(root); on_stack.add(root)
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]; counter[0] += 1
                    stack.append(nxt); on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop(); on_stack.discard(m); comp.append(m)
                        if m == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle(installed):
    edges = _import_graph(installed)
    assert "policyopt.cli.main" in edges and "policyopt.privacy.age_dependent" in edges
    assert "policyopt.problems.age_dependent" in edges and "policyopt.solvers.exact" in edges
    assert _cycles(edges) == []


def test_layer_contract_holds(installed):
    run = lint(installed)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Contracts: 2 kept, 0 broken." in run.stdout


def test_layer_contract_fails_if_problems_imports_solvers(installed, tmp_path):
    """The contract sees the mapped-in subpackages: a problem importing a solver breaks it."""
    broken = tmp_path / "site"
    shutil.copytree(installed, broken)
    module = broken / "policyopt" / "problems" / "age_dependent.py"
    module.write_text(module.read_text(encoding="utf-8") + "\nimport policyopt.solvers.exact  # noqa: E402,F401\n",
                      encoding="utf-8")
    run = lint(broken)
    assert run.returncode != 0
    assert "policyopt.problems.age_dependent -> policyopt.solvers.exact" in run.stdout
    assert "1 broken" in run.stdout


def test_no_source_file_is_over_900_lines():
    """A reader finds a part by its file name: no module of the package grows past 900 lines."""
    long = {str(p.relative_to(ROOT)): n for p in _sources() if (n := len(p.read_text(encoding="utf-8").splitlines())) > 900}
    assert long == {}
    temporal = [ROOT / "policyopt" / "privacy" / f"{m}.py" for m in ("tpl_loss", "tpl_envelope", "tpl_leakage", "tpl_supremum")]
    assert all(len(p.read_text(encoding="utf-8").splitlines()) < 800 for p in temporal)


def _body_lines(fn: ast.AST) -> int:
    """Lines of a function's body, its docstring aside."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return 0 if not body else fn.end_lineno - body[0].lineno + 1


def _long_functions(paths, limit: int = 120) -> dict:
    out = {}
    for p in paths:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (n := _body_lines(node)) > limit:
                out[f"{p.name}:{node.name}"] = n
    return out


def test_no_function_body_is_over_120_lines():
    """A function is read at once: no body in policyopt/, problems/, solvers/ over 120 lines (docstring aside)."""
    assert _long_functions(_sources()) == {}


def test_long_function_detector_counts_the_body_only(tmp_path):
    src = tmp_path / "m.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(121))
    src.write_text(f'def f():\n    """Doc.\n\n    More.\n    """\n{body}\n\n\ndef g():\n    """Doc."""\n    return 1\n',
                   encoding="utf-8")
    assert _long_functions([src]) == {"m.py:f": 121}
    assert _long_functions([src], limit=121) == {}


#: Libraries of numerical work: the command line hands its options to ``policyopt.app`` and prints what comes back.
_NUMERIC_LIBRARIES = ("numpy", "pandas", "scipy", "pyarrow", "dask", "distributed", "cvxpy", "pyomo", "numba")


def _imported_modules(path: Path) -> set:
    """Every module named by an ``import`` or ``from … import`` in `path`, at any depth (local imports too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


def test_the_command_line_only_parses_and_prints():
    """``policyopt/cli/`` imports no numerical library anywhere and stays under 2,200 lines (issue 34)."""
    files = sorted((PACKAGE / "cli").rglob("*.py"))
    numeric = {f"{p.name}: {m}" for p in files for m in _imported_modules(p) if m.split(".")[0] in _NUMERIC_LIBRARIES}
    assert numeric == set()
    assert sum(len(p.read_text(encoding="utf-8").splitlines()) for p in files) < 2200


def test_import_finder_sees_local_imports(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import json\n\ndef f():\n    import numpy as np\n    from pandas.api import types\n    from . import x\n",
                   encoding="utf-8")
    assert _imported_modules(src) == {"json", "numpy", "pandas.api"}
