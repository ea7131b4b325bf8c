"""Every notebook's code cells run top to bottom on a fresh interpreter state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no .ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, capsys):
    nb = json.loads(path.read_text())
    namespace: dict = {"__name__": "__notebook__"}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), f"{path.name}", "exec"), namespace)  # noqa: S102
    out = capsys.readouterr().out
    expected = {  # a line each notebook must print
        "schedule_citylearn.ipynb": "A_max=168",
        "tpl_citylearn.ipynb": "quantification",
    }
    assert expected[path.name] in out
