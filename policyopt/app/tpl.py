"""The model ``policyopt tpl`` and ``tpl-budget`` account with, below the command line: the transition matrices
given (``--pb``/``--pf``, assumed) or the readings' chains under ``--markov-model``, checked on held-out time
(:func:`tpl_model`).

:func:`tpl_model` takes `args`, the parsed ``tpl`` options (``pb``, ``pf``, ``data``, ``states``, ``markov_model``,
``value_range``, ``slot_length``, ``accept_refuted``); errors name the command-line options.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from policyopt.app.inputs import DEFAULT_SMOOTHING, DEFAULT_STATES, MAX_STATES
from policyopt.app.option_fields import CommandOptions
from policyopt.app.report import CommandReport
from policyopt.errors import InvalidInputError, fmt

__all__ = ["tpl_model", "TplModelOptions", "TplOptions", "TplBudgetOptions", "leakage_report", "budget_report", "temporal_leakage",
           "allocate_tpl_budgets", "MAX_HORIZON", "MAX_BUDGET_HORIZON", "MAX_OPTIMAL_HORIZON", "MAX_BUDGET",
           "MIN_ALPHA", "BUDGET_METHODS"]

#: Largest number of steps T of ``tpl`` and ``tpl-budget`` (a few float arrays of length T per user).
MAX_HORIZON = 1_000_000
#: Most steps of `tpl-budget` (time: 10^6 steps took minutes for the bundled homes, issue 26).
MAX_BUDGET_HORIZON = 100_000
#: Largest T of ``tpl-budget --method optimal`` (bound tightening solves 6T LPs per round).
MAX_OPTIMAL_HORIZON = 1000
#: Largest per-step budget or α, nats (the loss function is evaluated in log space up to 10³).
MAX_BUDGET = 1000.0
#: Smallest α of ``tpl-budget``, nats (smaller budgets mean noise variance > 10¹² per unit sensitivity).
MIN_ALPHA = 1e-6
#: ``tpl-budget --method``: Algorithm 7, Algorithm 8 (default), the utility-optimal allocation.
BUDGET_METHODS = ("upper-bound", "quantification", "optimal")

#: The model options ``tpl`` and ``tpl-budget`` share, by rule (:class:`~policyopt.app.option_fields.CommandOptions`).
_MODEL_RULES = {
    "data": ("text",), "states": ("int", 2, MAX_STATES), "value_range": ("range",), "slot_length": ("text",),
    "markov_model": ("text",), "delta": ("level",), "accept_refuted": ("text",),
}


@dataclass(frozen=True)
class TplModelOptions(CommandOptions):
    """The model options ``tpl`` and ``tpl-budget`` share (``pb``, ``pf``, ``data``, ``states``, ``value_range``,
    ``slot_length``, ``markov_model``, ``delta``, ``accept_refuted``; documented by :class:`TplOptions`)."""

    RULES = _MODEL_RULES

    pb: object = None
    pf: object = None
    data: str | os.PathLike | None = None
    states: int | None = None
    value_range: tuple | None = None
    slot_length: str | None = None
    markov_model: str | None = None
    delta: float | None = None
    accept_refuted: str | None = None


@dataclass(frozen=True)
class TplOptions(TplModelOptions):
    """The options of ``policyopt tpl`` (:func:`temporal_leakage`): each attribute the option of the same name;
    ``None`` is the command's default.

    Attributes
    ----------
    pb, pf : str, os.PathLike or array_like, optional
        The backward and forward transition matrices P_B, P_F: (K, K) arrays, a CSV/NPY file or inline rows
        ``"0.8,0.2;0.2,0.8"`` (the model, assumed); without them the chains of the readings.
    data : str or os.PathLike, optional
        Readings to estimate P_B, P_F per user from (default: the bundled homes).
    states : int, optional
        Quantile states of the readings, 2 to 200 (default 3).
    value_range : (float, float), optional
        Public range (LO, HI) of one reading (readings clipped into it).
    slot_length : str, optional
        Length of one slot of `data` (``30min``, ``1h``).
    markov_model : str, optional
        ``chain`` (default), ``order:K``, ``hmm:R`` or ``auto``: the model the adversary is assumed to know, checked on
        held-out readings before BPL/FPL/TPL are stated.
    delta : float, optional
        δ of the model-free (ε, δ) guarantee, in (0, 1).
    accept_refuted : str, optional
        A reason to compute a refuted model's leakage anyway (marked, recorded).
    epsilon, horizon : optional
        A constant budget per step (nats, at most 1000) over `horizon` steps (1 to 10⁶); or
    budgets : str, os.PathLike or sequence of float, optional
        The budgets ε_1..ε_T (nats, each in [0, 1000]): a sequence or a file (comma or newline separated).

    Raises
    ------
    InvalidInputError
        A value of the wrong type or out of its range (naming the keyword and showing the value).
    """

    COMMAND = "tpl"
    RULES = {**_MODEL_RULES, "epsilon": ("float", 0.0, MAX_BUDGET, True), "horizon": ("int", 1, MAX_HORIZON)}

    epsilon: float | None = None
    horizon: int | None = None
    budgets: object = None


@dataclass(frozen=True)
class TplBudgetOptions(TplModelOptions):
    """The options of ``policyopt tpl-budget`` (:func:`allocate_tpl_budgets`): the model options of
    :class:`TplOptions` (``pb``, ``pf``, ``data``, ``states``, ``value_range``, ``slot_length``, ``markov_model``,
    ``delta``, ``accept_refuted``), then the target.

    Attributes
    ----------
    alpha : float
        Target α of α-DP_T, nats (1e-6 to 1000).
    horizon : int
        Steps T (1 to 10⁵; at most 1000 with ``method`` optimal).
    method : str
        ``upper-bound`` (Algorithm 7), ``quantification`` (Algorithm 8, default) or ``optimal``.

    Raises
    ------
    InvalidInputError
        No `alpha` or `horizon`, or a value of the wrong type or out of its range (naming the keyword).
    """

    COMMAND = "tpl-budget"
    VALUED = ("method",)
    RULES = {**_MODEL_RULES, "alpha": ("float", MIN_ALPHA, MAX_BUDGET, False),
             "horizon": ("int", 1, MAX_BUDGET_HORIZON), "method": ("choice", BUDGET_METHODS)}

    alpha: float | None = None
    horizon: int | None = None
    method: str = "quantification"

    def __post_init__(self):
        for name in ("alpha", "horizon"):
            if getattr(self, name) is None:
                raise InvalidInputError(f"`{name}` is required")
        super().__post_init__()


def _matrix(value, option: str):
    """A transition matrix option: a file or inline rows (parsed), or an array (taken as it is)."""
    import numpy as np

    from policyopt.io import parse_matrix_arg

    if isinstance(value, (str, os.PathLike)):
        return parse_matrix_arg(str(value), option)
    try:
        return np.array(value, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{option} must be a matrix (rows of numbers), a CSV/NPY file or inline rows, "
                                f"got {fmt(value)}") from None


def tpl_model(args):
    """The :class:`~policyopt.studies.tpl_report.TPLModel` of the options: --pb/--pf (assumed), else the readings of
    --data (or the bundled homes) under ``--markov-model``, checked on held-out time
    (:func:`~policyopt.studies.tpl_report.tpl_model_from_data`).

    Raises
    ------
    InvalidInputError
        Matrices together with data options; matrices of different sizes; an empty --accept-refuted; a bad
        --slot-length or --markov-model (see :func:`~policyopt.studies.tpl_report.tpl_model_spec`).
    """
    from policyopt.studies.tpl_report import tpl_model_from_data, tpl_model_from_matrices

    if args.accept_refuted is not None and not args.accept_refuted.strip():
        raise InvalidInputError(f"--accept-refuted needs a reason (a non-empty text), got {args.accept_refuted!r}")
    if args.pb is not None or args.pf is not None:
        if args.data is not None or args.states is not None:
            raise InvalidInputError("give either --pb/--pf or --data/--states, not both")
        for opt, val in (("--markov-model", args.markov_model), ("--value-range", args.value_range),
                         ("--slot-length", args.slot_length), ("--accept-refuted", args.accept_refuted)):
            if val is not None:
                raise InvalidInputError(f"{opt} applies to data (--data or the bundled homes) only: the matrices "
                                        "--pb/--pf you give are the model; omit it")
        P_B = None if args.pb is None else _matrix(args.pb, "--pb")
        P_F = None if args.pf is None else _matrix(args.pf, "--pf")
        if P_B is not None and P_F is not None and P_B.shape != P_F.shape:
            raise InvalidInputError(f"--pb is {P_B.shape[0]}×{P_B.shape[1]} but --pf is {P_F.shape[0]}×{P_F.shape[1]}; "
                                    "both describe the same states, so they must have the same size")
        source = "matrices" + ("" if P_B is not None and P_F is not None
                               else " (the missing one: correlation unknown, L ≡ 0)")
        return tpl_model_from_matrices(P_B, P_F, source)
    from policyopt.io import parse_duration

    slot_seconds = None if args.slot_length is None else parse_duration(args.slot_length, "--slot-length")
    if args.data is None:
        from policyopt.data import BUNDLED_SLOT_LENGTH, load_citylearn

        bundled = parse_duration(BUNDLED_SLOT_LENGTH, "--slot-length")
        if slot_seconds is not None and slot_seconds != bundled:
            raise InvalidInputError(f"--slot-length {args.slot_length} is not the bundled data's slot ({BUNDLED_SLOT_LENGTH})")
        df, source, slot_seconds = load_citylearn(), "bundled CityLearn 2022, 17 homes", bundled
    else:
        from policyopt.io import read_readings_csv

        df, source = read_readings_csv(args.data), f"data {args.data}"
    return tpl_model_from_data(df, DEFAULT_STATES if args.states is None else args.states, source=source,
                               markov_model=args.markov_model or "chain", value_range=args.value_range,
                               slot_seconds=slot_seconds, smoothing=DEFAULT_SMOOTHING)


def _budgets(args):
    """The budgets ε_1..ε_T of ``tpl``: a file or a sequence (`budgets`), else `epsilon` over `horizon` steps."""
    import numpy as np

    if args.budgets is not None:
        if args.epsilon is not None or args.horizon is not None:
            raise InvalidInputError("give either --budgets FILE or --epsilon E --horizon T, not both")
        from policyopt.io import read_budgets

        if isinstance(args.budgets, (str, os.PathLike)):
            return read_budgets(args.budgets, max_budget=MAX_BUDGET, max_count=MAX_HORIZON)
        try:
            budgets = np.array(args.budgets, dtype=float)
        except (TypeError, ValueError):
            raise InvalidInputError(f"`budgets` must be numbers (nats per step) or a file, got {fmt(args.budgets)}") \
                from None
        if budgets.ndim != 1 or not 1 <= budgets.size <= MAX_HORIZON or not np.all(np.isfinite(budgets)) \
                or budgets.min() < 0 or budgets.max() > MAX_BUDGET:
            raise InvalidInputError(f"`budgets` must be 1 to {MAX_HORIZON} numbers in [0, {MAX_BUDGET:g}] nats, got "
                                    f"{fmt(args.budgets)}")
        return budgets
    if args.epsilon is None or args.horizon is None:
        raise InvalidInputError("give --epsilon E and --horizon T (or --budgets FILE)")
    return np.full(args.horizon, args.epsilon)


def _report(command: str, out: dict, text) -> CommandReport:
    from policyopt.studies.tpl_report import public_json

    return CommandReport(command, public_json(out), text(out))


def leakage_report(args) -> CommandReport:
    """``policyopt tpl`` of parsed options (`args`: :class:`TplOptions` or the command line's namespace): BPL, FPL
    and TPL per step (Cao et al. 2019, eqs. (11), (13), (15)) and their suprema (Theorem 11), as the command prints
    them.

    Raises
    ------
    InvalidInputError
        Bad options, matrices or readings (naming the command-line option).
    """
    from policyopt.studies.tpl_report import format_tpl_report, tpl_report

    start = time.perf_counter()
    budgets = _budgets(args)
    out = tpl_report(tpl_model(args), budgets, delta=args.delta, accept_refuted=args.accept_refuted)
    out["wall_time_s"] = time.perf_counter() - start
    return _report("tpl", out, format_tpl_report)


def budget_report(args) -> CommandReport:
    """``policyopt tpl-budget`` of parsed options (`args`: :class:`TplBudgetOptions` or the command line's
    namespace): budgets ε_1..ε_T meeting α-DP_T (Cao et al. 2019, Algorithms 7 and 8, or the utility-optimal
    allocation), as the command prints them.

    Raises
    ------
    InvalidInputError
        Bad options; a horizon over :data:`MAX_OPTIMAL_HORIZON` with the optimal method.
    """
    from policyopt.studies.tpl_report import format_tpl_budget_report, tpl_budget_report

    start = time.perf_counter()
    if args.method == "optimal" and args.horizon > MAX_OPTIMAL_HORIZON:
        raise InvalidInputError(f"--horizon {args.horizon} is too large for --method optimal (at most "
                                f"{MAX_OPTIMAL_HORIZON}); use --method quantification")
    out = tpl_budget_report(tpl_model(args), args.alpha, args.horizon, args.method, delta=args.delta,
                            accept_refuted=args.accept_refuted)
    out["wall_time_s"] = time.perf_counter() - start
    return _report("tpl-budget", out, format_tpl_budget_report)


def temporal_leakage(**options) -> CommandReport:
    """BPL, FPL and TPL of a budget sequence as ``policyopt tpl`` does them, with the model-free guarantee first
    unless the model passed its checks; the command's report.

    Parameters
    ----------
    **options
        The attributes of :class:`TplOptions` by keyword: the model (``pb``/``pf`` matrices, or ``data`` with
        ``markov_model``) and the budgets (``epsilon`` with ``horizon``, or ``budgets``).

    Returns
    -------
    CommandReport
        ``to_dict()`` is the command's ``--json`` object (its wall time aside), ``str()`` its text.

    Raises
    ------
    InvalidInputError
        An unknown keyword, a bad value, matrices or readings.

    Examples
    --------
    >>> import policyopt as po
    >>> r = po.temporal_leakage(pb=[[0.8, 0.2], [0.2, 0.8]], pf=[[0.8, 0.2], [0.1, 0.9]], epsilon=0.1, horizon=10)
    >>> r.fields["horizon"]
    10
    """
    return leakage_report(TplOptions.from_keywords("temporal_leakage", options))


def allocate_tpl_budgets(**options) -> CommandReport:
    """Budgets ε_1..ε_T that meet α-DP_T as ``policyopt tpl-budget`` allocates them; the command's report.

    Parameters
    ----------
    **options
        The attributes of :class:`TplBudgetOptions` by keyword: ``alpha`` and ``horizon`` (required), ``method``
        and the model options of ``tpl``.

    Returns
    -------
    CommandReport
        ``to_dict()`` is the command's ``--json`` object (its wall time aside), ``str()`` its text.

    Raises
    ------
    InvalidInputError
        An unknown keyword, a bad value, matrices or readings.
    """
    return budget_report(TplBudgetOptions.from_keywords("allocate_tpl_budgets", options))
