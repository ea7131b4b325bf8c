"""``policyopt tpl`` and ``policyopt tpl-budget``: temporal privacy leakage and budget allocation (Cao et al. 2019)."""

from __future__ import annotations

import json
import math
import time

from policyopt.cli.options import DEFAULT_SMOOTHING, DEFAULT_STATES, MAX_STATES, int_at_least, positive_float
from policyopt.errors import InvalidInputError
from policyopt.formatting import check_text, fmt_exact, fmt_lower, fmt_upper, fmt_value, round_down

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
    """Matrix source options shared by ``tpl`` and ``tpl-budget``."""
    cmd.add_argument("--pb", metavar="M", help="backward matrix P_B: CSV/NPY file or inline rows \"0.8,0.2;0.2,0.8\"")
    cmd.add_argument("--pf", metavar="M", help="forward matrix P_F: CSV/NPY file or inline rows")
    cmd.add_argument("--data", metavar="CSV", help="estimate P_B, P_F per user from readings (bundled data by default)")
    cmd.add_argument("--states", type=int_at_least("--states", 2, MAX_STATES), metavar="K",
                     help=f"quantile states for data (default {DEFAULT_STATES}, at most {MAX_STATES})")
    cmd.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def add_command(sub) -> None:
    """Register the ``tpl`` and ``tpl-budget`` sub-commands on the sub-parsers `sub`."""
    tpl = sub.add_parser(
        "tpl",
        help="backward, forward and total temporal privacy leakage (BPL/FPL/TPL) of a budget sequence",
        description="BPL, FPL and TPL per step (Cao et al. 2019, eqs. (11), (13), (15)) and their suprema (Theorem 11). "
        "Without --pb/--pf the matrices are estimated per home from the data (bundled data by default).",
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
        "'optimal' minimises the total Laplace noise variance globally with SCIP).",
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


#: Lags (slots) at which ``tpl``/``tpl-budget`` check the fitted chain against the readings (a day of hourly slots).
TPL_CHECK_LAGS = 24


def _tpl_matrices(args):
    """(P_B, P_F, source, model_check) from --pb/--pf or estimated from data (``model_check`` ``None`` for matrices).

    On data, Cao et al.'s leakage is relative to an adversary who knows the fitted first-order chain exactly, so the
    chain is checked against the readings as ``schedule`` does (:func:`policyopt.studies.check_model.quick_check`,
    lags 1..:data:`TPL_CHECK_LAGS`).
    """
    if args.pb is not None or args.pf is not None:
        if args.data is not None or args.states is not None:
            raise InvalidInputError("give either --pb/--pf or --data/--states, not both")
        from policyopt.io import parse_matrix_arg

        P_B = None if args.pb is None else parse_matrix_arg(args.pb, "--pb")
        P_F = None if args.pf is None else parse_matrix_arg(args.pf, "--pf")
        if P_B is not None and P_F is not None and P_B.shape != P_F.shape:
            raise InvalidInputError(f"--pb is {P_B.shape[0]}×{P_B.shape[1]} but --pf is {P_F.shape[0]}×{P_F.shape[1]}; "
                                    "both describe the same states, so they must have the same size")
        return P_B, P_F, "matrices" + ("" if args.pb and args.pf else " (the missing one: correlation unknown, L ≡ 0)"), None
    from policyopt.models.estimation import fit_population

    if args.data is None:
        from policyopt.data import load_citylearn

        df, source = load_citylearn(), "bundled CityLearn 2022, 17 homes"
    else:
        from policyopt.io import read_readings_csv

        df, source = read_readings_csv(args.data), f"data {args.data}"
    fitted = fit_population(df, DEFAULT_STATES if args.states is None else args.states, smoothing=DEFAULT_SMOOTHING)
    P_B, P_F = fitted.temporal_matrices()
    from policyopt.studies.check_model import quick_check

    check = quick_check(fitted, df, 1, TPL_CHECK_LAGS)
    return P_B, P_F, f"{source}: P_B, P_F per user ({len(P_B)} users)", check


def _with_check(text: str, check) -> str:
    """The report with a ``model check`` line before its last (wall time) line; unchanged without a check."""
    if check is None:
        return text
    from policyopt.studies.check_model import format_summary

    lines = text.rstrip("\n").split("\n")
    line = (f"model check: {format_summary(check)}; BPL/FPL/TPL are relative to an adversary who knows these chains "
            "exactly (Cao et al.)")
    return "\n".join(lines[:-1] + [line] + lines[-1:])


#: A supremum that is finite but too close to the divergence threshold for a finite rounding bound (JSON string).
UNCERTIFIED = "finite, no certified bound: ε is at the edge of divergence (the fixed point's slope is 1 within rounding)"


def _suprema(P_B, P_F, epsilon: float) -> dict:
    """Theorem 11 suprema of BPL, FPL and TPL for a constant budget, rounded up; ``"divergent"`` where infinite."""
    from policyopt.privacy.tpl_supremum import supremum_upper

    def sup(P):
        """Theorem 11 supremum per user (ε where L ≡ 0); None if any user diverges."""
        mats = P if isinstance(P, list) else [P]
        vals = []
        for m in mats:
            if m is None:
                vals.append(epsilon)
                continue
            value = supremum_upper(m, epsilon)
            if value is None:
                return None
            if not math.isfinite(value):
                return UNCERTIFIED  # finite, but no finite rounding bound: ε at the edge of divergence
            vals.append(value)
        return vals

    b, f = sup(P_B), sup(P_F)
    out = {k: "divergent" if v is None else v if isinstance(v, str) else max(v) for k, v in (("bpl", b), ("fpl", f))}
    if b is None or f is None:
        out["tpl"] = "divergent"
    elif isinstance(b, str) or isinstance(f, str):
        out["tpl"] = UNCERTIFIED
    else:
        n = max(len(b), len(f))
        b = b * n if len(b) == 1 else b
        f = f * n if len(f) == 1 else f
        # per user, then the max (eq. 3); x, y are rounded up, the sum is rounded up once more
        out["tpl"] = max(math.nextafter(x + y - epsilon, math.inf) for x, y in zip(b, f))
    return out


def _cmd_tpl(args) -> int:
    import numpy as np

    from policyopt.privacy.tpl_leakage import leakage_upper

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
    P_B, P_F, source, check = _tpl_matrices(args)
    res = leakage_upper(P_B, P_F, budgets)  # every value rounded up (Cao et al. eqs. (13), (15), (10))
    if not (np.all(np.isfinite(res.tpl)) and np.all(np.isfinite(res.bpl)) and np.all(np.isfinite(res.fpl))):
        raise InvalidInputError("the leakage overflows a float for these budgets (TPL is not finite); use smaller "
                                "budgets or a shorter horizon")
    eps_sup = float(np.max(budgets))
    out = {
        "source": source,
        "budgets": budgets.tolist(),
        "bpl": res.bpl.tolist(),
        "fpl": res.fpl.tolist(),
        "tpl": res.tpl.tolist(),
        "max_tpl": res.tpl_level,
        "rounding_margin": res.margin,
        "supremum": _suprema(P_B, P_F, eps_sup),
        "supremum_epsilon": eps_sup,
        "model_check": check,
        "wall_time_s": time.perf_counter() - start,
    }
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False, allow_nan=False))
    else:
        from policyopt.privacy.tpl_leakage import format_leakage

        print(check_text(_with_check(format_leakage(res, source=source, supremum=out["supremum"],
                                                    wall_time_s=out["wall_time_s"]), check)))
    return 0


def _cmd_tpl_budget(args) -> int:
    import numpy as np

    from policyopt.problems.tpl_budget import BudgetAllocationProblem

    from policyopt.privacy.tpl_leakage import leakage_upper

    start = time.perf_counter()
    if args.method == "optimal" and args.horizon > MAX_OPTIMAL_HORIZON:
        raise InvalidInputError(f"--horizon {args.horizon} is too large for --method optimal (at most "
                                f"{MAX_OPTIMAL_HORIZON}); use --method quantification")
    P_B, P_F, source, check = _tpl_matrices(args)
    problem = BudgetAllocationProblem(P_B, P_F, args.alpha, args.horizon)
    sol = problem.solve(args.method)
    naive = leakage_upper(P_B, P_F, np.full(args.horizon, args.alpha))  # ε_t = α, ignoring the correlations
    out = {
        "source": source,
        "status": sol.status.value,
        "method": args.method,
        "alpha": args.alpha,
        "horizon": args.horizon,
        "budgets": None,
        "max_tpl": None,
        "total_variance": None,
        "message": sol.message,
        "naive": {"epsilon": args.alpha, "max_tpl": naive.tpl_level},
        "model_check": check,
    }
    if sol.decision is not None:
        budgets = np.asarray(sol.decision["budgets"], dtype=float)
        after = leakage_upper(P_B, P_F, budgets)  # certified by the solver: after.tpl_level ≤ α
        out.update(
            budgets=budgets.tolist(),
            max_tpl=after.tpl_level,
            total_variance=sol.values.get("total_variance", sol.objective),
            bpl=after.bpl.tolist(),
            fpl=after.fpl.tolist(),
            tpl=after.tpl.tolist(),
            budget_shrink=sol.values.get("budget_shrink"),
            rounding_margin=after.margin,
        )
        # every reported solver field (README: gap, proof, dual_bound, lp_bound, obbt_rounds, eps_lo, eps_hi, phase
        # times, warm_start_accepted, scip_status, nodes, ...); the verified values above are never overwritten
        out.update({k: v for k, v in sol.values.items() if k not in out and k != "alpha"})
        for key in ("dual_bound", "lp_bound"):  # lower bounds on the least total variance: rounded down
            if out.get(key) is not None:
                out[key] = round_down(out[key])
    out["wall_time_s"] = time.perf_counter() - start
    if args.json:
        from policyopt.formatting import json_clean

        print(json.dumps(json_clean(out), indent=2, ensure_ascii=False))
    else:
        lines = [
            f"policyopt tpl-budget: budgets for α = {fmt_value(args.alpha)}-DP_T over {args.horizon} steps ({args.method})",
            f"model      : {source}",
            f"status     : {out['status']}",
            f"message    : {sol.message}",
            f"before     : ε_t = α every step gives max TPL = {fmt_upper(naive.tpl_level)} nats",
        ]
        if out["budgets"] is not None:
            b = out["budgets"]
            mid = b[1:-1]
            if len(b) == 1:
                shown = f"ε_1 = {fmt_exact(b[0])} nats"
            elif not mid:
                shown = f"ε_1 = {fmt_exact(b[0])}, ε_T = {fmt_exact(b[-1])} nats"
            elif min(mid) == max(mid):
                shown = (f"ε_1 = {fmt_exact(b[0])}, ε_2..ε_{{T−1}} = {fmt_exact(mid[0])}, "
                         f"ε_T = {fmt_exact(b[-1])} nats")
            else:
                shown = (f"ε_1 = {fmt_exact(b[0])}, ε_2..ε_{{T−1}} from {fmt_exact(min(mid))} to "
                         f"{fmt_exact(max(mid))} (varying; all T in --json), ε_T = {fmt_exact(b[-1])} nats")
            lines += [
                f"budgets    : {shown}",
                f"after      : max TPL = {fmt_upper(out['max_tpl'], 15)} nats (rounded up; ≤ α in exact arithmetic)",
                f"variance   : Σ 2(Δf/ε_t)² = {fmt_value(out['total_variance'])} (Δf = 1)",
            ]
            saved = [(name, out.get(f"savings_vs_{key}"), out.get(f"variance_{key}"))
                     for key, name in (("quantification", "Algorithm 8 (quantification)"),
                                       ("upper_bound", "Algorithm 7 (upper bound)"))]
            saved = [s for s in saved if s[1] is not None and s[2] is not None]
            if saved:  # the saving is never overstated: percentages rounded down
                lines.append("saving     : the optimum's noise variance is " + " and ".join(
                    f"{math.floor(10000 * s) / 100:g}% below that of {name[:-1]}, {fmt_value(v)})" for name, s, v in saved))
            if out.get("gap") is not None:
                lines.append(f"proof      : relative gap {fmt_value(out['gap'], 3)} ({out.get('proof') or 'no proof'}; "
                             f"lower bound {fmt_lower(out.get('dual_bound') if out.get('proof') == 'scip' else out.get('lp_bound'))})")
        lines.append(f"wall time  : {out['wall_time_s']:.3f} s")
        print(check_text(_with_check("\n".join(lines), check)))
    return 0
