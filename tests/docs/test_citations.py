"""Papers are cited by authors, title, venue and year, never by paths to files outside the repository or bare file
numbers (``../shared/papers/000_….txt``, ``000``, ``002_f4b…``): a user of a clone cannot resolve those."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SHARED = re.compile(r"\.\./shared|shared/papers")
HASHED = re.compile(r"\b00[0-4]_[0-9a-f]{16}")
# a bare paper number used as a citation; not part of a number such as 0.004, 10,000, 50 000 or 1e-004
BARE = re.compile(r"(?<![\w.,+\-/])(?<!\d[ ,.])00[0-4](?![\w]|[.,]\d)")


def _offences(text: str) -> list[str]:
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for pattern in (SHARED, HASHED, BARE):
            m = pattern.search(line)
            if m:
                found.append(f"line {lineno}: {line.strip()[:100]!r}")
                break
    return found


def _user_visible_files():
    yield from sorted((ROOT / "policyopt").rglob("*.py"))
    yield from sorted((ROOT / "policyopt").rglob("*.md"))
    yield ROOT / "README.md"
    docs = ROOT / "docs"
    if docs.exists():
        for ext in ("*.md", "*.rst", "*.py", "*.txt"):
            yield from sorted(p for p in docs.rglob(ext) if "_build" not in p.parts and "_notebooks" not in p.parts)


def test_patterns_catch_internal_citations_and_spare_numbers():
    for bad in ("see ``../shared/papers/000_2a085da7b331351a.txt``", "(000, eq. 12)", "``004`` eq. (15)",
                "# source: 002, Example 4", "004's bound", "000_2a085da7b331351a.txt, (28)"):
        assert _offences(bad), bad
    for fine in ("0.004", "10,000 users", "T ≤ 50 000", "1e-004", "Zhang et al. (2024), eq. (30)", "t = 1000"):
        assert not _offences(fine), fine


def test_no_internal_citation_in_package_readme_or_docs():
    bad = {}
    for path in _user_visible_files():
        found = _offences(path.read_text(encoding="utf-8"))
        if found:
            bad[str(path.relative_to(ROOT))] = found[:3]
    assert not bad, f"cite papers by authors, title, venue and year (see docs/references.md): {bad}"


def test_no_internal_citation_in_notebook_text():
    bad = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        found = _offences("\n".join("".join(c.get("source", "")) for c in cells))
        if found:
            bad[path.name] = found[:3]
    assert not bad, bad
