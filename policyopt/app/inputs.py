"""The inputs of a design: the options' defaults and limits, the deployment (pilot model, I, value range, readings)
and its MSE penalty, loaded once for ``schedule`` and ``sweep`` (serially, or reduced on Dask).

Every function takes `options`: a :class:`~policyopt.app.design_options.DesignOptions` (the Python call) or the
command line's parsed namespace, which has the same attribute names (``data``, ``chain``, ``matrix``, ``states``,
``users``, ``value_range``, ``max_age``, ``max_interval``, ...).  Error messages name the command-line option
(``--max-age``), which is also the keyword without its dashes (``max_age``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from policyopt.data import BUNDLED_STATES, BUNDLED_USERS, BUNDLED_VALUE_RANGE
from policyopt.errors import InvalidInputError
from policyopt.models.estimation import DEFAULT_SMOOTHING, DEFAULT_STATES

__all__ = [
    "BUNDLED_PHASE_PERIOD", "PENALTY_DESIGNS", "BUNDLED_STATES", "BUNDLED_USERS", "BUNDLED_VALUE_RANGE", "DEFAULT_BOOTSTRAP_SEED",
    "DEFAULT_CREDIBLE", "DEFAULT_DRAWS", "DEFAULT_MAX_AGE", "DEFAULT_MAX_INTERVAL", "DEFAULT_PENALTY_LEVEL",
    "DEFAULT_PLOT_EPOCHS", "DEFAULT_RELEASES", "DEFAULT_SEED", "DEFAULT_SMOOTHING", "DEFAULT_STATES", "DEFAULT_USERS",
    "MAX_AGE_LIMIT", "MAX_COUNT", "MAX_DRAWS", "MAX_HORIZON", "MAX_LOCAL_WORKERS", "MAX_PLOT_EPOCHS", "MAX_STATES",
    "MAX_TABLE_CELLS", "PENALTY_CHOICES", "Deployment", "check_table_size", "default_phase_period", "deployment_penalty",
    "load_deployment", "load_distributed_model", "max_tv_level", "penalty_bound", "readings_penalty",
    "require_parquet_data", "wants_distributed", "slot_seconds", "guarantee_settings", "markov_selection",
    "markov_spec_option",
]

DEFAULT_USERS = 20
DEFAULT_MAX_AGE = 168
DEFAULT_MAX_INTERVAL = 168
DEFAULT_RELEASES = 24
DEFAULT_PLOT_EPOCHS = 4

# Limits of the size parameters (stated in --help; checked while parsing, before anything is allocated).
#: Largest --max-age / --max-interval of schedule and sweep, slots.
MAX_AGE_LIMIT = 100_000
#: Largest (A_MAX + 1) · S_MAX table the exact solver enumerates (a few float64 tables of this size are held).
MAX_TABLE_CELLS = 10_000_000
#: Largest number of quantile states fitted to data (a K×K chain per user, Δ(t) over hundreds of slots).
MAX_STATES = 200
#: Largest --users / --releases.
MAX_COUNT = 10**9
#: Largest --plot-epochs.
MAX_PLOT_EPOCHS = 100
#: Largest --horizon (slots): about a thousand years of hourly slots.
MAX_HORIZON = 10**7

#: Slots per day of the bundled hourly readings: the readings penalty's phase period.
BUNDLED_PHASE_PERIOD = 24
#: Choices of --penalty: readings (point estimate), readings-upper (bootstrap band's upper end), readings-auto (the
#: upper end when the band reaches 0 at some age, else the point estimate: the default with readings), chain (eqs.
#: (48)-(49)).
PENALTY_CHOICES = ("readings", "readings-upper", "readings-auto", "chain")
#: The design of :class:`~policyopt.utility.readings_penalty.ReadingsMSEPenalty` each readings choice asks for.
PENALTY_DESIGNS = {"readings": "point", "readings-upper": "upper", "readings-auto": "auto"}
#: Two-sided level of the readings penalty's band.
DEFAULT_PENALTY_LEVEL = 0.95
#: Seed of the readings penalty's bootstrap when the command has no --seed.
DEFAULT_BOOTSTRAP_SEED = 0
#: Level of the posterior check of a design's integer schedule (``--credible``).
DEFAULT_CREDIBLE = 0.95
#: Posterior draws of ``--credible`` / ``--robust``.
DEFAULT_DRAWS = 200
#: Most posterior draws (time: each re-fits and re-solves a simulated pilot).
MAX_DRAWS = 10_000
#: Seed of the simulation generator (posterior draws, model checks) when no ``--seed`` is given; never released noise.
DEFAULT_SEED = 0

#: Most worker processes of a local Dask cluster: 4 per core of this machine (more only queue on the cores and, in the
#: hundreds, exhaust memory and process limits before the first task runs); a larger cluster is given by --scheduler.
MAX_LOCAL_WORKERS = 4 * (os.cpu_count() or 1)


def max_tv_level(options, has_readings: bool, *, serial_hint: bool = False) -> float | None:
    """Resolve ``--max-tv`` / ``--horizon``: ``None`` for the chains' Δ(t), the band's level for ``empirical[:LEVEL]``.

    Parameters
    ----------
    options : DesignOptions or argparse.Namespace
        With ``max_tv``, ``horizon``, ``method`` and ``relax``.
    has_readings : bool
        Whether the command has the readings in memory (``--data`` or the bundled data, read serially).
    serial_hint : bool
        Say in the message that a Dask run (``--workers``/``--scheduler``) has no readings in memory.

    Raises
    ------
    InvalidInputError
        A malformed SOURCE or LEVEL; ``--horizon`` without ``empirical``; ``empirical`` without readings or with
        another method than ``exact`` or with ``--relax``.
    """
    from policyopt.studies.empirical_design import parse_max_tv_source

    kind, level = parse_max_tv_source(options.max_tv) if options.max_tv is not None else ("model", None)
    if kind == "model":
        return None
    if not has_readings:
        raise InvalidInputError(f"--max-tv {options.max_tv} estimates Δ(t) from readings: give --data (or use the bundled "
                                "data), not --chain/--matrix" + (", and run serially (no --workers/--scheduler)"
                                                                  if serial_hint else ""))
    if options.method != "exact" or options.relax:
        raise InvalidInputError(f"--max-tv {options.max_tv} designs with the exact solver: use --method exact without --relax")
    return level


def penalty_bound(options) -> float | None:
    """f̄ from --max-penalty or --max-rmse (R²); ``None`` for the default inside the trade-off range."""
    if getattr(options, "max_rmse", None) is not None:
        return options.max_rmse**2
    return options.max_penalty


def check_table_size(options) -> None:
    """Refuse a search box whose (A_MAX + 1) · S_MAX table exceeds :data:`MAX_TABLE_CELLS` (before any work)."""
    cells = (options.max_age + 1) * options.max_interval
    if cells > MAX_TABLE_CELLS:
        raise InvalidInputError(
            f"--max-age {options.max_age} with --max-interval {options.max_interval} gives a table of {cells} (A, S_bar) "
            f"pairs; at most {MAX_TABLE_CELLS} are enumerated (lower either)"
        )


@dataclass(frozen=True)
class Deployment:
    """What the model options describe: the pilot's chains and the deployment they stand for.

    Attributes
    ----------
    population : Population
        Pilot chains (one per usable pilot user for data; one chain for --chain/--matrix).
    info : dict
        Model facts for the report (source, smoothing, state values, excluded users, clipping).
    unit : str
        Penalty unit (e.g. ``kWh^2``).
    users : int
        Deployment size I.
    value_range : tuple of float or None
        Declared public range (LO, HI); ``None`` when the data's own range is used.
    fitted : FittedModel or None
        The estimate (data only): counts per user, for the posterior check.
    readings : pandas.DataFrame or None
        The readings (data only; not yet clipped): the readings penalty, the model check and ``--max-tv empirical``.
        With ``--backtest F`` only the first F of the time range (the design's training part).
    all_readings : pandas.DataFrame or None
        With ``--backtest F``: every reading (the held-out part is replayed); else None.
    backtest : float or None
        F of ``--backtest`` (the training fraction of the time range), or None.
    penalty_kind : str
        ``readings``, ``readings-upper``, ``readings-auto`` or ``chain`` (see :data:`PENALTY_CHOICES`).
    phase_period, penalty_level, horizon, seed
        The readings penalty's phase period (slots), band level, largest age (slots) and bootstrap seed.
    slot_seconds : int or None
        The readings' slot length: ``--slot-length``, else inferred from ISO 8601 time stamps in ``--data``, 1 h for
        the bundled data; ``None`` when unknown (integer slots, no ``--slot-length``).
    time_origin : str or None
        Slot 0's date-time (ISO 8601, UTC) when ``--data`` has time stamps.
    """

    population: object
    info: dict
    unit: str
    users: int
    value_range: tuple | None
    fitted: object = None
    readings: object = None
    penalty_kind: str = "chain"
    phase_period: int = 1
    penalty_level: float = DEFAULT_PENALTY_LEVEL
    horizon: int = 0
    seed: int = DEFAULT_BOOTSTRAP_SEED
    all_readings: object = None
    backtest: float | None = None
    slot_seconds: int | None = None
    time_origin: str | None = None


def default_phase_period(bundled: bool, slot_seconds: int | None) -> int:
    """The readings penalty's phase period when ``--phase-period`` is not given: a day of slots.

    24 for the bundled hourly pilot; for ``--data`` a day of slots when the slot length is known (``--slot-length``
    or ISO 8601 time stamps; e.g. 48 for 30-minute slots) and a day is at least 2 whole slots; else 1 (no phase).
    """
    from policyopt.studies.markov_check import periods_from_slot

    if bundled:
        return BUNDLED_PHASE_PERIOD
    day = periods_from_slot(slot_seconds)[0]
    return 1 if day is None else int(day)


def load_deployment(options) -> Deployment:
    """Pilot chains and deployment (I, value range) from the command-line options.

    Raises
    ------
    InvalidInputError
        Options that do not apply to the chosen model source; a value range that does not contain
        a --chain/--matrix model's state values; bad data (see :func:`~policyopt.models.estimation.fit_population`).
    """
    from policyopt.models.markov import Population

    check_table_size(options)
    uses_data = options.chain is None and options.matrix is None
    value_range = getattr(options, "value_range", None)
    kind = getattr(options, "penalty", None)
    if not uses_data:
        if kind is not None and kind != "chain":
            raise InvalidInputError(f"--penalty {kind} needs readings (--data or the bundled data); a --chain/--matrix "
                                    "model has only the chain penalty")
        for opt in ("phase_period", "penalty_level"):
            if getattr(options, opt, None) is not None:
                raise InvalidInputError(f"--{opt.replace('_', '-')} applies to the readings penalty (--data or the "
                                        "bundled data) only; omit it with --chain/--matrix")
        if options.states is not None:
            raise InvalidInputError("--states applies to --data (or the bundled data) only; omit it with --chain/--matrix")
        if options.smoothing is not None:
            raise InvalidInputError("--smoothing applies to --data (or the bundled data) only; omit it with --chain/--matrix")
        if getattr(options, "backtest", None) is not None:
            raise InvalidInputError("--backtest replays the design on held-out readings: it needs --data (or the bundled "
                                    "data); omit it with --chain/--matrix")
        if options.chain is not None:
            from policyopt.io import parse_chain_spec

            chain = parse_chain_spec(options.chain)
            source = f"two-state chain {options.chain}"
        else:
            from policyopt.io import read_matrix

            chain = read_matrix(options.matrix)
            source = f"matrix {options.matrix}"
        users = DEFAULT_USERS if options.users is None else options.users
        if value_range is not None:
            v_lo, v_hi = float(chain.state_values.min()), float(chain.state_values.max())
            if v_lo < value_range[0] or v_hi > value_range[1]:
                raise InvalidInputError(
                    f"--value-range {value_range[0]:g}:{value_range[1]:g} does not contain the model's state values "
                    f"[{v_lo:g}, {v_hi:g}]"
                )
        info = {"source": source, "excluded_users": {}, "value_range_source": "declared" if value_range else "model"}
        return Deployment(Population([chain], [users]), info, "", users, value_range)

    from policyopt.models.estimation import fit_population

    bundled = options.data is None
    if bundled:
        from policyopt.data import BUNDLED_SLOT_LENGTH, load_citylearn
        from policyopt.io import parse_duration

        df, slot_seconds, origin = load_citylearn(), parse_duration(BUNDLED_SLOT_LENGTH), None
        source, unit = "bundled CityLearn 2022 pilot, 17 homes, hourly kWh", "kWh^2"
        if value_range is None:
            value_range = BUNDLED_VALUE_RANGE
        states = BUNDLED_STATES if options.states is None else options.states
    else:
        from policyopt.io import format_duration, parse_duration, read_readings_timed

        given = getattr(options, "slot_length", None)
        df, slot_seconds, origin = read_readings_timed(
            options.data, "--data", None if given is None else parse_duration(given, "--slot-length"))
        source, unit = f"data {options.data}", ""
        if origin is not None:
            source += f" (ISO 8601 time stamps: slot k is {origin} + k·{format_duration(slot_seconds)})"
        states = DEFAULT_STATES if options.states is None else options.states
    smoothing = DEFAULT_SMOOTHING if options.smoothing is None else options.smoothing
    backtest, all_readings = getattr(options, "backtest", None), None
    if backtest is not None:  # design on the first part of the time range only; the rest is replayed afterwards
        from policyopt.studies.backtest import split_slot

        all_readings = df
        df = df[df["time"].to_numpy() < split_slot(df["time"].to_numpy(), backtest)]
        source += f" (design on the first {backtest:g} of the time range: --backtest)"
    fitted = fit_population(df, states, smoothing=smoothing, source=f"--data {options.data!r}" if options.data else "bundled data",
                            value_range=value_range)
    if options.users is not None:
        users = options.users
    else:
        users = BUNDLED_USERS if bundled else fitted.population.n_users
    info = {
        "source": source,
        "smoothing": smoothing,
        "state_values": fitted.quantizer.state_values.tolist(),
        "excluded_users": dict(fitted.excluded),
        "clipped_readings": fitted.clipped,
        "value_range_source": "declared" if value_range is not None else "data",
    }
    kind = "readings-auto" if kind is None else kind
    if kind == "chain":
        for opt in ("phase_period", "penalty_level"):
            if getattr(options, opt, None) is not None:
                raise InvalidInputError(f"--{opt.replace('_', '-')} applies to --penalty readings|readings-upper|readings-auto only; "
                                        "omit it with --penalty chain")
    phase = getattr(options, "phase_period", None)
    phase = default_phase_period(bundled, slot_seconds) if phase is None else phase
    level = getattr(options, "penalty_level", None)
    seed = getattr(options, "seed", None)
    return Deployment(fitted.population, info, unit, users, value_range, fitted, readings=df, penalty_kind=kind,
                      phase_period=phase, penalty_level=DEFAULT_PENALTY_LEVEL if level is None else level,
                      horizon=options.max_age + options.max_interval + 1,
                      seed=DEFAULT_BOOTSTRAP_SEED if seed is None else seed, all_readings=all_readings, backtest=backtest,
                      slot_seconds=slot_seconds, time_origin=origin)


def deployment_penalty(dep: Deployment, population=None, *, kind: str | None = None):
    """The MSE penalty of the deployment's released mean (I users, declared or data range).

    With readings and ``dep.penalty_kind`` (or `kind`) ``readings``/``readings-upper``/``readings-auto``: the
    :class:`~policyopt.utility.readings_penalty.ReadingsMSEPenalty` estimated from them (worst phase,
    point estimate, the bootstrap band's upper end, or the upper end when the band reaches 0: :data:`PENALTY_DESIGNS`); otherwise the chain penalty
    :class:`~policyopt.utility.penalty.MSEPenalty` of eqs. (48)–(49).  `population` replaces
    ``dep.population`` for the chain penalty (e.g. a tabulated copy with the same chains).
    """
    from policyopt.utility.penalty import MSEPenalty

    kind = dep.penalty_kind if kind is None else kind
    if kind != "chain" and dep.readings is not None:
        return readings_penalty(dep, design=PENALTY_DESIGNS[kind])
    return MSEPenalty(dep.population if population is None else population, unit=dep.unit, users=dep.users,
                      value_range=dep.value_range)


_MOMENTS: dict = {}  # (id of the readings, range, L, P) → ReadingsMoments: one estimate per command run


def readings_penalty(dep: Deployment, *, design: str = "point"):
    """The readings penalty of a deployment with readings (moments estimated once per readings and settings).

    Raises
    ------
    InvalidInputError
        The deployment has no readings, or they span too few slots for its largest age.
    """
    from policyopt.utility.readings_penalty import ReadingsMSEPenalty, readings_moments

    if dep.readings is None:
        raise InvalidInputError("the readings penalty needs readings (--data or the bundled data)")
    t = dep.readings["time"]
    span = int(t.max()) - int(t.min()) + 1
    if span <= dep.horizon:
        raise InvalidInputError(
            f"the readings span {span} slots; the readings penalty needs ages up to A_MAX + S_MAX + 1 = {dep.horizon} "
            "within them: lower --max-age/--max-interval, give longer readings, or use --penalty chain"
        )
    key = (id(dep.readings), dep.value_range, dep.horizon, dep.phase_period)
    if key not in _MOMENTS:
        _MOMENTS.clear()
        _MOMENTS[key] = (dep.readings, readings_moments(dep.readings, dep.horizon, value_range=dep.value_range,
                                                        phase_period=dep.phase_period))
    return ReadingsMSEPenalty.from_readings(dep.readings, dep.horizon, moments=_MOMENTS[key][1], users=dep.users,
                                            unit=dep.unit, design=design, level=dep.penalty_level, seed=dep.seed)


def wants_distributed(options) -> bool:
    """True when ``--workers`` or ``--scheduler`` was given."""
    return getattr(options, "workers", None) is not None or getattr(options, "scheduler", None) is not None


def require_parquet_data(options) -> None:
    """Refuse ``--workers`` together with ``--scheduler``, and either without a Parquet ``--data``.

    Raises
    ------
    InvalidInputError
        Both options given; ``--data`` missing or not a Parquet source (a CSV file).
    """
    from policyopt.io import is_parquet_source

    if options.workers is not None and options.scheduler is not None:
        raise InvalidInputError(f"give either --workers {options.workers} (a local cluster) or --scheduler {options.scheduler}, not both")
    if options.data is None or not is_parquet_source(options.data):
        got = f"--data {options.data!r}" if options.data is not None else "no --data (the bundled pilot runs serially)"
        raise InvalidInputError(f"--workers/--scheduler need a Parquet --data (a directory, a glob or a .parquet file), got {got}")


def load_distributed_model(options):
    """(population, info, unit, penalty, extra) of a Parquet ``--data`` set reduced on Dask (see :mod:`policyopt.studies.distributed`).

    The population is a :class:`~policyopt.models.tabulated.TabulatedMaxTV` (with ``n_states``); the penalty the
    :class:`~policyopt.utility.readings_penalty.ReadingsMSEPenalty` of the readings' per-slot sums added up
    over the files (:func:`~policyopt.studies.distributed_checks.readings_moments_partitions`; ``--penalty
    readings``/``readings-upper``/``readings-auto``, the default) or, with ``--penalty chain``, a
    :class:`~policyopt.utility.tabulated_penalty.TabulatedMSEPenalty`, tabulated over the ages the schedule search
    needs; the numbers equal those of the serial path (tested).  ``extra``: ``chain_penalty`` (the chain
    model's tabulated penalty, for the comparison with the readings') and ``model_check``: the held-out check of the
    chains (:func:`~policyopt.studies.distributed_heldout.held_out_check_partitions`, the serial ``design_check``'s
    numbers) as a :class:`~policyopt.studies.distributed_heldout.SelectionSummary` (the ``check_summary`` object, with
    the selection itself for the report to redo it with the chosen schedule's lags).

    Raises
    ------
    InvalidInputError
        Both ``--workers`` and ``--scheduler``; no Parquet ``--data``; ``--chain``/``--matrix``; ``--plot``;
        ``--users`` that disagrees with the data; any error of
        :func:`~policyopt.studies.distributed.fit_partitions`.
    """
    from policyopt.studies.distributed import dask_client, fit_partitions

    require_parquet_data(options)
    if getattr(options, "value_range", None) is not None:
        raise InvalidInputError(f"--value-range {options.value_range[0]:g}:{options.value_range[1]:g} is not available with "
                                "--workers/--scheduler yet (the distributed fit uses the data's own state values); "
                                "run serially or omit it")
    if getattr(options, "plot", None) is not None:
        raise InvalidInputError("--plot is not available with --workers/--scheduler (the Δ(t) table covers the search box only); "
                                "draw it from a serial run")
    states = DEFAULT_STATES if options.states is None else options.states
    smoothing = DEFAULT_SMOOTHING if options.smoothing is None else options.smoothing
    kind = "readings-auto" if getattr(options, "penalty", None) is None else options.penalty
    if kind == "chain":
        for opt in ("phase_period", "penalty_level"):
            if getattr(options, opt, None) is not None:
                raise InvalidInputError(f"--{opt.replace('_', '-')} applies to --penalty readings|readings-upper|readings-auto only; "
                                        "omit it with --penalty chain")
    readings_stats = None
    with dask_client(workers=options.workers, scheduler=options.scheduler) as client:
        fit = fit_partitions(
            options.data, states, smoothing=smoothing, client=client,
            horizon=max(options.max_age, options.max_interval) + 1, n_staleness=options.max_age + options.max_interval + 2,
        )
        penalty = fit.penalty
        if kind != "chain":
            from policyopt.studies.distributed_checks import readings_moments_partitions
            from policyopt.utility.readings_penalty import ReadingsMSEPenalty

            from policyopt.io import parse_duration

            phase = getattr(options, "phase_period", None)
            if phase is None:  # as the serial path (load_deployment): a day of slots when --slot-length is given
                slot = getattr(options, "slot_length", None)
                phase = default_phase_period(False, None if slot is None else parse_duration(slot, "--slot-length"))
            moments, readings_stats = readings_moments_partitions(
                options.data, options.max_age + options.max_interval + 1, phase_period=phase, client=client,
            )
            level, seed = getattr(options, "penalty_level", None), getattr(options, "seed", None)
            penalty = ReadingsMSEPenalty(moments, users=fit.population.n_users, unit="",
                                         design=PENALTY_DESIGNS[kind],
                                         level=DEFAULT_PENALTY_LEVEL if level is None else level,
                                         seed=DEFAULT_BOOTSTRAP_SEED if seed is None else seed)
        from policyopt.io import parse_duration
        from policyopt.studies.distributed_heldout import SelectionSummary, held_out_check_partitions
        from policyopt.studies.empirical_design import box_last_age
        from policyopt.studies.markov_check import ModelSelection, periods_from_slot

        # the chains checked on held-out time as the serial design check does (design_check), a map-reduce
        slot = getattr(options, "slot_length", None)
        week = None if slot is None else periods_from_slot(parse_duration(slot, "--slot-length"))[1]
        check, check_stats = held_out_check_partitions(
            options.data, fit, slots_per_week=week, box_last_age=box_last_age(options.max_age, options.max_interval),
            seed=DEFAULT_BOOTSTRAP_SEED if getattr(options, "seed", None) is None else options.seed, client=client)
        model_check = SelectionSummary(ModelSelection(requested="chain", chosen=check, checks=(check,)))
    if options.users is not None and options.users != fit.population.n_users:
        raise InvalidInputError(
            f"--users {options.users} disagrees with the data, which has {fit.population.n_users} usable users; "
            "omit --users when giving data"
        )
    info = {
        "source": f"data {options.data}",
        "smoothing": smoothing,
        "state_values": fit.state_values.tolist(),
        "excluded_users": dict(fit.excluded),
        "clipped_readings": 0,  # no --value-range on this path: nothing is clipped
        "states": states,
        "distributed": {
            "workers": options.workers,
            "scheduler": options.scheduler,
            "partitions": fit.partitions,
            "readings": fit.readings,
            "users_read": fit.users,
            "readings_penalty_s": None if readings_stats is None else readings_stats["seconds"],
            "model_check_s": check_stats["seconds"],
        },
    }
    if readings_stats is not None:
        info["value_range_source"] = "data"
    return fit.population, info, "", penalty, {"chain_penalty": fit.penalty, "model_check": model_check}


def slot_seconds(options, dep: Deployment | None = None) -> int | None:
    """The slot length (seconds) of the design's readings: ``--slot-length``, else the data's time stamps' (`dep`),
    1 h for the bundled data, else ``None`` (unknown)."""
    from policyopt.io import parse_duration

    if getattr(options, "slot_length", None) is not None:
        return parse_duration(options.slot_length, "--slot-length")
    if getattr(dep, "slot_seconds", None) is not None:
        return int(dep.slot_seconds)
    if options.data is None and options.chain is None and options.matrix is None:
        from policyopt.data import BUNDLED_SLOT_LENGTH

        return parse_duration(BUNDLED_SLOT_LENGTH, "--slot-length")
    return None


def guarantee_settings(options, dep: Deployment):
    """:class:`~policyopt.studies.guarantee.GuaranteeSettings` of a design run: the options with their defaults (δ from
    the deployment's I, the horizon from the slot length or the readings' span)."""
    from policyopt.studies.guarantee import GuaranteeSettings

    span = None
    if dep.readings is not None:
        t = dep.readings["time"]
        span = int(t.max()) - int(t.min()) + 1
    return GuaranteeSettings.resolve(users=int(dep.users), slot_seconds=slot_seconds(options, dep), data_slots=span,
                                     markov_model=getattr(options, "markov_model", None),
                                     privacy=getattr(options, "privacy", None), delta=getattr(options, "delta", None),
                                     horizon=getattr(options, "horizon", None),
                                     accept_refuted=getattr(options, "accept_refuted", None))


def markov_selection(dep: Deployment, gs, *, max_age: int, max_interval: int, seed: int):
    """The held-out check of the design's Markov model (``gs.markov_model``) on the deployment's readings and, when the
    model chosen is not the first-order chain, that model fitted on every design reading: ``(selection, model)``,
    ``model`` ``None`` for the chains (:func:`~policyopt.studies.markov_check.design_check`,
    :func:`~policyopt.studies.markov_check.fit_for_design`; `seed` drives the check's simulations only)."""
    from policyopt.studies.empirical_design import box_last_age
    from policyopt.studies.markov_check import design_check, fit_for_design, periods_from_slot

    spec = gs.markov_model
    sel = design_check(dep.readings, dep.fitted.quantizer, dep.fitted.users, spec=spec, value_range=dep.value_range,
                       box_last_age=box_last_age(max_age, max_interval), slot_seconds=gs.slot_seconds, seed=seed,
                       smoothing=dep.fitted.smoothing)
    chosen = sel.chosen
    if spec == "chain" or chosen is None or chosen.model == "chain":
        return sel, None
    return sel, fit_for_design(chosen.model, dep.readings, dep.fitted.quantizer, dep.fitted.users,
                               value_range=dep.value_range, smoothing=dep.fitted.smoothing, seed=seed,
                               default_period=periods_from_slot(gs.slot_seconds)[0])


def markov_spec_option(options, slot_seconds) -> str:
    """``--markov-model`` checked and made canonical (``phase`` resolved to a day of slots); errors name the option."""
    from policyopt.studies.check_model import check_markov_spec
    from policyopt.studies.markov_check import periods_from_slot

    try:
        return check_markov_spec(options.markov_model, periods_from_slot(slot_seconds)[0])
    except InvalidInputError as exc:
        text = str(exc)
        if text.startswith("`model` "):
            raise InvalidInputError("--markov-model " + text[len("`model` "):]) from None
        raise InvalidInputError(f"--markov-model {options.markov_model!r}: {text}") from None
