"""Counts of one in printed text: ``1 release``, not ``1 releases``.

Every report passes its text through :func:`policyopt.formatting.check_text`, which turns a count of 1 with a plural
noun into an internal error (exit code 1) rather than printing it.  These runs hit a count of one where the text
used a bare ``{n} nouns`` and crashed before the fix.
"""

from __future__ import annotations

from _cli import run_cli
from policyopt.formatting import text_problems


def test_discounted_over_one_release():
    text = run_cli("discounted", "--notion", "exponential", "--epsilon", "1", "--alpha", "0.9", "--horizon", "1").stdout
    assert text.startswith("policyopt discounted: exponential (ε = 1 nats, alpha = 0.9), 1 release, ")
    assert "\nschedule   : b_1 = 58.8235 kWh\n" in text  # b_1 once, not three times
    assert "over 1 day (first" in text and text_problems(text) == []
    three = run_cli("discounted", "--notion", "exponential", "--epsilon", "1", "--alpha", "0.9", "--horizon", "365").stdout
    assert "\nschedule   : b_1 = 58.8235, b_183 = 58.8235, b_365 = 58.8235 kWh\n" in three


def test_sweep_with_one_value_of_a_varied_parameter(tmp_path):
    text = run_cli("sweep", "--vary", "users=1000", "--max-penalty", "0.05", "--out", tmp_path / "s.csv").stdout
    assert "\ngrid         : 1 f̄ value (0.05) × 1 value of users = 1 point (serial)\n" in text
    assert text_problems(text) == []
