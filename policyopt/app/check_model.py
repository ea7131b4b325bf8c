"""``policyopt check-model`` below the command line: the readings read and the Markov model checked on held-out
time (:func:`check_from_options`).

It takes `args`, the parsed ``check-model`` options (``data``, ``states``, ``markov_model``, ``max_lag``, ``level``,
``holdout``, ``workers``, ...); errors name the command-line options.
"""

from __future__ import annotations

from policyopt.app.inputs import markov_spec_option, require_parquet_data, wants_distributed
from policyopt.errors import InvalidInputError

__all__ = ["check_from_options", "check_slot_seconds"]


def check_slot_seconds(args) -> int | None:
    """``--slot-length`` in seconds; 1 h for the bundled data; else ``None`` (unknown)."""
    from policyopt.io import parse_duration
    from policyopt.studies.check_model import BUNDLED_SLOT_SECONDS

    if args.slot_length is not None:
        seconds = parse_duration(args.slot_length, "--slot-length")
        if args.data is None and seconds != BUNDLED_SLOT_SECONDS:
            raise InvalidInputError(f"--slot-length {args.slot_length} is not the bundled data's slot (1h)")
        return seconds
    return BUNDLED_SLOT_SECONDS if args.data is None else None


def check_from_options(args) -> dict:
    """``policyopt check-model`` below the command line: read the readings (the bundled year or ``--data``, serially or
    on Dask), check the Markov model on held-out time (:func:`policyopt.studies.check_model.check_model`, or
    :func:`policyopt.studies.distributed_checks.check_model_partitions`) and draw ``--plot``; the report's dict.

    Raises
    ------
    InvalidInputError
        A bad slot length, model or data; a model other than the chains on Dask; the errors of the check, naming
        the options.
    """
    from policyopt.studies.check_model import check_model, plot_check

    if args.plot is not None:
        from policyopt.studies.plots import check_plot_option

        check_plot_option(args.plot)
    slot_seconds = check_slot_seconds(args)
    distributed = wants_distributed(args)
    data, source = None, None
    if args.data is not None and not distributed:
        from policyopt.io import format_duration, read_readings_timed

        data, slot_seconds, origin = read_readings_timed(args.data, "--data", slot_seconds)
        source = f"data {args.data}" + ("" if origin is None else f" (ISO 8601 time stamps: slot k is {origin} + "
                                                                  f"k·{format_duration(slot_seconds)})")
    spec = markov_spec_option(args, slot_seconds)
    if distributed:
        require_parquet_data(args)
        if spec != "chain":
            raise InvalidInputError(f"--markov-model {spec} is fitted to readings held in memory: run it serially (no "
                                    "--workers/--scheduler), or check the chains (--markov-model chain) on Dask")
    try:
        if distributed:
            from policyopt.studies.distributed_checks import check_model_partitions

            report, stats = check_model_partitions(
                args.data, n_states=12 if args.states is None else args.states, value_range=args.value_range,
                max_lag=args.max_lag, level=args.level, holdout=args.holdout, min_pairs=args.min_pairs,
                draws=args.draws, n_boot=args.boot, smoothing=args.smoothing, seed=args.seed, workers=args.workers,
                scheduler=args.scheduler, source=f"data {args.data}", slot_seconds=slot_seconds,
            )
        else:
            report = check_model(
                data, n_states=args.states, value_range=args.value_range, max_lag=args.max_lag, level=args.level,
                holdout=args.holdout, min_pairs=args.min_pairs, draws=args.draws, n_boot=args.boot,
                smoothing=args.smoothing, seed=args.seed, source=source, markov_model=spec, slot_seconds=slot_seconds,
            )
    except InvalidInputError as exc:  # name the option, not the Python argument
        text = str(exc)
        if text.startswith("`max_lag`="):
            raise InvalidInputError("--max-lag " + text[len("`max_lag`="):]) from None
        raise
    out = report.to_dict()
    if distributed:
        out["distributed"] = {"workers": args.workers, "scheduler": args.scheduler, "partitions": stats["partitions"],
                              "fit_s": stats["fit_seconds"], "markov_test_s": stats["markov_test_seconds"],
                              "peak_rss_mib": stats["peak_rss_mib"]}
    if args.plot is not None:
        what = "chain" if out["model"] == "chain" else out["model"]
        plot_check(report, args.plot, title=f"{out['source']}: {what} model check, {out['states']} states")
        out["plot"] = str(args.plot)
    return out
