"""``policyopt check-model``: a Markov model of the readings (the fitted chains by default) against the readings — its
Δ(t) against Δ(t) estimated directly from them, and a held-out Markov test.

The work is done by :func:`policyopt.studies.check_model.check_model`; this module parses options and prints.
"""

from __future__ import annotations

from policyopt.app.inputs import (
    BUNDLED_STATES,
    BUNDLED_VALUE_RANGE,
    MAX_STATES,
)
from policyopt.cli.options import (
    add_distributed_options,
    int_at_least,
    non_negative_float,
    probability,
    value_range_arg,
)

__all__ = ["add_command", "run_check_model"]


def add_command(sub) -> None:
    """Register the ``check-model`` sub-command on the sub-parsers `sub`."""
    from policyopt.models.empirical import DEFAULT_MIN_PAIRS, DEFAULT_N_BOOT, MAX_LAG_CAP

    cmd = sub.add_parser(
        "check-model",
        help="test a Markov model of the readings (the fitted first-order chains by default): its Δ(t) against Δ(t) "
        "estimated directly from the readings, and a held-out Markov test",
        description=(
            "Lag by lag, compare the Δ(t) of the first-order chains policyopt fits per user (Zhang et al. 2024, "
            "eq. (12)), or of the model --markov-model names, with Δ(t) estimated directly from lagged pairs of the "
            "readings, with a simultaneous block-bootstrap confidence band, and test the model twice: the Δ(t) check "
            "(the data's statistic against data simulated from the model, parametric bootstrap, family-wise over the "
            "lags by max-T; the per-lag p-values are pointwise and descriptive) and the Markov test (G² of the next "
            "state against the state ℓ slots back given the model's context, fitted on the first part of each series "
            "and tested on the rest, lags up to a week of slots, family-wise).  The model is refuted when either "
            "test refutes it at LEVEL.  Without --data: the bundled CityLearn 2022 pilot (17 homes, hourly kWh, "
            f"{BUNDLED_STATES} states, readings in {BUNDLED_VALUE_RANGE[0]:g}:{BUNDLED_VALUE_RANGE[1]:g} kWh)."
        ),
    )
    cmd.add_argument("--data", metavar="CSV_OR_PARQUET", help="long CSV with header user,time,value (time in integer "
                     "slots), or Parquet with those columns (default: the bundled pilot)")
    cmd.add_argument("--states", type=int_at_least("--states", 2, MAX_STATES), metavar="K",
                     help=f"quantile states (default {BUNDLED_STATES} for the bundled pilot, 12 for --data)")
    cmd.add_argument("--value-range", type=value_range_arg("--value-range"), metavar="LO:HI",
                     help="public range of one reading: readings are clipped into it before estimation (default for "
                     f"the bundled pilot {BUNDLED_VALUE_RANGE[0]:g}:{BUNDLED_VALUE_RANGE[1]:g} kWh)")
    cmd.add_argument("--max-lag", type=int_at_least("--max-lag", 1), metavar="L",
                     help=f"last lag tested, slots, by the Δ(t) check (default: a tenth of the series, at most "
                     f"{MAX_LAG_CAP}) and by the Markov test (default: a week of slots, 168 when the slot length is "
                     "unknown, at most the held-out length − 2)")
    cmd.add_argument("--level", type=probability("--level"), default=0.95, metavar="LEVEL",
                     help="level of the band and of both tests, each family-wise over its lags (default 0.95)")
    cmd.add_argument("--holdout", type=probability("--holdout"), metavar="FRACTION",
                     help="fit the model on the first 1 − FRACTION of each series and test on the rest (the Markov "
                     "test is held out in any case: on FRACTION, else on the last half)")
    cmd.add_argument("--markov-model", metavar="MODEL", default="chain",
                     help="the model checked: chain (first-order chain over the quantile states, default), phase[:P] "
                     "(a chain per phase of the day, or of P slots), order:K (the state is the last K states), hmm:R "
                     "(R hidden regimes), or auto (the simplest that passes both tests: every model tried is "
                     "reported)")
    cmd.add_argument("--slot-length", metavar="DUR", default=None,
                     help="length of one slot of --data, e.g. 30min, 1h (a day and a week of slots: the phase of "
                     "phase without P, the Markov test's default lags and auto's candidates; the bundled data: 1h)")
    cmd.add_argument("--min-pairs", type=int_at_least("--min-pairs", 1), default=DEFAULT_MIN_PAIRS, metavar="N",
                     help=f"pairs a row needs to be claimed; fewer make the upper band 1 (default {DEFAULT_MIN_PAIRS})")
    cmd.add_argument("--draws", type=int_at_least("--draws", 1, 100_000), default=99, metavar="R",
                     help="data sets simulated from the model for each test (default 99)")
    cmd.add_argument("--boot", type=int_at_least("--boot", 20, 100_000), default=DEFAULT_N_BOOT, metavar="B",
                     help=f"block-bootstrap replicates of the band (default {DEFAULT_N_BOOT})")
    cmd.add_argument("--smoothing", type=non_negative_float("--smoothing"), default=0.01, metavar="S",
                     help="additive smoothing pseudo-count of the fitted model (default 0.01)")
    cmd.add_argument("--seed", type=int_at_least("--seed", 0), default=0, metavar="N",
                     help="seed of the resampling and simulation (default 0; never released noise)")
    cmd.add_argument("--plot", metavar="FILE", help="draw the model's Δ(t) against the band on a log lag axis, pointwise "
                     "refuted lags marked, into FILE (.png, .pdf or .svg; needs matplotlib)")
    cmd.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_distributed_options(
        cmd, title="distributed check (Parquet --data, one file per group of whole users)",
        workers_help="run the whole check (chains, direct estimate, bootstrap band, simulated data sets, the held-out "
        "Markov test) as a map-reduce over the Parquet files on a local Dask cluster of N worker processes; the numbers "
        "equal the serial run's (--markov-model chain only)",
        scheduler_help="the same on an existing Dask cluster (e.g. tcp://host:8786; its workers need policyopt, the "
        "--data files at the same paths and, with --holdout or --value-range, the system's temporary directory)",
    )
    cmd.set_defaults(handler=run_check_model)


def run_check_model(args) -> int:
    """Handler of ``policyopt check-model``: the report of :func:`policyopt.app.check_model.check_report`, printed as
    text or JSON; exit code."""
    from policyopt.app.check_model import CheckModelOptions, check_report

    report = check_report(CheckModelOptions.from_namespace(args))
    print(report.to_json() if args.json else str(report))
    return 0
