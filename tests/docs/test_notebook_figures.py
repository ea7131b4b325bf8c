"""The stored notebooks carry their figures (GitHub and the docs show stored outputs) and the docs embed them.

``make notebooks`` (docs/store_notebook_outputs.py) executes each notebook with matplotlib's inline backend and
stores its outputs; ``make docs`` renders the stored outputs with myst-nb (no execution) and runs
docs/check_notebook_figures.py on the build.  Here: every notebook that uses matplotlib stores at least one real PNG
figure and the outputs of a successful run (its expected line, no error); a Sphinx + myst-nb build of the notebooks
(this repository's conf.py settings for notebooks) embeds every stored figure as an <img> of a PNG file.
"""

from __future__ import annotations

import base64
import struct
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))
from check_notebook_figures import PNG_SIGNATURE, check, page_images, stored_pngs  # noqa: E402
from store_notebook_outputs import plots  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_every_notebook_plots():
    # all notebooks draw figures today; if one stops, the figure tests below must not silently shrink
    assert NOTEBOOKS and all(plots(nbformat.read(p, as_version=4)) for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_notebook_carries_its_figures(path):
    nb = nbformat.read(path, as_version=4)
    pngs = stored_pngs(path)
    assert pngs, f"{path.name} uses matplotlib but stores no image/png output: run `make notebooks`"
    for data in pngs:
        width, height = _png_size(data)
        assert width >= 200 and height >= 150 and len(data) > 5000, (width, height, len(data))
    outputs = [out for c in nb.cells if c.cell_type == "code" for out in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"], f"{path.name} stores an error output"
    stdout = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream" and o.get("name") == "stdout")
    assert nb.metadata["policyopt"]["expect"] in stdout, f"{path.name}: stored outputs are not of a successful run"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code), f"{path.name}: a code cell was not executed"
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), "stored outputs are not of one top-to-bottom run"


def test_check_finds_a_missing_figure(tmp_path):
    # the docs check itself: a page without the image, or with a broken one, is reported (it can fail)
    nb_path = NOTEBOOKS[0]
    n = len(stored_pngs(nb_path))
    html = tmp_path / "html"
    (html / "_notebooks").mkdir(parents=True)
    (html / "_images").mkdir()
    page = html / "_notebooks" / (nb_path.stem + ".html")
    problems, _ = check(html, [nb_path])
    assert problems and "has no page" in problems[0]
    page.write_text("<html><body><p>no figure</p><img src='../_images/x.png'></body></html>", encoding="utf-8")
    problems, _ = check(html, [nb_path])
    assert problems == [f"{nb_path.name}: stores {n} figure(s) but {page} embeds 0 PNG image(s)"]
    (html / "_images" / "x.png").write_bytes(stored_pngs(nb_path)[0])
    page.write_text("".join("<img src='../_images/x.png'>" for _ in range(n)), encoding="utf-8")
    assert check(html, [nb_path]) == ([], n)


def test_docs_build_embeds_the_figures(tmp_path):
    src = tmp_path / "src"
    (src / "_notebooks").mkdir(parents=True)
    for p in NOTEBOOKS:
        (src / "_notebooks" / p.name).write_bytes(p.read_bytes())
    # the notebook settings of docs/conf.py: myst-nb renders the stored outputs, never executes
    (src / "conf.py").write_text(
        'extensions = ["myst_nb"]\nnb_execution_mode = "off"\nmyst_enable_extensions = ["dollarmath", "amsmath"]\n'
        'exclude_patterns = ["_build"]\n', encoding="utf-8")
    toc = "\n".join(f"_notebooks/{p.stem}" for p in NOTEBOOKS)
    (src / "index.md").write_text(f"# Notebooks\n\n```{{toctree}}\n{toc}\n```\n", encoding="utf-8")
    out = tmp_path / "html"
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", str(src), str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    problems, found = check(out, NOTEBOOKS)
    assert problems == []
    assert found >= sum(len(stored_pngs(p)) for p in NOTEBOOKS)
    # and the figure of the first notebook is the stored PNG itself, copied into the build
    first = page_images(out / "_notebooks" / (NOTEBOOKS[0].stem + ".html"))
    copied = [(out / "_notebooks" / s).resolve().read_bytes() for s in first if s.endswith(".png")]
    assert stored_pngs(NOTEBOOKS[0])[0] in copied
