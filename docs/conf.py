"""Sphinx configuration of the policyopt documentation (``make docs``; warnings are errors)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "policyopt"
author = "the policyopt developers"
copyright = "policyopt developers"  # noqa: A001
release = version = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax 3 copied into the build: formulas render without a network
    "numpydoc",
    "myst_nb",
    "policyopt_docs",
]

# Notebooks are rendered from their stored outputs (make test executes them), never re-run here.
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "amsmath", "deflist"]  # $…$, $$…$$ and LaTeX (MathJax); deflist: the glossary
myst_heading_anchors = 3
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

autodoc_member_order = "bysource"
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
autosummary_generate = False
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()

exclude_patterns = ["_build", "**.ipynb_checkpoints", "_generated"]
templates_path: list[str] = []

html_theme = "pydata_sphinx_theme"
html_title = "policyopt"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_static_path = ["_static"]
html_css_files = ["policyopt.css"]  # long code lines wrap instead of being cut


def _copy_notebooks(app):
    """The notebooks live in notebooks/ (run by the tests); Sphinx reads copies under docs/_notebooks/."""
    target = DOCS / "_notebooks"
    target.mkdir(exist_ok=True)
    wanted = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    for stale in target.glob("*.ipynb"):
        if stale.name not in wanted:
            stale.unlink()
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        dest = target / nb.name
        if not dest.exists() or dest.read_bytes() != nb.read_bytes():
            shutil.copyfile(nb, dest)


def setup(app):
    """Sphinx entry point: copy the stored notebooks into the source tree when the builder starts."""
    app.connect("builder-inited", _copy_notebooks)
