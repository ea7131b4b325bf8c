"""Every notebook in ``notebooks/`` runs top to bottom in a fresh kernel (nbclient) and prints its expected line.

A notebook declares the line it must print in its metadata, ``{"policyopt": {"expect": "..."}}``; the notebooks
assert the papers' numbers themselves, so a failing assertion fails the cell and this test.  The kernel runs with
matplotlib's inline backend, as ``make notebooks`` (docs/store_notebook_outputs.py) does when it stores the outputs,
so a notebook that uses matplotlib must also display at least one figure (image/png) here, and the printed text
must equal the stored one (the stored outputs are current).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))
from store_notebook_outputs import execute, plots, png_outputs  # noqa: E402
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no .ipynb"


def _stdout(nb) -> str:
    return "".join(
        out.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream" and out.get("name") == "stdout"
    )


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    nb = nbformat.read(path, as_version=4)
    expect = nb.metadata.get("policyopt", {}).get("expect")
    assert expect, f"{path.name}: metadata.policyopt.expect (a line the notebook must print) is missing"
    stored = _stdout(nb)
    execute(nb)
    assert expect in _stdout(nb)
    # the stored outputs (what GitHub and the docs show) are those of the current code
    assert _stdout(nb) == stored, f"{path.name}: the stored outputs are stale; run `make notebooks`"
    if plots(nb):
        assert png_outputs(nb), f"{path.name} uses matplotlib but displayed no figure under the inline backend"
