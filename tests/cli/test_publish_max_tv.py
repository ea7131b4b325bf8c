"""publish --max-tv empirical[:LEVEL] with --A/--S-bar/--epsilon-c: Δ(t) estimated from the stream's data as
``schedule --max-tv empirical`` does, recorded in the ledger at its creation and kept on reruns; every ε printed
bounds Theorem 3 (Zhang et al. 2024, eq. (25)) recomputed in 50-digit arithmetic with that table."""

from __future__ import annotations

import mpmath
import pytest

from tests._cli import ok_json, refused, run_any
from tests.cli.test_publish_empirical import _reference


def _csv(tmp, users=4, slots=1500):
    """A long CSV of the bundled homes' first `users` homes and `slots` hours (a stream of its own)."""
    import policyopt as po

    df = po.load_citylearn()
    keep = sorted(df["user"].unique())[:users]
    df = df[df["user"].isin(keep) & (df["time"] < slots)].sort_values(["time", "user"])
    path = tmp / "stream.csv"
    df[["user", "time", "value"]].to_csv(path, index=False)
    return path, df


@pytest.mark.slow
def test_publish_max_tv_empirical_directly_on_a_csv(tmp_path):
    import numpy as np

    import policyopt as po
    from policyopt.models.empirical import DEFAULT_MIN_PAIRS
    from tests.studies.test_check_model import loop_direct_max_tv

    path, df = _csv(tmp_path)
    ledger = tmp_path / "d.db"
    args = ("publish", "--data", path, "--A", 3, "--S-bar", 2, "--epsilon-c", 0.3, "--value-range", "0:48",
            "--max-tv", "empirical:0.9", "--ledger", ledger)
    pub = ok_json(*args, "--through", 200)
    assert pub["max_tv_source"] == "empirical:0.9" and pub["model_reason"].startswith("--max-tv")
    led = ok_json("ledger", "--ledger", ledger)
    table = led["max_tv_table"]
    assert len(table) == 3 + 2 - 1 + 1 == 5 and table[0] == 1.0  # Δ̃(0..A + S̄ − 1), here also ≥ max(A, S̄) + 1
    assert all(a >= b for a, b in zip(table, table[1:])) and all(0 <= v <= 1 for v in table)
    assert "Δ(t) estimated from" in led["provenance"]["max_tv_table_from"]
    # the band's upper edge is above the direct estimate: a plain lagged-pair count on the CSV's 12 quantile states
    fit = po.fit_population(df, 12)
    series = [[int(s) for s in fit.quantizer.transform(df.loc[df["user"] == u].sort_values("time")["value"].to_numpy())]
              for u in fit.users]
    for t in range(1, len(table)):
        assert table[t] >= loop_direct_max_tv(series, 12, t, DEFAULT_MIN_PAIRS) - 1e-12
    # every ε printed bounds Theorem 3 recomputed with the table (1 beyond it)
    tab = [mpmath.mpf(v) for v in table]
    ref = _reference(led["releases"], tab)
    assert ref and all(r["risk_at_release"] >= ref[r["slot"]][0] for r in led["releases"] if r["status"] == "released")
    assert all(r["risk_at_release"] >= ref[r["slot"]][0] for r in pub["new_releases"] if r["status"] == "released")
    # a rerun on the grown stream keeps the recorded table (the releases made keep their accounting)
    again = ok_json(*args, "--through", 300)
    assert again["released"] > 0 and ok_json("ledger", "--ledger", ledger)["max_tv_table"] == table
    assert np.isfinite(led["peak_risk"])


@pytest.mark.parametrize("extra, message", [
    (("--schedule", "s.json"), "goes with --A/--S-bar/--epsilon-c"),
    (("--A", 0, "--S-bar", 1, "--epsilon-c", 0.1, "--value-range", "0:48", "--max-tv", "empirical:2"),
     "needs a LEVEL strictly between 0 and 1"),
    (("--A", 0, "--S-bar", 1, "--epsilon-c", 0.1, "--value-range", "0:48", "--model", "two-state:p=0.1,q=0.2"),
     "estimates Δ(t) from readings"),
])
def test_publish_max_tv_bad_uses_one_line_exit_2(tmp_path, extra, message):
    (tmp_path / "s.json").write_text('{"status": "optimal", "A": 0, "S_bar": 1, "epsilon_c": 0.1}', encoding="utf-8")
    extra = tuple(tmp_path / "s.json" if v == "s.json" else v for v in extra)
    if "--max-tv" not in extra:
        extra += ("--max-tv", "empirical")
    res = run_any("publish", *extra, "--ledger", tmp_path / "z.db", "--through", 5)
    refused(res, message)
    assert not (tmp_path / "z.db").exists()
