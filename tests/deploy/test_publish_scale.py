"""The deployment-scale benchmark of `publish --data PARQUET` (tests/benchmarks/bench_publish.bench_meters), small:
3000 synthetic meters, a week of hourly releases, the peak memory of the `policyopt` process measured."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from bench_publish import TARGET_METERS_RSS_MIB, bench_meters  # noqa: E402


def test_a_week_of_hourly_releases_from_parquet_meters(tmp_path):
    r = bench_meters(3000, users_per_file=1000, workdir=tmp_path)
    rep = r["report"]
    assert r["releases"] == 168 and rep["released_total"] == 168 and rep["skipped_total"] == 0
    assert rep["through"] == 167 and rep["last_slot"] == 167 and rep["slot_length"] is None
    # about 1 % of readings are missing: each release is over the meters present at its slot
    assert all(2900 <= row["users"] <= 3000 for row in rep["new_releases"])
    assert 0 < r["peak_rss_mib"] < TARGET_METERS_RSS_MIB and r["readings"] == 3000 * 169
