"""Every notebook in ``notebooks/`` runs top to bottom in a fresh kernel (nbclient) and prints its expected line.

A notebook declares the line it must print in its metadata, ``{"policyopt": {"expect": "..."}}``; the notebooks
assert the papers' numbers themselves, so a failing assertion fails the cell and this test.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).parent.parent
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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    nb = nbformat.read(path, as_version=4)
    expect = nb.metadata.get("policyopt", {}).get("expect")
    assert expect, f"{path.name}: metadata.policyopt.expect (a line the notebook must print) is missing"
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    assert expect in _stdout(nb)
