"""``policyopt check-model``: the fitted chains' Δ(t) against Δ(t) estimated directly from the readings.

The work is done by :func:`policyopt.studies.check_model.check_model`; this module parses options and prints.
"""

from __future__ import annotations

import json

from policyopt.cli.options import (
    BUNDLED_STATES,
    BUNDLED_VALUE_RANGE,
    MAX_STATES,
    add_distributed_options,
    int_at_least,
    non_negative_float,
    probability,
    require_parquet_data,
    value_range_arg,
    wants_distributed,
)

__all__ = ["add_command", "run_check_model"]


def add_command(sub) -> None:
    """Register the ``check-model`` sub-command on the sub-parsers `sub`."""
    from policyopt.models.empirical import DEFAULT_MIN_PAIRS, DEFAULT_N_BOOT, MAX_LAG_CAP

    cmd = sub.add_parser(
        "check-model",
        help="test the fitted first-order chains' Δ(t) against Δ(t) estimated directly from the readings",
        description=(
            "Lag by lag, compare the Δ(t) of the first-order chains policyopt fits per user (Zhang et al. 2024, "
            "eq. (12)) with Δ(t) estimated directly from lagged pairs of the readings, with a simultaneous "
            "block-bootstrap confidence band, and test the chains: at each lag the chains are refuted when the "
            "data's statistic is above what data simulated from the chains give (parametric bootstrap, Monte "
            "Carlo p-value ≤ 1 − LEVEL).  Without --data: the bundled CityLearn 2022 pilot (17 homes, hourly kWh, "
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
                     help=f"last lag tested, slots (default: a tenth of the series, at most {MAX_LAG_CAP})")
    cmd.add_argument("--level", type=probability("--level"), default=0.95, metavar="LEVEL",
                     help="level of the band and of each lag's test (default 0.95)")
    cmd.add_argument("--holdout", type=probability("--holdout"), metavar="FRACTION",
                     help="fit the chains on the first 1 − FRACTION of each series and test on the rest")
    cmd.add_argument("--min-pairs", type=int_at_least("--min-pairs", 1), default=DEFAULT_MIN_PAIRS, metavar="N",
                     help=f"pairs a row needs to be claimed; fewer make the upper band 1 (default {DEFAULT_MIN_PAIRS})")
    cmd.add_argument("--draws", type=int_at_least("--draws", 1, 100_000), default=99, metavar="R",
                     help="data sets simulated from the chains for the test (default 99)")
    cmd.add_argument("--boot", type=int_at_least("--boot", 20, 100_000), default=DEFAULT_N_BOOT, metavar="B",
                     help=f"block-bootstrap replicates of the band (default {DEFAULT_N_BOOT})")
    cmd.add_argument("--smoothing", type=non_negative_float("--smoothing"), default=0.01, metavar="S",
                     help="additive smoothing pseudo-count of the fitted chains (default 0.01)")
    cmd.add_argument("--seed", type=int_at_least("--seed", 0), default=0, metavar="N",
                     help="seed of the resampling and simulation (default 0; never released noise)")
    cmd.add_argument("--plot", metavar="FILE", help="draw the chains' Δ(t) against the band on a log lag axis, refuted "
                     "lags marked, into FILE (.png, .pdf or .svg; needs matplotlib)")
    cmd.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_distributed_options(
        cmd, title="distributed check (Parquet --data, one file per group of whole users)",
        workers_help="run the whole check (chains, direct estimate, bootstrap band, simulated data sets) as a map-reduce "
        "over the Parquet files on a local Dask cluster of N worker processes; the numbers equal the serial run's",
        scheduler_help="the same on an existing Dask cluster (e.g. tcp://host:8786; its workers need policyopt, the "
        "--data files at the same paths and, with --holdout or --value-range, the system's temporary directory)",
    )
    cmd.set_defaults(handler=run_check_model)


def run_check_model(args) -> int:
    """Handler of ``policyopt check-model``: read the data, run the check, print text or JSON; exit code."""
    from policyopt.formatting import json_clean
    from policyopt.studies.check_model import check_model, format_check, plot_check

    if args.plot is not None:
        from policyopt.studies.plots import check_plot_path, require_matplotlib

        check_plot_path(args.plot, "--plot")
        require_matplotlib("--plot")
    from policyopt.errors import InvalidInputError

    distributed = wants_distributed(args)
    if distributed:
        require_parquet_data(args)
    data, source = None, None
    if args.data is not None and not distributed:
        from policyopt.io import read_readings

        data, source = read_readings(args.data), f"data {args.data}"
    try:
        if distributed:
            from policyopt.studies.distributed_checks import check_model_partitions

            report, stats = check_model_partitions(
                args.data, n_states=12 if args.states is None else args.states, value_range=args.value_range,
                max_lag=args.max_lag, level=args.level, holdout=args.holdout, min_pairs=args.min_pairs,
                draws=args.draws, n_boot=args.boot, smoothing=args.smoothing, seed=args.seed, workers=args.workers,
                scheduler=args.scheduler, source=f"data {args.data}",
            )
        else:
            report = check_model(
                data, n_states=args.states, value_range=args.value_range, max_lag=args.max_lag, level=args.level,
                holdout=args.holdout, min_pairs=args.min_pairs, draws=args.draws, n_boot=args.boot,
                smoothing=args.smoothing, seed=args.seed, source=source,
            )
    except InvalidInputError as exc:  # name the option, not the Python argument
        text = str(exc)
        if text.startswith("`max_lag`="):
            raise InvalidInputError("--max-lag " + text[len("`max_lag`="):]) from None
        raise
    out = report.to_dict()
    if distributed:
        out["distributed"] = {"workers": args.workers, "scheduler": args.scheduler, "partitions": stats["partitions"],
                              "fit_s": stats["fit_seconds"], "peak_rss_mib": stats["peak_rss_mib"]}
    if args.plot is not None:
        plot_check(report, args.plot, title=f"{out['source']}: chain model check, {out['states']} states")
        out["plot"] = str(args.plot)
    out = json_clean(out)
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False, allow_nan=False))
    else:
        print(format_check(out))
    return 0
