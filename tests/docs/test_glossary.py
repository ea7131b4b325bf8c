"""The glossary defines the jargon the reports print (docs/glossary.md: one bold term per definition list entry)."""

from __future__ import annotations

import re
from pathlib import Path

GLOSSARY = Path(__file__).resolve().parents[2] / "docs" / "glossary.md"

#: Terms the text reports use without defining them on the spot (schedule, publish, ledger, tpl).
JARGON = ["slot", "A", "S̄", "ε_C", "epoch", "AoI", "peak AoI", "ε(t)", "ε*", "peak risk", "Δ(t)", "Δ̃(t)", "Δ_Z(t)",
          "λ*", "envelope", "condition (31)", "(ε, δ)-DP", "pure ε", "δ", "PLD accountant", "w-event", "horizon",
          "horizon design", "model-based", "model-free", "BPL", "FPL", "TPL", "α-DP_T", "f̄", "MSE penalty",
          "staleness", "Δf", "value range", "I", "pilot", "deployment", "trade-off range", "phase period",
          "model check", "refuted", "passed", "unchecked", "assumed", "credible", "robust", "backtest", "ledger",
          "trial", "override"]


def _defined() -> set:
    """Every term the glossary sets in bold (an entry's opening line, or a term defined inside an entry), split at
    commas, slashes and semicolons outside parentheses (``**Δf, value range, I**`` defines three)."""
    terms = set()
    text = GLOSSARY.read_text(encoding="utf-8")
    for raw in re.findall(r"\*\*((?:\\\*|[^*])+)\*\*", text):
        bold = raw.replace("\\*", "*")
        terms.add(bold)
        terms.update(t.strip() for t in re.split(r"[;,/]\s*(?![^()]*\))", bold) if t.strip())
    return terms


def test_every_jargon_term_is_defined():
    missing = [t for t in JARGON if t not in _defined()]
    assert not missing, f"docs/glossary.md defines no entry for {missing}"


def test_the_glossary_is_in_the_docs_and_cites_its_sources():
    index = (GLOSSARY.parent / "index.md").read_text(encoding="utf-8")
    assert "\nglossary\n" in index
    text = GLOSSARY.read_text(encoding="utf-8")
    for cite in ("eq. (12)", "eq. (24)", "eq. (30)", "Theorem 3", "Lemma 3", "eq. (38)", "Dwork & Roth 2014",
                 "Kellaris et al., PVLDB 2014", "Cao et al. 2019", "eqs. (48)–(49)"):
        assert cite in text, cite
