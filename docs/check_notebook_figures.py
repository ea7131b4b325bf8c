"""Check that a documentation build embeds the figures stored in the notebooks (run by ``make docs``).

Usage: ``.venv/bin/python docs/check_notebook_figures.py [docs/_build/html]``.  For every notebook in ``notebooks/``
that stores ``image/png`` outputs (``make notebooks``), its page ``_notebooks/NAME.html`` must exist and hold at
least as many ``<img>`` elements as the notebook stores figures, each pointing to a PNG file of the build.  Prints
one line per problem and exits 1 if there is any, else prints a summary and exits 0.
"""

from __future__ import annotations

import base64
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat

ROOT = Path(__file__).resolve().parents[1]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def stored_pngs(path: Path) -> list[bytes]:
    """The decoded ``image/png`` outputs stored in the notebook at `path`, in cell order."""
    nb = nbformat.read(path, as_version=4)
    return [base64.b64decode(out["data"]["image/png"]) for c in nb.cells if c.cell_type == "code"
            for out in c.get("outputs", []) if "image/png" in out.get("data", {})]


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sources: list[str] = []

    def handle_starttag(self, tag, attrs):
        """Record the ``src`` of every ``<img>`` tag."""
        if tag == "img":
            self.sources.append(dict(attrs).get("src") or "")


def page_images(page: Path) -> list[str]:
    """``src`` of every ``<img>`` of the HTML file `page`."""
    parser = _Images()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.sources


def check(html_dir: Path, notebooks: list[Path]) -> tuple[list[str], int]:
    """(problems, figures found) of the build in `html_dir` for the given notebooks."""
    problems, found = [], 0
    for nb_path in notebooks:
        want = len(stored_pngs(nb_path))
        if want == 0:
            continue
        page = html_dir / "_notebooks" / (nb_path.stem + ".html")
        if not page.is_file():
            problems.append(f"{nb_path.name}: stores {want} figure(s) but the build has no page {page}")
            continue
        good = 0
        for src in page_images(page):
            parts = urlsplit(src)
            if parts.scheme == "data":
                good += src.startswith("data:image/png;base64,")
                continue
            if parts.scheme or parts.netloc:
                continue  # external (a theme logo, a badge): not a notebook figure
            target = (page.parent / unquote(parts.path)).resolve()
            if target.is_file() and target.read_bytes()[:8] == PNG_SIGNATURE:
                good += 1
        found += good
        if good < want:
            problems.append(f"{nb_path.name}: stores {want} figure(s) but {page} embeds {good} PNG image(s)")
    return problems, found


def main(argv: list[str]) -> int:
    """Check the built HTML in ``argv[0]`` (default docs/_build/html); print each problem, return 1 if any, else 0."""
    html_dir = Path(argv[0]) if argv else ROOT / "docs" / "_build" / "html"
    problems, found = check(html_dir, sorted((ROOT / "notebooks").glob("*.ipynb")))
    for line in problems:
        print(f"check_notebook_figures: {line}")
    if problems:
        return 1
    print(f"check_notebook_figures: {found} notebook figure(s) embedded in {html_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
