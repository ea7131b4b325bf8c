"""The package layout keeps its promises: layers (import-linter), no import cycle, no private name across modules.

The layer contract itself lives in ``pyproject.toml`` ([tool.importlinter]); ``make test`` runs ``lint-imports``
before pytest, and this module runs it again so a plain ``pytest`` checks it too.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "policyopt"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


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
    for path in sorted(PACKAGE.rglob("*.py")):
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


def _import_graph() -> dict[str, set[str]]:
    import grimp  # comes with import-linter, a test extra

    graph = grimp.build_graph("policyopt")
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


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


def test_no_import_cycle():
    edges = _import_graph()
    assert "policyopt.cli.main" in edges and "policyopt.privacy.age_dependent" in edges
    assert _cycles(edges) == []


def test_layer_contract_holds():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe is not None, "lint-imports is missing: install the test extra (pip install -e '.[test]')"
    run = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Contracts: 2 kept, 0 broken." in run.stdout
