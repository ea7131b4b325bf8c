"""Options shared by the sub-commands: one-line argparse errors, validated numbers, the model source.

Imports the studies and lower layers only (lazily, inside functions, so ``policyopt --help`` starts fast).
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass

# The bundled pilot's deployment (I, value range, states) and the fit's defaults are defined once, below the CLI.
from policyopt.data import BUNDLED_STATES, BUNDLED_USERS, BUNDLED_VALUE_RANGE
from policyopt.errors import InvalidInputError
from policyopt.models.estimation import DEFAULT_SMOOTHING, DEFAULT_STATES

__all__ = [
    "OneLineParser",
    "positive_float",
    "int_at_least",
    "non_negative_float",
    "add_model_options",
    "load_model",
    "load_deployment",
    "check_table_size",
    "deployment_penalty",
    "readings_penalty",
    "add_penalty_options",
    "add_bound_options",
    "add_max_tv_options",
    "add_guarantee_options",
    "delta_arg",
    "max_tv_level",
    "bound_from_args",
    "value_range_arg",
    "probability",
    "Deployment",
    "BUNDLED_USERS",
    "BUNDLED_VALUE_RANGE",
    "add_distributed_options",
    "wants_distributed",
    "load_distributed_model",
]

DEFAULT_MAX_PENALTY = 0.15
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
#: Choices of --penalty: readings (point estimate), readings-upper (bootstrap band's upper end), chain (eqs. (48)-(49)).
PENALTY_CHOICES = ("readings", "readings-upper", "chain")
#: Two-sided level of the readings penalty's band.
DEFAULT_PENALTY_LEVEL = 0.95
#: Seed of the readings penalty's bootstrap when the command has no --seed.
DEFAULT_BOOTSTRAP_SEED = 0


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports usage errors on one line with exit code 2."""

    def error(self, message):  # noqa: D401 - argparse API
        """Print the usage error on one line and exit with code 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def positive_float(name, upper=None, lower=None):
    """argparse type: a positive finite float, optionally within [`lower`, `upper`] (stated in the option's help)."""

    def parse(text):
        """Parse a positive finite float or raise ArgumentTypeError naming the option."""
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{name} must be a positive finite number, got {text!r}")
        if upper is not None and value > upper:
            raise argparse.ArgumentTypeError(f"{name} must be ≤ {upper:g}, got {text!r}")
        if lower is not None and value < lower:
            raise argparse.ArgumentTypeError(f"{name} must be ≥ {lower:g}, got {text!r}")
        return value

    return parse


def int_at_least(name, lower, upper=None):
    """argparse type: an integer ≥ `lower` and, if given, ≤ `upper` (checked before anything is allocated)."""

    def parse(text):
        """Parse an integer in [lower, upper] or raise ArgumentTypeError naming the option."""
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < lower:
            raise argparse.ArgumentTypeError(f"{name} must be ≥ {lower}, got {text!r}")
        if upper is not None and value > upper:
            raise argparse.ArgumentTypeError(f"{name} must be ≤ {upper}, got {text!r}")
        return value

    return parse


def non_negative_float(name):
    """An argparse ``type`` accepting a finite float ≥ 0; errors name the option `name`."""
    def parse(text):
        """Parse a finite float ≥ 0 or raise ArgumentTypeError naming the option."""
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not (math.isfinite(value) and value >= 0):
            raise argparse.ArgumentTypeError(f"{name} must be a finite number ≥ 0, got {text!r}")
        return value

    return parse


def value_range_arg(name):
    """An argparse ``type`` for ``LO:HI`` (finite, LO < HI, data units); errors name the option `name`."""
    def parse(text):
        """Parse LO:HI (two finite numbers, LO < HI) or raise ArgumentTypeError naming the option."""
        lo, sep, hi = str(text).partition(":")
        try:
            if not sep:
                raise ValueError
            a, b = float(lo), float(hi)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be LO:HI (two numbers), got {text!r}") from None
        if not (math.isfinite(a) and math.isfinite(b) and a < b):
            raise argparse.ArgumentTypeError(f"{name} must be LO:HI with finite LO < HI, got {text!r}")
        return (a, b)

    return parse


def probability(name, what: str = "a probability strictly between 0 and 1"):
    """An argparse ``type`` for a level in (0, 1) (e.g. --credible, --robust); errors name the option `name` and say
    it must be `what`."""
    def parse(text):
        """Parse a number strictly between 0 and 1 or raise ArgumentTypeError naming the option."""
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not (0.0 < value < 1.0):
            raise argparse.ArgumentTypeError(f"{name} must be {what}, got {text!r}")
        return value

    return parse


def add_model_options(cmd) -> None:
    """Model and search options shared by ``schedule`` and ``sweep`` (one definition for both).

    Adds the model source (``--data`` | ``--chain`` | ``--matrix``), ``--states``, ``--users``,
    ``--value-range``, ``--max-age``, ``--max-interval``, ``--releases``, ``--smoothing``, ``--method`` and
    ``--relax``; each command adds its own ``--max-penalty`` (a value or a grid).
    """
    src = cmd.add_mutually_exclusive_group()
    src.add_argument("--data", metavar="CSV_OR_PARQUET", help="long CSV with header user,time,value (time in integer "
                     "slots), or Parquet with those columns: a .parquet file, a directory or a glob of files")
    src.add_argument("--chain", metavar="SPEC", help="two-state:p=P,q=Q (states valued -1/+1), eq. (43)")
    src.add_argument("--matrix", metavar="FILE", help="CSV/NPY transition matrix, K×K or (K+1)×K with state values first")
    cmd.add_argument("--states", type=int_at_least("--states", 2, MAX_STATES), metavar="K",
                     help=f"quantile states for data (default {DEFAULT_STATES} for --data, {BUNDLED_STATES} for the bundled "
                     f"pilot; at most {MAX_STATES})")
    cmd.add_argument("--users", type=int_at_least("--users", 1, MAX_COUNT), metavar="I",
                     help=f"deployment size: users whose mean is released (default {BUNDLED_USERS} for the bundled pilot, "
                     f"the usable pilot users for --data, {DEFAULT_USERS} for --chain/--matrix); with data, the I users "
                     f"follow the pilot's chains in equal shares; at most {MAX_COUNT:.0e}")
    cmd.add_argument("--value-range", type=value_range_arg("--value-range"), metavar="LO:HI",
                     help="public range of one reading (data units): readings are clipped into it before estimation and "
                     "the sensitivity of the mean is (HI-LO)/I (default for the bundled pilot: "
                     f"{BUNDLED_VALUE_RANGE[0]:g}:{BUNDLED_VALUE_RANGE[1]:g} kWh; otherwise the data's own range, "
                     "which is not private)")
    cmd.add_argument("--max-age", type=int_at_least("--max-age", 0, MAX_AGE_LIMIT), default=DEFAULT_MAX_AGE,
                     metavar="A_MAX", help=f"largest aging A considered, slots (default {DEFAULT_MAX_AGE}, at most "
                     f"{MAX_AGE_LIMIT}; (A_MAX + 1)·S_MAX at most {MAX_TABLE_CELLS:.0e})")
    cmd.add_argument("--max-interval", type=int_at_least("--max-interval", 1, MAX_AGE_LIMIT), default=DEFAULT_MAX_INTERVAL,
                     metavar="S_MAX", help=f"largest inter-publish time S_bar considered, slots (default "
                     f"{DEFAULT_MAX_INTERVAL}, at most {MAX_AGE_LIMIT})")
    cmd.add_argument("--releases", type=int_at_least("--releases", 1, MAX_COUNT), default=DEFAULT_RELEASES, metavar="N",
                     help=f"releases after which the noise-only benchmark's risk is reported (default {DEFAULT_RELEASES}, "
                     f"at most {MAX_COUNT:.0e})")
    cmd.add_argument("--smoothing", type=non_negative_float("--smoothing"), default=None, metavar="S",
                     help=f"additive smoothing pseudo-count for estimated chains (default {DEFAULT_SMOOTHING})")
    cmd.add_argument("--method", choices=("exact", "heuristic", "cvxpy", "pyomo", "all"), default="exact",
                     help="exact: problem (28) with the exact Δ(t), integer (default); heuristic/cvxpy/pyomo: problem (39) "
                     "with the envelope Δ(t) ≤ c·ρ^t; all: every back end side by side")
    cmd.add_argument("--relax", action="store_true",
                     help="continuous relaxation of A and S_bar for the (39) back ends (cvxpy needs it)")
    add_penalty_options(cmd)


def add_penalty_options(cmd) -> None:
    """``--penalty``, ``--phase-period``, ``--penalty-level``: which MSE the design bounds (shared by schedule, sweep, backtest)."""
    cmd.add_argument("--penalty", choices=PENALTY_CHOICES, default=None,
                     help="the MSE f̄ bounds: readings = estimated from the clipped readings, E[(m_{t-a} - m_t)^2] = "
                     "cross(a) + (self(a) - cross(a))/I at the worst phase (default with data); readings-upper = the upper "
                     "end of its block-bootstrap band; chain = the chain model of Zhang et al. eqs. (48)-(49) (independent "
                     "users, quantile-state values; the only choice for --chain/--matrix)")
    cmd.add_argument("--phase-period", type=int_at_least("--phase-period", 1, MAX_AGE_LIMIT), default=None, metavar="P",
                     help=f"slots per cycle of the readings penalty (hour of day: 24 for hourly data); the design uses the "
                     f"worst phase at every age (default: a day of slots — {BUNDLED_PHASE_PERIOD} for the bundled pilot, "
                     "e.g. 48 for 30-minute slots when --data has time stamps or --slot-length is given —, else 1 = "
                     "no phase)")
    cmd.add_argument("--penalty-level", type=probability("--penalty-level"), default=None, metavar="LEVEL",
                     help=f"two-sided level of the readings penalty's bootstrap band (default {DEFAULT_PENALTY_LEVEL})")


def add_bound_options(cmd) -> None:
    """``--max-penalty`` | ``--max-rmse`` (mutually exclusive): the utility bound f̄ of one design."""
    bound = cmd.add_mutually_exclusive_group()
    bound.add_argument("--max-penalty", type=positive_float("--max-penalty", upper=1e300), default=None, metavar="F",
                       help="bound f̄ on the MSE of the released value against the current mean of the readings, in the "
                       "readings' unit squared (kWh^2 for the bundled pilot; the state values' unit for --chain/--matrix); "
                       "default: the geometric midpoint √(low·high) of the trade-off range, which the report prints; at most 1e300")
    bound.add_argument("--max-rmse", type=positive_float("--max-rmse", upper=1e150, lower=1e-150), default=None,
                       metavar="R", help="the same bound as a root-mean-square error in the readings' unit (f̄ = R²; e.g. "
                       "kWh; between 1e-150 and 1e150, so that R² is a normal float)")


def add_max_tv_options(cmd) -> None:
    """``--max-tv SOURCE`` and ``--horizon H``: the Δ(t) a design uses (one definition for ``schedule`` and ``sweep``)."""
    cmd.add_argument("--max-tv", metavar="SOURCE", default=None,
                     help="Δ(t) the design uses (default: model, the fitted chains) or empirical[:LEVEL]: the upper "
                     "edge of the LEVEL simultaneous block-bootstrap band of Δ(t) estimated directly from the data, "
                     "LEVEL 0.95 when omitted, 1 beyond the estimated lags (data only, exact method)")
    cmd.add_argument("--horizon", type=int_at_least("--horizon", 1, MAX_HORIZON), default=None, metavar="H",
                     help="slots the model-free guarantee covers (the releases that read one user's series over H "
                     "slots are composed; default: a year of slots when the slot length is known, else the data's length, "
                     "else 8760); with --max-tv empirical, also the horizon of the design when no schedule has a finite "
                     f"infinite-horizon ε* (condition (31) fails); at most {MAX_HORIZON}")


def add_guarantee_options(cmd, *, design: bool = True, markov: bool = True, horizon: bool = False) -> None:
    """``--markov-model``, ``--delta`` and (for a design) ``--privacy``, ``--accept-refuted``: which guarantee a report states.

    `horizon` adds ``--horizon`` too (commands without :func:`add_max_tv_options`).
    """
    group = cmd.add_argument_group("guarantee (the model-free one always; a model-based one only under a model the data "
                                   "do not refute)")
    if markov:
        group.add_argument("--markov-model", metavar="MODEL", default=None,
                           help="the Markov model of the readings a model-based risk rests on: chain (first-order chain "
                           "over the quantile states), phase[:P] (a chain per phase of the day, or of P slots), "
                           "order:K (the state is the last K states), hmm:R (R hidden regimes), or auto (the simplest "
                           "that passes its checks on held-out time); checked against the readings (Markov test and "
                           "Δ(t) check, level 0.95) before any model-based number is stated (default: chain)")
    group.add_argument("--delta", type=delta_arg("--delta"), default=None, metavar="DELTA",
                       help="δ of the model-free (ε, δ) guarantee (default min(1e-6, 1/(10·I)): an order of magnitude "
                       "below 1/I, so publishing one user's series whole cannot meet it)")
    if horizon:
        cmd.add_argument("--horizon", type=int_at_least("--horizon", 1, MAX_HORIZON), default=None, metavar="H",
                         help="slots the model-free guarantee covers (default: a year of slots when the slot length is "
                         f"known, else the data's length, else 8760; at most {MAX_HORIZON})")
    if design:
        group.add_argument("--privacy", choices=("model-based", "model-free"), default=None,
                           help="what the design minimises: model-based = the peak age-dependent risk ε* under the Markov "
                           "model; model-free = the (ε, δ) of each user's whole series over --horizon, whatever the "
                           "correlation (A = 0; S_bar against ε_C) (default: model-based)")
        group.add_argument("--accept-refuted", metavar="REASON", default=None,
                           help="print a refuted (or unchecked) model's ε* anyway, with this reason recorded; it never "
                           "becomes the guarantee stated first")


def delta_arg(name):
    """An argparse ``type`` for δ of (ε, δ)-DP: a number in (0, 1); errors name the option `name`."""
    return probability(name, "strictly between 0 and 1 (e.g. 1e-6)")


def max_tv_level(args, has_readings: bool, *, serial_hint: bool = False) -> float | None:
    """Resolve ``--max-tv`` / ``--horizon``: ``None`` for the chains' Δ(t), the band's level for ``empirical[:LEVEL]``.

    Parameters
    ----------
    args : argparse.Namespace
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

    kind, level = parse_max_tv_source(args.max_tv) if args.max_tv is not None else ("model", None)
    if kind == "model":
        return None
    if not has_readings:
        raise InvalidInputError(f"--max-tv {args.max_tv} estimates Δ(t) from readings: give --data (or use the bundled "
                                "data), not --chain/--matrix" + (", and run serially (no --workers/--scheduler)"
                                                                  if serial_hint else ""))
    if args.method != "exact" or args.relax:
        raise InvalidInputError(f"--max-tv {args.max_tv} designs with the exact solver: use --method exact without --relax")
    return level


def bound_from_args(args) -> float | None:
    """f̄ from --max-penalty or --max-rmse (R²); ``None`` for the default inside the trade-off range."""
    if getattr(args, "max_rmse", None) is not None:
        return args.max_rmse**2
    return args.max_penalty


def check_table_size(args) -> None:
    """Refuse a search box whose (A_MAX + 1) · S_MAX table exceeds :data:`MAX_TABLE_CELLS` (before any work)."""
    cells = (args.max_age + 1) * args.max_interval
    if cells > MAX_TABLE_CELLS:
        raise InvalidInputError(
            f"--max-age {args.max_age} with --max-interval {args.max_interval} gives a table of {cells} (A, S_bar) "
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
        ``readings``, ``readings-upper`` or ``chain`` (see :data:`PENALTY_CHOICES`).
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


def load_deployment(args) -> Deployment:
    """Pilot chains and deployment (I, value range) from the command-line options.

    Raises
    ------
    InvalidInputError
        Options that do not apply to the chosen model source; a value range that does not contain
        a --chain/--matrix model's state values; bad data (see :func:`~policyopt.models.estimation.fit_population`).
    """
    from policyopt.models.markov import Population

    check_table_size(args)
    uses_data = args.chain is None and args.matrix is None
    value_range = getattr(args, "value_range", None)
    kind = getattr(args, "penalty", None)
    if not uses_data:
        if kind is not None and kind != "chain":
            raise InvalidInputError(f"--penalty {kind} needs readings (--data or the bundled data); a --chain/--matrix "
                                    "model has only the chain penalty")
        for opt in ("phase_period", "penalty_level"):
            if getattr(args, opt, None) is not None:
                raise InvalidInputError(f"--{opt.replace('_', '-')} applies to the readings penalty (--data or the "
                                        "bundled data) only; omit it with --chain/--matrix")
        if args.states is not None:
            raise InvalidInputError("--states applies to --data (or the bundled data) only; omit it with --chain/--matrix")
        if args.smoothing is not None:
            raise InvalidInputError("--smoothing applies to --data (or the bundled data) only; omit it with --chain/--matrix")
        if getattr(args, "backtest", None) is not None:
            raise InvalidInputError("--backtest replays the design on held-out readings: it needs --data (or the bundled "
                                    "data); omit it with --chain/--matrix")
        if args.chain is not None:
            from policyopt.io import parse_chain_spec

            chain = parse_chain_spec(args.chain)
            source = f"two-state chain {args.chain}"
        else:
            from policyopt.io import read_matrix

            chain = read_matrix(args.matrix)
            source = f"matrix {args.matrix}"
        users = DEFAULT_USERS if args.users is None else args.users
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

    bundled = args.data is None
    if bundled:
        from policyopt.data import BUNDLED_SLOT_LENGTH, load_citylearn
        from policyopt.io import parse_duration

        df, slot_seconds, origin = load_citylearn(), parse_duration(BUNDLED_SLOT_LENGTH), None
        source, unit = "bundled CityLearn 2022 pilot, 17 homes, hourly kWh", "kWh^2"
        if value_range is None:
            value_range = BUNDLED_VALUE_RANGE
        states = BUNDLED_STATES if args.states is None else args.states
    else:
        from policyopt.io import format_duration, parse_duration, read_readings_timed

        given = getattr(args, "slot_length", None)
        df, slot_seconds, origin = read_readings_timed(
            args.data, "--data", None if given is None else parse_duration(given, "--slot-length"))
        source, unit = f"data {args.data}", ""
        if origin is not None:
            source += f" (ISO 8601 time stamps: slot k is {origin} + k·{format_duration(slot_seconds)})"
        states = DEFAULT_STATES if args.states is None else args.states
    smoothing = DEFAULT_SMOOTHING if args.smoothing is None else args.smoothing
    backtest, all_readings = getattr(args, "backtest", None), None
    if backtest is not None:  # design on the first part of the time range only; the rest is replayed afterwards
        from policyopt.studies.backtest import split_slot

        all_readings = df
        df = df[df["time"].to_numpy() < split_slot(df["time"].to_numpy(), backtest)]
        source += f" (design on the first {backtest:g} of the time range: --backtest)"
    fitted = fit_population(df, states, smoothing=smoothing, source=f"--data {args.data!r}" if args.data else "bundled data",
                            value_range=value_range)
    if args.users is not None:
        users = args.users
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
    kind = "readings" if kind is None else kind
    if kind == "chain":
        for opt in ("phase_period", "penalty_level"):
            if getattr(args, opt, None) is not None:
                raise InvalidInputError(f"--{opt.replace('_', '-')} applies to --penalty readings|readings-upper only; "
                                        "omit it with --penalty chain")
    phase = getattr(args, "phase_period", None)
    phase = default_phase_period(bundled, slot_seconds) if phase is None else phase
    level = getattr(args, "penalty_level", None)
    seed = getattr(args, "seed", None)
    return Deployment(fitted.population, info, unit, users, value_range, fitted, readings=df, penalty_kind=kind,
                      phase_period=phase, penalty_level=DEFAULT_PENALTY_LEVEL if level is None else level,
                      horizon=args.max_age + args.max_interval + 1,
                      seed=DEFAULT_BOOTSTRAP_SEED if seed is None else seed, all_readings=all_readings, backtest=backtest,
                      slot_seconds=slot_seconds, time_origin=origin)


def deployment_penalty(dep: Deployment, population=None, *, kind: str | None = None):
    """The MSE penalty of the deployment's released mean (I users, declared or data range).

    With readings and ``dep.penalty_kind`` (or `kind`) ``readings``/``readings-upper``: the
    :class:`~policyopt.utility.readings_penalty.ReadingsMSEPenalty` estimated from them (worst phase,
    point estimate or the bootstrap band's upper end); otherwise the chain penalty
    :class:`~policyopt.utility.penalty.MSEPenalty` of eqs. (48)–(49).  `population` replaces
    ``dep.population`` for the chain penalty (e.g. a tabulated copy with the same chains).
    """
    from policyopt.utility.penalty import MSEPenalty

    kind = dep.penalty_kind if kind is None else kind
    if kind != "chain" and dep.readings is not None:
        return readings_penalty(dep, design="upper" if kind == "readings-upper" else "point")
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
    moments = _MOMENTS[key][1]
    return ReadingsMSEPenalty(moments, users=dep.users, unit=dep.unit, design=design, level=dep.penalty_level,
                              seed=dep.seed)


def load_model(args):
    """Population plus model facts from the command-line options (see :func:`load_deployment`)."""
    dep = load_deployment(args)
    return dep.population, dep.info, dep.unit


#: Most worker processes of a local Dask cluster: 4 per core of this machine (more only queue on the cores and, in the
#: hundreds, exhaust memory and process limits before the first task runs); a larger cluster is given by --scheduler.
MAX_LOCAL_WORKERS = 4 * (os.cpu_count() or 1)


def add_distributed_options(cmd, title: str | None = None, workers_help: str | None = None,
                            scheduler_help: str | None = None) -> None:
    """``--workers`` / ``--scheduler``: by default, fit a Parquet ``--data`` set as a map-reduce over its files on Dask.

    `title`, `workers_help` and `scheduler_help` replace the group's title and the options' help for a command
    that uses the cluster for something else (``publish`` splits the data set into slots on it).
    """
    group = cmd.add_argument_group(title or "distributed estimation (Parquet --data, one file per group of whole users)")
    group.add_argument("--workers", type=int_at_least("--workers", 1, MAX_LOCAL_WORKERS), default=None, metavar="N",
                       help=(workers_help or "estimate the chains, Δ(t), the envelope and the MSE terms on a local Dask "
                             "cluster of N worker processes, one Parquet file at a time per worker (memory bounded by the "
                             "file size)") + f" (at most {MAX_LOCAL_WORKERS} here, 4 per core; a larger cluster: --scheduler)")
    group.add_argument("--scheduler", metavar="ADDRESS",
                       help=scheduler_help or "the same on an existing Dask cluster (e.g. tcp://host:8786; its workers "
                       "need policyopt and the --data files at the same paths)")


def wants_distributed(args) -> bool:
    """True when ``--workers`` or ``--scheduler`` was given."""
    return getattr(args, "workers", None) is not None or getattr(args, "scheduler", None) is not None


def require_parquet_data(args) -> None:
    """Refuse ``--workers`` together with ``--scheduler``, and either without a Parquet ``--data``.

    Raises
    ------
    InvalidInputError
        Both options given; ``--data`` missing or not a Parquet source (a CSV file).
    """
    from policyopt.io import is_parquet_source

    if args.workers is not None and args.scheduler is not None:
        raise InvalidInputError(f"give either --workers {args.workers} (a local cluster) or --scheduler {args.scheduler}, not both")
    if args.data is None or not is_parquet_source(args.data):
        got = f"--data {args.data!r}" if args.data is not None else "no --data (the bundled pilot runs serially)"
        raise InvalidInputError(f"--workers/--scheduler need a Parquet --data (a directory, a glob or a .parquet file), got {got}")


def load_distributed_model(args):
    """(population, info, unit, penalty, extra) of a Parquet ``--data`` set reduced on Dask (see :mod:`policyopt.studies.distributed`).

    The population is a :class:`~policyopt.studies.distributed.TabulatedMaxTV`; the penalty the
    :class:`~policyopt.utility.readings_penalty.ReadingsMSEPenalty` of the readings' per-slot sums added up
    over the files (:func:`~policyopt.studies.distributed_checks.readings_moments_partitions`; ``--penalty
    readings``/``readings-upper``, the default) or, with ``--penalty chain``, a
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

    require_parquet_data(args)
    if getattr(args, "value_range", None) is not None:
        raise InvalidInputError(f"--value-range {args.value_range[0]:g}:{args.value_range[1]:g} is not available with "
                                "--workers/--scheduler yet (the distributed fit uses the data's own state values); "
                                "run serially or omit it")
    if getattr(args, "plot", None) is not None:
        raise InvalidInputError("--plot is not available with --workers/--scheduler (the Δ(t) table covers the search box only); "
                                "draw it from a serial run")
    states = DEFAULT_STATES if args.states is None else args.states
    smoothing = DEFAULT_SMOOTHING if args.smoothing is None else args.smoothing
    kind = "readings" if getattr(args, "penalty", None) is None else args.penalty
    if kind == "chain":
        for opt in ("phase_period", "penalty_level"):
            if getattr(args, opt, None) is not None:
                raise InvalidInputError(f"--{opt.replace('_', '-')} applies to --penalty readings|readings-upper only; "
                                        "omit it with --penalty chain")
    readings_stats = None
    with dask_client(workers=args.workers, scheduler=args.scheduler) as client:
        fit = fit_partitions(
            args.data, states, smoothing=smoothing, client=client,
            horizon=max(args.max_age, args.max_interval) + 1, n_staleness=args.max_age + args.max_interval + 2,
        )
        penalty = fit.penalty
        if kind != "chain":
            from policyopt.studies.distributed_checks import readings_moments_partitions
            from policyopt.utility.readings_penalty import ReadingsMSEPenalty

            from policyopt.io import parse_duration

            phase = getattr(args, "phase_period", None)
            if phase is None:  # as the serial path (load_deployment): a day of slots when --slot-length is given
                slot = getattr(args, "slot_length", None)
                phase = default_phase_period(False, None if slot is None else parse_duration(slot, "--slot-length"))
            moments, readings_stats = readings_moments_partitions(
                args.data, args.max_age + args.max_interval + 1, phase_period=phase, client=client,
            )
            level, seed = getattr(args, "penalty_level", None), getattr(args, "seed", None)
            penalty = ReadingsMSEPenalty(moments, users=fit.population.n_users, unit="",
                                         design="upper" if kind == "readings-upper" else "point",
                                         level=DEFAULT_PENALTY_LEVEL if level is None else level,
                                         seed=DEFAULT_BOOTSTRAP_SEED if seed is None else seed)
        from policyopt.io import parse_duration
        from policyopt.studies.distributed_heldout import SelectionSummary, held_out_check_partitions
        from policyopt.studies.empirical_design import box_last_age
        from policyopt.studies.markov_check import ModelSelection, periods_from_slot

        # the chains checked on held-out time as the serial design check does (design_check), a map-reduce
        slot = getattr(args, "slot_length", None)
        week = None if slot is None else periods_from_slot(parse_duration(slot, "--slot-length"))[1]
        check, check_stats = held_out_check_partitions(
            args.data, fit, slots_per_week=week, box_last_age=box_last_age(args.max_age, args.max_interval),
            seed=DEFAULT_BOOTSTRAP_SEED if getattr(args, "seed", None) is None else args.seed, client=client)
        model_check = SelectionSummary(ModelSelection(requested="chain", chosen=check, checks=(check,)))
    if args.users is not None and args.users != fit.population.n_users:
        raise InvalidInputError(
            f"--users {args.users} disagrees with the data, which has {fit.population.n_users} usable users; "
            "omit --users when giving data"
        )
    info = {
        "source": f"data {args.data}",
        "smoothing": smoothing,
        "state_values": fit.state_values.tolist(),
        "excluded_users": dict(fit.excluded),
        "clipped_readings": 0,  # no --value-range on this path: nothing is clipped
        "states": states,
        "distributed": {
            "workers": args.workers,
            "scheduler": args.scheduler,
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
