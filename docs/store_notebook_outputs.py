"""Execute the notebooks and store their outputs, figures included, in place (``make notebooks``).

Usage: ``make notebooks`` or ``.venv/bin/python docs/store_notebook_outputs.py [notebooks/NAME.ipynb ...]``
(default: every notebook).  Each notebook runs top to bottom in a fresh kernel from the repository root, exactly as
``tests/docs/test_notebooks.py`` runs it, with matplotlib's inline backend, so every figure a cell draws is stored as an
``image/png`` output: GitHub and the documentation (myst-nb renders the stored outputs; ``make docs`` does not
execute notebooks) then show the figures.  A failing cell, or a notebook that imports matplotlib but stores no
figure, stops the script with the error and leaves that file unchanged.  Rerun it after changing a notebook (or
the code it calls) so that the rendered page shows current numbers and figures; ``tests/docs/test_notebook_figures.py``
checks the stored files.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
#: matplotlib backend of the kernels: figures become image/png outputs of the cell that draws them.
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"


def kernel_env() -> dict:
    """The environment of the notebook kernels: this one with the inline matplotlib backend."""
    return {**os.environ, "MPLBACKEND": INLINE_BACKEND}


def execute(nb, timeout: int = 900):
    """Run `nb` (an nbformat notebook, modified in place) in a fresh python3 kernel from the repository root."""
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}})
    client.execute(env=kernel_env())
    return nb


def plots(nb) -> bool:
    """Whether a code cell of `nb` uses matplotlib (so the notebook must carry at least one figure)."""
    return any(c.cell_type == "code" and "matplotlib" in c.source for c in nb.cells)


def png_outputs(nb) -> list[str]:
    """The base64 ``image/png`` payloads of the outputs of `nb`, in cell order."""
    return [out["data"]["image/png"] for c in nb.cells if c.cell_type == "code" for out in c.get("outputs", [])
            if "image/png" in out.get("data", {})]


def store(path: Path) -> None:
    """Execute the notebook at `path` and write it back with its outputs (unchanged if it fails)."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    execute(nb)
    if plots(nb) and not png_outputs(nb):
        raise SystemExit(f"{path.relative_to(ROOT)}: uses matplotlib but no cell displayed a figure; file not written")
    for cell in nb.cells:  # keep the stored files stable: no execution timestamps
        cell.get("metadata", {}).pop("execution", None)
    nbformat.write(nb, path)
    print(f"{path.relative_to(ROOT)}: outputs stored, {len(png_outputs(nb))} figure(s) ({time.perf_counter() - start:.1f} s)")


def main(argv: list[str]) -> int:
    """Re-execute and store the notebooks named in `argv` (default: all of notebooks/); return 0."""
    paths = [Path(a).resolve() for a in argv] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    for path in paths:
        store(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
