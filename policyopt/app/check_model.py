"""``policyopt check-model`` below the command line: the readings read and the Markov model checked on held-out
time (:func:`check_from_options`).

It takes `args`, the parsed ``check-model`` options (``data``, ``states``, ``markov_model``, ``max_lag``, ``level``,
``holdout``, ``workers``, ...); errors name the command-line options.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from policyopt.app.inputs import MAX_LOCAL_WORKERS, MAX_STATES, markov_spec_option, require_parquet_data, wants_distributed
from policyopt.app.option_fields import CommandOptions
from policyopt.app.report import CommandReport
from policyopt.errors import InvalidInputError

__all__ = ["CheckModelOptions", "check_deployment_model", "check_from_options", "check_report", "check_slot_seconds"]

#: Defaults of ``policyopt check-model`` (the command line's, stated in its ``--help``).
DEFAULT_LEVEL, DEFAULT_DRAWS, DEFAULT_SMOOTHING = 0.95, 99, 0.01


def _min_pairs() -> int:
    from policyopt.models.empirical import DEFAULT_MIN_PAIRS

    return DEFAULT_MIN_PAIRS


def _n_boot() -> int:
    from policyopt.models.empirical import DEFAULT_N_BOOT

    return DEFAULT_N_BOOT


@dataclass(frozen=True)
class CheckModelOptions(CommandOptions):
    """The options of ``policyopt check-model`` (:func:`check_deployment_model`): each attribute the option of the
    same name (``max_lag`` is ``--max-lag``) with its default; ``None`` is the command's default.

    Attributes
    ----------
    data : str or os.PathLike, optional
        Long CSV ``user,time,value`` or Parquet with those columns (default: the bundled CityLearn pilot).
    states : int, optional
        Quantile states, 2 to 200 (default 3 for the bundled pilot, 12 for `data`).
    value_range : (float, float), optional
        Public range (LO, HI) of one reading; readings are clipped into it.
    max_lag : int, optional
        Last lag tested, slots, ≥ 1.
    level : float
        Level of the band and of both tests, family-wise over their lags, in (0, 1) (default 0.95).
    holdout : float, optional
        Fit on the first 1 − `holdout` of each series and test on the rest, in (0, 1).
    markov_model : str
        ``chain`` (default), ``phase[:P]``, ``order:K``, ``hmm:R`` or ``auto``.
    slot_length : str, optional
        Duration of one slot of `data` (``30min``, ``1h``).
    min_pairs, draws, boot : int
        Pairs a row needs to be claimed (≥ 1, default 100), data sets simulated for each test (1 to 10⁵, default 99),
        block-bootstrap replicates of the band (20 to 10⁵, default 200).
    smoothing : float
        Additive smoothing pseudo-count of the fitted model, ≥ 0 (default 0.01).
    seed : int
        Seed of the resampling and simulation, ≥ 0 (default 0; never released noise).
    plot : str or os.PathLike, optional
        Draw the model's Δ(t) against the band into this .png, .pdf or .svg file.
    workers : int, optional
        Run the check on a local Dask cluster of this many workers (Parquet `data`).
    scheduler : str, optional
        The same on an existing Dask cluster (its address).

    Raises
    ------
    InvalidInputError
        A value of the wrong type or out of its range, naming the keyword and showing the value.
    """

    COMMAND = "check-model"
    VALUED = ("level", "markov_model", "min_pairs", "draws", "boot", "smoothing", "seed")
    RULES = {
        "data": ("text",), "states": ("int", 2, MAX_STATES), "value_range": ("range",), "max_lag": ("int", 1, None),
        "level": ("level",), "holdout": ("level",), "markov_model": ("text",), "slot_length": ("text",),
        "min_pairs": ("int", 1, None), "draws": ("int", 1, 100_000), "boot": ("int", 20, 100_000),
        "smoothing": ("float", 0.0, float("inf"), False), "seed": ("int", 0, None), "plot": ("text",),
        "workers": ("int", 1, MAX_LOCAL_WORKERS), "scheduler": ("text",),
    }

    data: str | os.PathLike | None = None
    states: int | None = None
    value_range: tuple | None = None
    max_lag: int | None = None
    level: float = DEFAULT_LEVEL
    holdout: float | None = None
    markov_model: str = "chain"
    slot_length: str | None = None
    min_pairs: int = _min_pairs()
    draws: int = DEFAULT_DRAWS
    boot: int = _n_boot()
    smoothing: float = DEFAULT_SMOOTHING
    seed: int = 0
    plot: str | os.PathLike | None = None
    workers: int | None = None
    scheduler: str | None = None



def check_report(args) -> CommandReport:
    """``policyopt check-model`` of parsed options (`args`: :class:`CheckModelOptions` or the command line's
    namespace): the report the command prints (:func:`check_from_options`)."""
    from policyopt.formatting import json_clean
    from policyopt.studies.check_model_text import format_check

    from policyopt.studies.data_check import with_data_check

    out = json_clean(check_from_options(args))
    return CommandReport("check-model", out, with_data_check(format_check(out), out))


def check_deployment_model(**options) -> CommandReport:
    """Check a Markov model of the readings as ``policyopt check-model`` does, and return its report.

    Parameters
    ----------
    **options
        The attributes of :class:`CheckModelOptions`, by keyword (``data``, ``states``, ``markov_model``,
        ``max_lag``, ``level``, ``holdout``, ``draws``, ``seed``, ...), each the ``check-model`` option of the same
        name with its default.

    Returns
    -------
    CommandReport
        ``to_dict()`` is the command's ``--json`` object (its wall times aside) and ``str()`` its text: the model's
        Δ(t) against Δ(t) estimated directly from the readings with a simultaneous bootstrap band, the Δ(t) check
        and the held-out G² Markov test (Anderson & Goodman 1957; Billingsley 1961), family-wise at ``level``.

    Raises
    ------
    InvalidInputError
        An unknown keyword, a value of the wrong type or out of range, or bad data (cross-option messages name the
        command-line options, as the command prints them).

    Examples
    --------
    >>> import policyopt as po
    >>> report = po.check_deployment_model(max_lag=24, draws=19, boot=20)
    >>> report.fields["model"]
    'chain'
    """
    return check_report(CheckModelOptions.from_keywords("check_deployment_model", options))


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
    if data is not None:  # --data read in memory: what check-data says of it opens the report
        from policyopt.studies.data_check import readings_check

        out["data_check"] = readings_check(data, states=out["states"], value_range=args.value_range,
                                           slot_seconds=slot_seconds, slot_length_given=args.slot_length is not None,
                                           time_stamps=origin is not None, source=f"data {args.data}")
    if distributed:
        out["distributed"] = {"workers": args.workers, "scheduler": args.scheduler, "partitions": stats["partitions"],
                              "fit_s": stats["fit_seconds"], "markov_test_s": stats["markov_test_seconds"],
                              "peak_rss_mib": stats["peak_rss_mib"]}
    if args.plot is not None:
        what = "chain" if out["model"] == "chain" else out["model"]
        plot_check(report, args.plot, title=f"{out['source']}: {what} model check, {out['states']} states")
        out["plot"] = str(args.plot)
    return out
