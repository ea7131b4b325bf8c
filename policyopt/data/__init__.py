"""Real data shipped with policyopt (see ``PROVENANCE.md`` in this folder)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["load_citylearn", "CITYLEARN_PATH"]

#: Path of the bundled CityLearn 2022 equipment-load file.
CITYLEARN_PATH = Path(__file__).with_name("citylearn_2022_equipment_kwh.csv.gz")


def load_citylearn():
    """Hourly equipment electricity use of the 17 CityLearn 2022 homes, as a tidy table.

    Returns
    -------
    pandas.DataFrame
        148,920 rows with columns ``user`` (str, ``Building_1`` … ``Building_17``),
        ``time`` (int, hour 0..8759) and ``value`` (float, kWh in that hour).  ``df.attrs["unit"]``
        is ``"kWh"``, which :func:`~policyopt.models.estimation.fit_population` carries into the model.

    Notes
    -----
    Source: ``citylearn==2.1.2`` (MIT licence), column ``Equipment Electric Power [kWh]`` of
    ``citylearn_challenge_2022_phase_all/Building_{1..17}.csv``; provenance and licence
    in ``PROVENANCE.md`` beside this module.
    """
    import pandas as pd

    wide = pd.read_csv(CITYLEARN_PATH, compression="gzip")
    tidy = wide.melt(id_vars="hour", var_name="user", value_name="value").rename(columns={"hour": "time"})
    out = tidy[["user", "time", "value"]].reset_index(drop=True)
    out.attrs["unit"] = "kWh"
    return out
