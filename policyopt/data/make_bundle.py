"""Rebuild ``citylearn_2022_equipment_kwh.csv.gz`` from the CityLearn 2.1.2 wheel.

Not used at run time (policyopt never downloads anything).  To reproduce the bundle::

    pip download --no-deps citylearn==2.1.2 -d /tmp/cl
    python -m policyopt.data.make_bundle /tmp/cl/CityLearn-2.1.2-py3-none-any.whl

The values are copied verbatim (as the strings in the source CSVs), one column per home.
"""

from __future__ import annotations

import csv
import gzip
import io
import sys
import zipfile
from pathlib import Path

SOURCE_DIR = "citylearn/data/citylearn_challenge_2022_phase_all"
COLUMN = "Equipment Electric Power [kWh]"
N_HOMES = 17
OUT = Path(__file__).with_name("citylearn_2022_equipment_kwh.csv.gz")


def build(wheel: str | Path, out: Path = OUT) -> Path:
    """Extract the equipment-load column of Building_1..17.csv from `wheel` into `out`."""
    columns = []
    with zipfile.ZipFile(wheel) as zf:
        for i in range(1, N_HOMES + 1):
            with zf.open(f"{SOURCE_DIR}/Building_{i}.csv") as fh:
                reader = csv.DictReader(io.TextIOWrapper(fh, encoding="utf-8"))
                columns.append([row[COLUMN] for row in reader])
    n = len(columns[0])
    if any(len(c) != n for c in columns):
        raise ValueError("homes have different numbers of hours")
    text = io.StringIO()
    text.write("hour," + ",".join(f"Building_{i}" for i in range(1, N_HOMES + 1)) + "\n")
    for h in range(n):
        text.write(f"{h}," + ",".join(c[h] for c in columns) + "\n")
    out.write_bytes(gzip.compress(text.getvalue().encode(), compresslevel=9, mtime=0))
    return out


if __name__ == "__main__":  # pragma: no cover
    print(build(sys.argv[1]))
