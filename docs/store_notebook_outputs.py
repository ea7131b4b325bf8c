"""Execute the notebooks and store their outputs in place, for the documentation (``make docs`` does not run them).

Usage: ``.venv/bin/python docs/store_notebook_outputs.py [notebooks/NAME.ipynb ...]`` (default: every notebook).
Each notebook runs top to bottom in a fresh kernel from the repository root, exactly as ``tests/test_notebooks.py``
runs it; a failing cell stops the script with the error and leaves that file unchanged.  Rerun it after changing a
notebook so that the rendered page shows current numbers and figures.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def store(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    for cell in nb.cells:  # keep the stored files stable: no execution timestamps
        cell.get("metadata", {}).pop("execution", None)
    nbformat.write(nb, path)
    print(f"{path.relative_to(ROOT)}: outputs stored ({time.perf_counter() - start:.1f} s)")


def main(argv: list[str]) -> int:
    paths = [Path(a).resolve() for a in argv] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    for path in paths:
        store(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
