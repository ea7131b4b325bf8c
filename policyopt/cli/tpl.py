"""``policyopt tpl`` and ``policyopt tpl-budget``: temporal privacy leakage and budget allocation (Cao et al. 2019)."""

from __future__ import annotations

import json
import time

from policyopt.app.inputs import (
    DEFAULT_STATES,
    MAX_STATES,
)
from policyopt.app.tpl import tpl_model
from policyopt.cli.options import (
    add_guarantee_options,
    int_at_least,
    positive_float,
    value_range_arg,
)
from policyopt.errors import InvalidInputError
from policyopt.studies.tpl_report import MAX_TPL_Z_STATES

__all__ = ["add_command", "MAX_HORIZON", "MAX_OPTIMAL_HORIZON", "MAX_BUDGET", "MIN_ALPHA"]

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


def _add_tpl_source(cmd) -> None:
    """Matrix / data source and guarantee options shared by ``tpl`` and ``tpl-budget``."""
    cmd.add_argument("--pb", metavar="M", help="backward matrix P_B: CSV/NPY file or inline rows \"0.8,0.2;0.2,0.8\"")
    cmd.add_argument("--pf", metavar="M", help="forward matrix P_F: CSV/NPY file or inline rows")
    cmd.add_argument("--data", metavar="CSV", help="estimate P_B, P_F per user from readings (bundled data by default)")
    cmd.add_argument("--states", type=int_at_least("--states", 2, MAX_STATES), metavar="K",
                     help=f"quantile states for data (default {DEFAULT_STATES}, at most {MAX_STATES})")
    cmd.add_argument("--value-range", type=value_range_arg("--value-range"), metavar="LO:HI",
                     help="public range of one reading (data units): readings are clipped into it before the quantile "
                     "states are set (data only; default: no clipping)")
    cmd.add_argument("--slot-length", metavar="DUR", default=None,
                     help="length of one slot of --data, e.g. 30min, 1h: the model check's lags are a week of slots "
                     "and the w-event windows a day and a week (data only; the bundled data: 1h; unknown: 168 lags, "
                     "windows of 24 and 168 steps)")
    cmd.add_argument("--markov-model", metavar="MODEL", default=None,
                     help="the Markov model of the readings the leakage assumes the adversary knows: chain (first-order "
                     "chain over the quantile states), order:K (the state is the last K states), hmm:R (R hidden "
                     "regimes) or auto (the simplest of chain, order:2, hmm:2, order:3, hmm:3 that passes); checked "
                     "against the readings on held-out time (Markov test and Δ(t) check at lags up to a week, level "
                     "0.95) before BPL/FPL/TPL are stated; for order:K and hmm:R they are computed on the augmented "
                     f"chain Z (at most {MAX_TPL_Z_STATES} states); phase chains are time-inhomogeneous and refused "
                     "(data only; default chain)")
    add_guarantee_options(cmd, design=False, markov=False)
    cmd.add_argument("--accept-refuted", metavar="REASON", default=None,
                     help="compute and print a refuted model's BPL/FPL/TPL anyway, marked, with this reason recorded; "
                     "the guarantee stated first stays the model-free one (data only)")
    cmd.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def add_command(sub) -> None:
    """Register the ``tpl`` and ``tpl-budget`` sub-commands on the sub-parsers `sub`."""
    tpl = sub.add_parser(
        "tpl",
        help="backward, forward and total temporal privacy leakage (BPL/FPL/TPL) of a budget sequence",
        description="BPL, FPL and TPL per step (Cao et al. 2019, eqs. (11), (13), (15)) and their suprema (Theorem 11). "
        "Without --pb/--pf the matrices are estimated per home from the data (bundled data by default) under "
        "--markov-model, which is checked on held-out readings first: the leakage is stated as a bound only under a "
        "model that passed; otherwise the report leads with the guarantee that needs no model, the T releases "
        "composed ((ε, δ) by the PLD accountant, pure Σ ε_t).",
    )
    _add_tpl_source(tpl)
    tpl.add_argument("--epsilon", type=positive_float("--epsilon", MAX_BUDGET), metavar="E",
                     help=f"constant budget per step, nats (at most {MAX_BUDGET:g})")
    tpl.add_argument("--horizon", type=int_at_least("--horizon", 1, MAX_HORIZON), metavar="T",
                     help=f"number of steps (with --epsilon; at most {MAX_HORIZON})")
    tpl.add_argument("--budgets", metavar="FILE",
                     help=f"budgets ε_1..ε_T, comma/newline separated (each in [0, {MAX_BUDGET:g}] nats, at most "
                     f"{MAX_HORIZON} of them)")
    tpl.set_defaults(handler=_cmd_tpl)
    bud = sub.add_parser(
        "tpl-budget",
        help="budgets ε_1..ε_T that guarantee a target α-DP_T under temporal correlations",
        description="Allocate per-step budgets so that TPL_t ≤ α at every step (Cao et al. 2019, Algorithms 7 and 8; "
        "'optimal' minimises the total Laplace noise variance globally with SCIP).  On data the α-DP_T of the budgets "
        "holds only under a --markov-model that passed its checks on held-out readings; the model-free (ε, δ) of the "
        "budgets is always given.",
    )
    _add_tpl_source(bud)
    bud.add_argument("--alpha", type=positive_float("--alpha", MAX_BUDGET, MIN_ALPHA), required=True, metavar="A",
                     help=f"target α of α-DP_T, nats (from {MIN_ALPHA:g} to {MAX_BUDGET:g})")
    bud.add_argument("--horizon", type=int_at_least("--horizon", 1, MAX_BUDGET_HORIZON), required=True, metavar="T",
                     help=f"number of steps (at most {MAX_BUDGET_HORIZON}: the allocation re-runs the BPL/FPL recursions of "
                     "every user, about 20 s at the limit for the bundled homes, whose slowly mixing chains approach "
                     f"their fixed point over 10^5 steps; {MAX_OPTIMAL_HORIZON} with --method optimal)")
    bud.add_argument("--method", choices=("upper-bound", "quantification", "optimal"), default="quantification",
                     help="Algorithm 7 (upper-bound), Algorithm 8 (quantification, default) or the utility-optimal allocation")
    bud.set_defaults(handler=_cmd_tpl_budget)


def _print(out: dict, args, text) -> None:
    """One JSON object (--json) or the report's text."""
    from policyopt.studies.tpl_report import public_json

    if args.json:
        print(json.dumps(public_json(out), indent=2, ensure_ascii=False, allow_nan=False))
    else:
        print(text(out))


def _cmd_tpl(args) -> int:
    import numpy as np

    from policyopt.studies.tpl_report import format_tpl_report, tpl_report

    start = time.perf_counter()
    if args.budgets is not None:
        if args.epsilon is not None or args.horizon is not None:
            raise InvalidInputError("give either --budgets FILE or --epsilon E --horizon T, not both")
        from policyopt.io import read_budgets

        budgets = read_budgets(args.budgets, max_budget=MAX_BUDGET, max_count=MAX_HORIZON)
    else:
        if args.epsilon is None or args.horizon is None:
            raise InvalidInputError("give --epsilon E and --horizon T (or --budgets FILE)")
        budgets = np.full(args.horizon, args.epsilon)
    model = tpl_model(args)
    out = tpl_report(model, budgets, delta=args.delta, accept_refuted=args.accept_refuted)
    out["wall_time_s"] = time.perf_counter() - start
    _print(out, args, format_tpl_report)
    return 0


def _cmd_tpl_budget(args) -> int:
    from policyopt.studies.tpl_report import format_tpl_budget_report, tpl_budget_report

    start = time.perf_counter()
    if args.method == "optimal" and args.horizon > MAX_OPTIMAL_HORIZON:
        raise InvalidInputError(f"--horizon {args.horizon} is too large for --method optimal (at most "
                                f"{MAX_OPTIMAL_HORIZON}); use --method quantification")
    model = tpl_model(args)
    out = tpl_budget_report(model, args.alpha, args.horizon, args.method, delta=args.delta,
                            accept_refuted=args.accept_refuted)
    out["wall_time_s"] = time.perf_counter() - start
    _print(out, args, format_tpl_budget_report)
    return 0
