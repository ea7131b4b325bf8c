"""Printed reports never contradict themselves: no backwards range, no "—"/"inf" where a sentence should say why, counts
agree with their nouns, and a chain's value range is not called data.  The formatting layer's helpers
(:func:`policyopt.formatting.fmt_range`, :func:`~policyopt.formatting.fmt_count`) and its check
(:func:`~policyopt.formatting.text_problems`, applied by the reports through ``check_text``) are tested first, then
the commands that printed such text (issue 27) are run as a user runs them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from _cli import strict_json
import _warm_cli  # noqa: E402
from policyopt.formatting import check_text, fmt_band, fmt_count, fmt_epsilon_c, fmt_range, fmt_span, text_problems

READINGS = str(Path(__file__).resolve().parents[1] / "examples" / "readings.csv")


def test_fmt_count_agrees_with_the_number():
    assert [fmt_count(n, "slot") for n in (0, 1, 2, 24)] == ["0 slots", "1 slot", "2 slots", "24 slots"]
    assert fmt_count(1.0, "release") == "1 release"
    assert fmt_count(2, "entry", "entries") == "2 entries"
    with pytest.raises(ValueError, match="whole number"):
        fmt_count(1.5, "slot")


def test_fmt_epsilon_c_six_digits_rounded_up():
    """ε_C in text: 6 significant digits, never below the float (checked exactly with Decimal); JSON keeps it all."""
    from decimal import Decimal

    assert fmt_epsilon_c(0.0035727500523145507) == "0.00357276"   # the demo's ε_C (was printed with 17 digits)
    assert fmt_epsilon_c(0.28648448871654103) == "0.286485"
    assert fmt_epsilon_c(0.5) == "0.5" and fmt_epsilon_c(1) == "1" and fmt_epsilon_c(50.0) == "50"
    assert fmt_epsilon_c(0.0) == "0" and fmt_epsilon_c(None) == "—"
    assert fmt_epsilon_c(1.0000000000000002) == "1.00001"          # just above a round number: up, not "1"
    rng = np.random.default_rng(33)
    for x in np.exp(rng.uniform(np.log(1e-12), np.log(700.0), 2000)):
        shown = Decimal(fmt_epsilon_c(float(x)))
        exact = Decimal(repr(float(x)))
        assert exact <= shown < exact + Decimal(1).scaleb(exact.adjusted() - 5), (x, shown)
        assert len(shown.normalize().as_tuple().digits) <= 6


def test_fmt_range_is_never_backwards_or_empty():
    assert fmt_range(1.5647e-05, 1.54329e-05) is None                 # the --robust 0.9 case of issue 27
    assert fmt_range(1.43e30, 333.0) is None                           # the 200-state chain of issue 27
    assert fmt_range(2.0, 2.0) is None and fmt_range(None, 1.0) is None and fmt_range(0.1, None) is None
    assert fmt_range(float("inf"), 1.0) is None and fmt_range(float("nan"), 1.0) is None
    assert fmt_range(0.0739039, 0.1) == "between 0.0739 and 0.1"
    # ends that agree to 4 digits get more digits, so they never print equal
    assert fmt_range(1.56471e-5, 1.56479e-5, unit=" kWh^2") == "between 1.5647e-05 kWh^2 and 1.5648e-05 kWh^2"
    got = fmt_range(1.0, 2.0, low_note=" (low)", high_note=" (high)")
    assert got == "between 1 (low) and 2 (high)"


def test_fmt_span_never_prints_equal_ends():
    assert fmt_span(0.0399, 0.06777) == "0.0399–0.06777"
    assert fmt_span(0.0361, 0.0361) is None                            # no width: the caller says why (issue 33)
    assert fmt_span(0.036121, 0.036124) == "0.036121–0.036124"          # 4 digits would print 0.03612–0.03612
    assert fmt_span(0.0361231, 0.0361234) == "0.0361231–0.0361234"
    assert fmt_span(0.949, 0.951, digits=3, scale=100.0) == "94.9–95.1"
    with pytest.raises(ValueError, match="low <= high"):
        fmt_span(0.2, 0.1)
    with pytest.raises(ValueError, match="finite"):
        fmt_span(float("nan"), 0.1)
    assert fmt_band(0.898, 0.914, digits=3) == "0.898–0.914"
    assert fmt_band(0.0139, 0.0139) == "0.0139 in every replicate"  # a band of no width, in words
    assert text_problems("95% band " + fmt_band(0.0139, 0.0139)) == []


@pytest.mark.parametrize("text,kind", [
    # the backtest line of issue 33 (an interval of no width printed as a range), and its coverage band
    ("realised MSE 0.0361 kWh^2 (95% interval 0.0361–0.0361) vs f̄ = 0.0361 kWh^2", "equal or backwards ends"),
    ("covered 95.0 % of them (95% band 95.0–95.0 %)", "equal or backwards ends"),
    ("Δ(t) at lag 1: held-out 0.906 (95% band 0.914–0.898)", "equal or backwards ends"),
    ("trade-off   : a finite optimum exists for f̄ between 1.5647e-05 kWh^2 (smallest) and 1.54329e-05 kWh^2", "backwards"),
    ("a finite optimum exists for f̄ between 1.43e+30 … and 333", "backwards"),
    ("credible    : posterior median ε* = — nats, 95 % upper = 1 nats", "'—'"),
    ("credible    : posterior median ε* = 2 nats, 95 % upper = inf nats", "inf/nan"),
    ("peak risk   : ε* = nan nats", "inf/nan"),
    ("vs fresh    : passes this schedule's ε* after 1 slots and keeps growing", "count of 1"),
])
def test_text_problems_finds_each_contradiction(text, kind):
    problems = text_problems(text)
    assert len(problems) == 1 and kind in problems[0], problems
    with pytest.raises(ValueError, match="contradicts itself"):
        check_text(text)


def test_text_problems_leaves_sentences_alone():
    ok = ("status      : infeasible\nmeaning     : aging does not pay: the staleness grows — after 7 slots it reaches "
          "91%; lies inside the trade-off range (between 0.008017 and 0.02); infimum, information, 1 slot, 11 slots; "
          "the chain model (48)–(49); lags 1–3, 7, 9–10; 95% band 0.898–0.914; dated 2022-07-01")
    assert text_problems(ok) == []
    assert check_text(ok) == ok


def _run(*args, timeout=300):
    proc = _warm_cli.run(args, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    assert text_problems(proc.stdout) == [], proc.stdout
    return proc.stdout


def _line(text, key):
    return next(line for line in text.splitlines() if line.startswith(key))


def test_no_tradeoff_is_a_sentence_and_an_unbounded_posterior_is_explained():
    """Four quantile states of the shipped 4-home example: the smallest MSE under (31) lies above the staleness limit
    (the range printed backwards before) and (31) fails for most posterior draws (printed "— nats … inf nats")."""
    text = _run("schedule", "--data", READINGS, "--states", "4", "--max-penalty", "0.5", "--penalty", "chain")
    assert _line(text, "trade-off").startswith("trade-off   : none — the smallest MSE reachable under (31), 0.499676, "
                                               "is not below the staleness limit 0.477579")
    assert "between" not in text
    cred = _line(text, "credible")
    assert "no finite posterior median of ε*" in cred and "condition (31) fails for 88.0% of the posterior draws" in cred
    out = strict_json(_warm_cli.run(["schedule", "--data", READINGS, "--states", "4", "--penalty", "chain",
                                     "--max-penalty", "0.5", "--json"], timeout=300).stdout)
    assert out["credible"]["median"] is None and out["model"]["value_range_source"] == "data"
    assert "(from the data (NOT private))" in _line(text, "value range")


def test_a_chain_range_is_the_models_and_counts_agree():
    text = _run("schedule", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.2")
    assert _line(text, "value range") .startswith("value range : [-1, 1] (the model's state values);")
    assert "NOT private" not in text
    assert "after 1 slot and keeps growing (7.58947 nats after 24 slots)" in _line(text, "vs fresh")
    declared = _run("schedule", "--chain", "two-state:p=0.1,q=0.1", "--value-range=-2:2", "--max-penalty", "0.2")
    assert "(declared, public)" in _line(declared, "value range")


def test_a_200_state_chain_that_cannot_forget_in_the_box(tmp_path):
    """A 200-state ring (|i − j| ≤ 1 steps): Δ(S̄) = 1 for S̄ ≤ 6, so (31) admits no ε_C: sentences, not "—"."""
    n = 200
    P = 0.9 * np.eye(n) + 0.05 * np.roll(np.eye(n), 1, axis=1) + 0.05 * np.roll(np.eye(n), -1, axis=1)
    path = tmp_path / "ring200.csv"
    np.savetxt(path, P, delimiter=",")
    text = _run("schedule", "--matrix", path, "--max-age", "6", "--max-interval", "6")
    assert _line(text, "trade-off") == ("trade-off   : none in this box — Δ(S̄) = 1 for every S̄ ≤ S_MAX, so no budget "
                                        "ε_C > 0 meets (31)")
    assert _line(text, "min penalty").startswith("min penalty : none — ")


def test_a_200_state_chain_whose_floor_lies_above_the_staleness_limit(tmp_path):
    rng = np.random.default_rng(0)
    n = 200
    P = 0.2 * rng.dirichlet(np.full(n, 0.05), size=n) + 0.8 * np.eye(n)
    path = tmp_path / "m200.csv"
    np.savetxt(path, P, delimiter=",")
    text = _run("schedule", "--matrix", path, "--max-age", "6", "--max-interval", "6")
    assert _line(text, "trade-off").startswith("trade-off   : none — the smallest MSE reachable under (31), ")
    assert "a trade-off exists" not in text and "between" not in text


def test_robust_deployment_too_small_for_a_tradeoff():
    """The bundled pilot deployed to 10⁴ homes with --robust 0.9: the floor under (31) exceeds the staleness limit."""
    text = _run("schedule", "--robust", "0.9", "--users", "10000", "--penalty", "chain")
    assert _line(text, "trade-off").startswith("trade-off   : none — ")
    assert "no f̄ has a finite optimum" in text and "between" not in text


def test_result_objects_have_short_readable_reprs():
    """`repr` of a result is a few lines with the outcome first, not a dump of every array (issue 27: the budget
    allocation's Solution printed about 3 KB)."""
    import policyopt as po
    from policyopt import Population, two_state_chain
    from policyopt.privacy.age_dependent import compose

    P = np.array([[0.8, 0.2], [0.2, 0.8]])
    sol = po.BudgetAllocationProblem(P, P, 1.0, 24).solve()
    text = repr(sol)
    assert len(text) < 700 and text.startswith("Solution(feasible, objective = ")
    assert "budgets: array(shape=(24,), " in text and "values={alpha_B, alpha_F" in text
    report = po.design_schedule(Population([two_state_chain(0.1, 0.1)], [100]), max_penalty=0.0195)
    head = repr(report).splitlines()[0]
    assert head.startswith("ScheduleReport(  # optimal: A = 3, S̄ = 5, ε_C = 0.46534888581") and "ε* = 0.491352 nats" in head
    assert "solution=Solution(optimal, objective 0.49135" in repr(report) and len(repr(report)) < 800
    fran = repr(po.design_fran(po.two_binary_cmc(0.1, 0.1, 0.5), 0.4))
    assert fran.startswith("FRANReport(  # optimal: AoI [3, 3], ε_S = 1.83412 nats (rounded up)") and len(fran) < 400
    comp = compose([0, 4, 8], 0, 0.5, two_state_chain(0.1, 0.1), horizon=12)
    assert "risk=array(shape=(13,), " in repr(comp) and len(repr(comp)) < 650
    fitted = po.fit_population(po.load_citylearn(), 3, value_range=(0, 48))
    assert "(17 keys)" in repr(fitted) and len(repr(fitted)) < 800


def test_temporal_leakage_repr_is_short():
    """TemporalLeakage leads with T, the users and max TPL rounded up (it printed 1.8 KB of arrays)."""
    import policyopt as po

    P = [[0.8, 0.2], [0.1, 0.9]]
    res = po.leakage(P, P, [0.1] * 50)
    text = repr(res)
    assert text.startswith("TemporalLeakage(  # 50 steps, 1 user(s), max TPL ") and len(text) < 600
    head = text.splitlines()[0]
    printed = float(head.split("max TPL ")[1].split(" nats")[0])
    assert printed >= res.tpl_level  # rounded up
    assert "bpl=array(shape=(50,), " in text


def test_the_demo_defines_its_jargon_at_first_use():
    """Issue 33 item 8: λ*, condition (31) and the peak AoI are said in words where the demo's text first uses them
    (the glossary, docs/glossary.md, has each at length)."""
    text = _run("schedule", "--privacy", "model-free", "--max-rmse", "0.19", "--max-age", "24", "--max-interval", "24")
    for term, definition in (("λ*", "λ*, the chains' spectral rate"), ("(31)", "(31), ε_C < −ln Δ(S̄)"),
                             ("peak AoI", "peak AoI 0 slots (the published data's largest age, A + S̄ − 1)")):
        first = text.index(term)
        assert text.startswith(definition, first), (term, text[first - 40:first + 80])
