"""The README's Python quick start is a doctest: it runs as printed and shows what it prints."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_readme_quick_start_runs_as_printed():
    blocks = _python_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) == 1, f"README.md must hold exactly one ```python block (the quick start), found {len(blocks)}"
    test = doctest.DocTestParser().get_doctest(blocks[0], {}, "README quick start", str(README), 0)
    assert 3 <= len(test.examples) <= 5, f"the quick start has {len(test.examples)} statements; five at most"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted == len(test.examples) and result.failed == 0


def test_readme_stays_short():
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    # the pasted demo output is program output (refreshed when the demo changes): exempt from the width limit
    demo = re.search(r"^## What `make demo` prints\n+```text\n(.*?)^```", text, flags=re.S | re.M)
    assert demo, "README.md must show the demo's output in a ```text block under '## What `make demo` prints'"
    first = text[: demo.start(1)].count("\n") + 1
    exempt = range(first, first + demo.group(1).count("\n"))
    long = [(i, len(line)) for i, line in enumerate(lines, 1) if len(line) > 120 and i not in exempt]
    assert not long, f"README.md lines over 120 characters (line, length): {long}"


def _readme_command_table() -> list[str]:
    """The ``policyopt …`` examples of the README's command table (section "Commands"), in order."""
    text = README.read_text(encoding="utf-8")
    section = re.search(r"^## Commands\n(.*?)^## ", text, flags=re.S | re.M)
    assert section, "README.md has no '## Commands' section"
    return re.findall(r"^\| `(policyopt [^`]+)` \|", section.group(1), flags=re.M)


def test_readme_first_schedule_and_fran_examples_show_a_trade_off():
    """The first `schedule` and `fran` examples a user runs return `optimal` with the optimum inside the search box
    (aging that pays without reaching the age limit), not `unbounded` at the search limit."""
    import shlex
    import subprocess
    import sys

    sys.path.insert(0, str(README.parent / "tests"))
    from _cli import POLICYOPT, strict_json

    table = _readme_command_table()
    first = {cmd: next(c for c in table if c.split()[1] == cmd) for cmd in ("schedule", "fran")}
    outs = {}
    for cmd, line in first.items():
        proc = subprocess.run([POLICYOPT, *shlex.split(line)[1:], "--json"], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
        outs[cmd] = strict_json(proc.stdout)
        assert outs[cmd]["status"] == "optimal", (line, outs[cmd]["status"])
    assert 0 < outs["schedule"]["A"] < 168, outs["schedule"]["A"]  # aging pays, and the age limit does not bind
    assert 0 < max(outs["fran"]["aoi"]) < 10, outs["fran"]["aoi"]
