"""A local Dask cluster larger than the machine is refused in one line (issue 33, item 12: `check-model --workers 1000`
hung starting 1000 worker processes)."""

from __future__ import annotations

import os

import pytest

from tests._cli import run_any


@pytest.mark.parametrize("cmd", ["check-model", "schedule", "publish"])
def test_too_many_local_workers_is_a_one_line_error(cmd, tmp_path):
    limit = 4 * (os.cpu_count() or 1)
    res = run_any(cmd, "--workers", 1000, "--data", tmp_path / "x.parquet", timeout=60)
    assert res.returncode == 2 and res.stdout == "" and res.stderr.count("\n") == 1
    assert f"--workers must be ≤ {limit}, got '1000'" in res.stderr
