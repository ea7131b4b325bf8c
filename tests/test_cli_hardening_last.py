"""Issue 26: the last bad or extreme inputs, run through the installed ``policyopt`` as a subprocess.

Each case ends in a valid result (exit 0, strict JSON with --json, nothing on stderr unless a stated warning) or in
exactly one line on stderr with exit code 2 — never a traceback, never exit 1, never a hang.
"""

from __future__ import annotations

import json
import subprocess

import mpmath as mp
import pytest

from _cli import POLICYOPT, strict_json


def run(*argv, timeout=120, **kw):
    proc = subprocess.run([POLICYOPT, *map(str, argv)], capture_output=True, text=True, timeout=timeout, **kw)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def refused(*argv, match: str, timeout=120, **kw):
    """Exit 2 with exactly one line on stderr that contains `match`."""
    proc = run(*argv, timeout=timeout, **kw)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.count("\n") == 1 and proc.stderr.endswith("\n"), proc.stderr
    assert match in proc.stderr, proc.stderr
    return proc.stderr


def ok_json(*argv, timeout=120, **kw):
    proc = run(*argv, "--json", timeout=timeout, **kw)
    assert proc.returncode == 0, proc.stderr
    return strict_json(proc.stdout), proc.stderr


# ------------------------------------------------------------------ 2. large ε in tpl, subnormal inputs


@pytest.mark.parametrize("eps,horizon", [(1000, 10), (700, 50), (300, 50)])
def test_tpl_large_epsilon_finite_supremum(eps, horizon):
    """Theorem 11's supremum is finite for these chains at any ε; it stays finite and rounded up past ε ≈ 700."""
    out, err = ok_json("tpl", "--pb", "0.8,0.2;0.1,0.9", "--epsilon", eps, "--horizon", horizon)
    assert err == ""
    import _mp_refs as R
    exact = R.supremum([[0.8, 0.2], [0.1, 0.9]], eps)
    assert mp.isfinite(exact) and mp.mpf(out["supremum"]["bpl"]) >= exact
    assert out["supremum"]["bpl"] - exact < 1e-6 * exact


def test_tpl_bundled_epsilon_700_json():
    out, err = ok_json("tpl", "--epsilon", 700, "--horizon", 50, timeout=300)
    assert isinstance(out["supremum"]["tpl"], float) and out["supremum"]["tpl"] >= out["max_tpl"]


def test_tpl_subnormal_matrix_row(tmp_path):
    m = tmp_path / "m.csv"
    m.write_text("0.99999999999999,1e-14\n1e-320,1\n")
    out, err = ok_json("tpl", "--pb", m, "--epsilon", 1, "--horizon", 5)
    import _mp_refs as R
    exact = R.supremum([[0.99999999999999, 1e-14], [1e-320, 1.0]], 1.0)
    assert mp.mpf(out["supremum"]["bpl"]) >= exact


def test_discounted_hyperbolic_subnormal_beta():
    out, err = ok_json("discounted", "--notion", "hyperbolic", "--beta", "1e-320", "--epsilon", 1, "--horizon", 10)
    assert out["total_variance"] is None and any("overflows a float" in w for w in out["warnings"])
    assert all(isinstance(b, float) and b > 0 for b in out["schedule"])
