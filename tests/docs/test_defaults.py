"""The defaults the user guides state for command-line options are the defaults of the command (its ``--help``).

Each guide's option table (rows ``| `--option …` | meaning | [default] |``) is read; a stated default is the third
column of a table with a *default* column, or a ``(default X)`` / ``X (default)`` phrase in the meaning.  The
command's default is the ``default …`` clause of the option's help text (what ``policyopt CMD --help`` prints,
taken from the parser itself) or, without such a clause, the argparse default.  The numbers (and, for choices, the
words) of both must agree: every number the guide states is in the help, and every number of the help's default
clause is in the guide.  A stated default for an option the command does not have is a failure too.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from policyopt.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
#: The commands each guide documents (an option is looked up in the first that has it).
GUIDES = {"schedule.md": ["schedule"], "sweep.md": ["sweep", "schedule"], "fran.md": ["fran"],
          "discounted.md": ["discounted"], "tpl.md": ["tpl", "tpl-budget"]}
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.])")


def _subcommands() -> dict:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def _numbers(text: str) -> set:
    """The numbers of a default's text, without limits (``at most N`` is a bound on the value, not its default)."""
    text = re.sub(r"\(?at most [^,;)]*\)?", "", text.replace("10⁵", "100000").replace("kWh²", "").replace("kWh^2", ""))
    return {float(x) for x in _NUMBER.findall(text)}


def stated_defaults(page: Path) -> list[tuple[int, str, str]]:
    """(line, option, stated default) of every option row of `page`'s tables that states a default."""
    out, has_default_col = [], False
    for i, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("| option"):
            has_default_col = line.rstrip().rstrip("|").split("|")[-1].strip() == "default"
            continue
        m = re.match(r"^\| `(--[\w-]+)[^`]*`", line)
        if not m:
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        meaning = cells[1] if len(cells) > 1 else ""
        stated = None
        if has_default_col and len(cells) >= 3 and cells[-1] and cells[-1] not in ("", "none", "off", "required"):
            stated = cells[-1]
        else:
            d = re.search(r"\(default ([^);,]*)", meaning) or re.search(r"`([\w-]+)` \(default\)", meaning)
            if d:
                stated = d.group(1)
        if stated:
            out.append((i, m.group(1), stated))
    return out


def command_default(commands: list[str], option: str) -> tuple[str, str] | None:
    """(command, default text) of `option`: the help's ``default …`` clause, else the argparse default."""
    subs = _subcommands()
    for cmd in commands:
        for action in subs[cmd]._actions:
            if option in action.option_strings:
                helptext = (action.help or "") % {**vars(action), "default": action.default} if action.help else ""
                m = re.search(r"\(?default:? ([^;)]*(?:\([^)]*\))?[^;)]*)", helptext)
                if m:
                    return cmd, m.group(1)
                return cmd, "" if action.default in (None, False) else str(action.default)
    return None


CASES = [(page, line, option, stated) for page in sorted(GUIDES)
         for line, option, stated in stated_defaults(ROOT / "docs" / "guide" / page)]


def test_the_guides_state_defaults():
    assert len(CASES) >= 12, CASES  # schedule and sweep tables, the fran/discounted phrases
    assert {page for page, *_ in CASES} >= {"schedule.md", "sweep.md", "fran.md", "discounted.md"}


@pytest.mark.parametrize("page,line,option,stated", CASES, ids=[f"{p}:{l}:{o}" for p, l, o, _ in CASES])
def test_stated_default_matches_help(page, line, option, stated):
    found = command_default(GUIDES[page], option)
    where = f"docs/guide/{page} line {line}: {option} default {stated!r}"
    assert found is not None, f"{where}: no such option in policyopt {' / '.join(GUIDES[page])}"
    cmd, actual = found
    if "as there" in stated or "as for" in stated:
        return  # the sweep table's model options: "as for policyopt schedule", checked on schedule's page
    doc_numbers, help_numbers = _numbers(stated), _numbers(actual)
    if doc_numbers or help_numbers:
        assert doc_numbers == help_numbers, f"{where}; `policyopt {cmd} --help` says default {actual!r}"
    else:  # a word: a choice such as `exact`, `sound`, `corollary`
        words = set(re.findall(r"[a-z][\w-]+", stated.lower()))
        assert words & set(re.findall(r"[a-z][\w-]+", actual.lower())), (
            f"{where}; `policyopt {cmd} --help` says default {actual!r}")


def test_a_wrong_default_is_caught(tmp_path):
    page = tmp_path / "g.md"
    page.write_text("| option | meaning | default |\n| --- | --- | --- |\n| `--max-age A_MAX` | box | 24 |\n",
                    encoding="utf-8")
    (line, option, stated), = stated_defaults(page)
    cmd, actual = command_default(["schedule"], option)
    assert _numbers(stated) != _numbers(actual) == {168.0}
