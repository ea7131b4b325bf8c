"""The documentation's Python examples run: every ```python block of docs/**/*.md, page by page.

The README's single Python block is a doctest (tests/docs/test_readme_quickstart.py).  In the docs, the blocks of one page
run in page order in one namespace (a later block may use names an earlier one defined), with a temporary directory as
the working directory and matplotlib's Agg backend.  A block that raises fails the test for its page; so does a page
whose blocks print nothing and define nothing (an empty block cannot fail).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _pages() -> list[Path]:
    docs = ROOT / "docs"
    return sorted(p for p in docs.rglob("*.md") if "_build" not in p.parts and _python_blocks(p))


def _python_blocks(page: Path) -> list[tuple[int, str]]:
    text = page.read_text(encoding="utf-8")
    out = []
    for m in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
        out.append((text.count("\n", 0, m.start()) + 2, m.group(1)))
    return out


def test_the_docs_have_python_examples():
    names = {p.relative_to(ROOT).as_posix() for p in _pages()}
    assert {"docs/guide/tpl.md", "docs/guide/fran.md", "docs/guide/discounted.md"} <= names, names


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_documented_python_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict = {"__name__": "__docs__"}
    for line, code in _python_blocks(page):
        if code.lstrip().startswith(">>>"):  # a doctest-style block: run its statements
            code = "\n".join(ln[4:] for ln in code.splitlines() if ln.startswith((">>> ", "... ")))
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                exec(compile(code, f"{page.name}:{line}", "exec"), namespace)
        except Exception as exc:  # noqa: BLE001 - report which block failed, with the error
            pytest.fail(f"{page.relative_to(ROOT)} line {line}: {type(exc).__name__}: {exc}")
    defined = [k for k in namespace if not k.startswith("__")]
    assert defined, f"{page.relative_to(ROOT)}: its Python blocks define nothing"
    assert os.getcwd() == str(tmp_path)
