"""Command-line interface: ``policyopt schedule ...``.

Bad input prints one line on stderr and exits with code 2, never a traceback.  Heavy
libraries are imported inside the command handlers so ``policyopt --help`` starts fast.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

from .errors import InvalidInputError, PolicyOptError

__all__ = ["main", "build_parser"]

DEFAULT_MAX_PENALTY = 0.15
DEFAULT_STATES = 12
DEFAULT_USERS = 20
DEFAULT_MAX_AGE = 168
DEFAULT_MAX_INTERVAL = 168
DEFAULT_RELEASES = 24
DEFAULT_SMOOTHING = 0.01
DEFAULT_PLOT_EPOCHS = 4


class _OneLineParser(argparse.ArgumentParser):
    """argparse that reports usage errors on one line with exit code 2."""

    def error(self, message):  # noqa: D401 - argparse API
        """Print the usage error on one line and exit with code 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive_float(name):
    def parse(text):
        """Parse a positive finite float or raise ArgumentTypeError naming the option."""
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{name} must be a positive finite number, got {text!r}")
        return value

    return parse


def _int_at_least(name, lower):
    def parse(text):
        """Parse an integer ≥ `lower` or raise ArgumentTypeError naming the option."""
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < lower:
            raise argparse.ArgumentTypeError(f"{name} must be ≥ {lower}, got {text!r}")
        return value

    return parse


def _non_negative_float(name):
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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``policyopt`` command."""
    parser = _OneLineParser(
        prog="policyopt",
        description="Privacy-utility policy design for time-varying personal data (privacy in nats, time in slots).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_OneLineParser)
    sched = sub.add_parser(
        "schedule",
        help="optimal aging/publishing schedule (A, S_bar, epsilon_c) minimising the peak age-dependent risk",
        description=(
            "Choose the aging A (slots), inter-publish time S_bar (slots) and per-release budget epsilon_c (nats) "
            "minimising the peak age-dependent privacy risk (Zhang et al., problem (28), Theorem 4, eq. (30)) "
            "subject to an MSE bound on the released mean.  Without a model option the bundled CityLearn 2022 "
            "data (17 homes, hourly kWh) is used."
        ),
    )
    _add_model_options(sched)
    sched.add_argument("--max-penalty", type=_positive_float("--max-penalty"), default=DEFAULT_MAX_PENALTY, metavar="F",
                       help=f"bound f̄ on the MSE of the released mean, squared value units (default {DEFAULT_MAX_PENALTY})")
    sched.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    sched.add_argument("--plot", metavar="FILE", help="draw ε(t) and AoI(t) of the chosen schedule over a few epochs "
                       "into FILE (.png, .pdf or .svg; needs matplotlib, the 'plot' extra)")
    sched.add_argument("--plot-epochs", type=_int_at_least("--plot-epochs", 1), default=DEFAULT_PLOT_EPOCHS, metavar="N",
                       help=f"epochs drawn by --plot (default {DEFAULT_PLOT_EPOCHS})")
    sched.set_defaults(handler=_cmd_schedule)
    _add_tpl_commands(sub)
    # Further commands live in their own modules, each exposing add_command(sub) (one line per module):
    from policyopt.cli_discounted import add_command as _add_discounted
    _add_discounted(sub)
    from policyopt.cli_fran import add_command as _add_fran
    _add_fran(sub)
    from policyopt.cli_sweep import add_command as _add_sweep
    _add_sweep(sub)
    from policyopt.cli_publish import add_command as _add_publish
    _add_publish(sub)
    return parser


def _add_model_options(cmd) -> None:
    """Model and search options shared by ``schedule`` and ``sweep`` (one definition for both).

    Adds the model source (``--data`` | ``--chain`` | ``--matrix``), ``--states``, ``--users``,
    ``--max-age``, ``--max-interval``, ``--releases``, ``--smoothing``, ``--method`` and
    ``--relax``; each command adds its own ``--max-penalty`` (a value or a grid).
    """
    src = cmd.add_mutually_exclusive_group()
    src.add_argument("--data", metavar="CSV", help="long CSV with header user,time,value (time in integer slots)")
    src.add_argument("--chain", metavar="SPEC", help="two-state:p=P,q=Q (states valued -1/+1), eq. (43)")
    src.add_argument("--matrix", metavar="FILE", help="CSV/NPY transition matrix, K×K or (K+1)×K with state values first")
    cmd.add_argument("--states", type=_int_at_least("--states", 2), metavar="K",
                     help=f"quantile states for data (default {DEFAULT_STATES})")
    cmd.add_argument("--users", type=_int_at_least("--users", 1), metavar="I",
                     help=f"number of users for --chain/--matrix (default {DEFAULT_USERS}; taken from data otherwise)")
    cmd.add_argument("--max-age", type=_int_at_least("--max-age", 0), default=DEFAULT_MAX_AGE, metavar="A_MAX",
                     help=f"largest aging A considered, slots (default {DEFAULT_MAX_AGE})")
    cmd.add_argument("--max-interval", type=_int_at_least("--max-interval", 1), default=DEFAULT_MAX_INTERVAL,
                     metavar="S_MAX", help=f"largest inter-publish time S_bar considered, slots (default {DEFAULT_MAX_INTERVAL})")
    cmd.add_argument("--releases", type=_int_at_least("--releases", 1), default=DEFAULT_RELEASES, metavar="N",
                     help=f"releases after which the noise-only benchmark's risk is reported (default {DEFAULT_RELEASES})")
    cmd.add_argument("--smoothing", type=_non_negative_float("--smoothing"), default=None, metavar="S",
                     help=f"additive smoothing pseudo-count for estimated chains (default {DEFAULT_SMOOTHING})")
    cmd.add_argument("--method", choices=("exact", "heuristic", "cvxpy", "pyomo", "all"), default="exact",
                     help="exact: problem (28) with the exact Δ(t), integer (default); heuristic/cvxpy/pyomo: problem (39) "
                     "with the envelope Δ(t) ≤ c·ρ^t; all: every back end side by side")
    cmd.add_argument("--relax", action="store_true",
                     help="continuous relaxation of A and S_bar for the (39) back ends (cvxpy needs it)")


def _add_tpl_source(cmd) -> None:
    cmd.add_argument("--pb", metavar="M", help="backward matrix P_B: CSV/NPY file or inline rows \"0.8,0.2;0.2,0.8\"")
    cmd.add_argument("--pf", metavar="M", help="forward matrix P_F: CSV/NPY file or inline rows")
    cmd.add_argument("--data", metavar="CSV", help="estimate P_B, P_F per user from readings (bundled data by default)")
    cmd.add_argument("--states", type=_int_at_least("--states", 2), metavar="K",
                     help=f"quantile states for data (default {DEFAULT_STATES})")
    cmd.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def _add_tpl_commands(sub) -> None:
    tpl = sub.add_parser(
        "tpl",
        help="backward, forward and total temporal privacy leakage (BPL/FPL/TPL) of a budget sequence",
        description="BPL, FPL and TPL per step (Cao et al., eqs. (11), (13), (15)) and their suprema (Theorem 11). "
        "Without --pb/--pf the matrices are estimated per home from the data (bundled data by default).",
    )
    _add_tpl_source(tpl)
    tpl.add_argument("--epsilon", type=_positive_float("--epsilon"), metavar="E", help="constant budget per step, nats")
    tpl.add_argument("--horizon", type=_int_at_least("--horizon", 1), metavar="T", help="number of steps (with --epsilon)")
    tpl.add_argument("--budgets", metavar="FILE", help="budgets ε_1..ε_T, comma/newline separated")
    tpl.set_defaults(handler=_cmd_tpl)
    bud = sub.add_parser(
        "tpl-budget",
        help="budgets ε_1..ε_T that guarantee a target α-DP_T under temporal correlations",
        description="Allocate per-step budgets so that TPL_t ≤ α at every step (Cao et al., Algorithms 7 and 8; "
        "'optimal' minimises the total Laplace noise variance globally with SCIP).",
    )
    _add_tpl_source(bud)
    bud.add_argument("--alpha", type=_positive_float("--alpha"), required=True, metavar="A", help="target α of α-DP_T, nats")
    bud.add_argument("--horizon", type=_int_at_least("--horizon", 1), required=True, metavar="T", help="number of steps")
    bud.add_argument("--method", choices=("upper-bound", "quantification", "optimal"), default="quantification",
                     help="Algorithm 7 (upper-bound), Algorithm 8 (quantification, default) or the utility-optimal allocation")
    bud.set_defaults(handler=_cmd_tpl_budget)


def _tpl_matrices(args):
    """(P_B, P_F, source) from --pb/--pf or estimated from data."""
    if args.pb is not None or args.pf is not None:
        if args.data is not None or args.states is not None:
            raise InvalidInputError("give either --pb/--pf or --data/--states, not both")
        from .io import parse_matrix_arg

        P_B = None if args.pb is None else parse_matrix_arg(args.pb, "--pb")
        P_F = None if args.pf is None else parse_matrix_arg(args.pf, "--pf")
        return P_B, P_F, "matrices" + ("" if args.pb and args.pf else " (the missing one: correlation unknown, L ≡ 0)")
    from .estimation import fit_population

    if args.data is None:
        from .data import load_citylearn

        df, source = load_citylearn(), "bundled CityLearn 2022, 17 homes"
    else:
        from .io import read_readings_csv

        df, source = read_readings_csv(args.data), f"data {args.data}"
    fitted = fit_population(df, DEFAULT_STATES if args.states is None else args.states, smoothing=DEFAULT_SMOOTHING)
    P_B, P_F = fitted.temporal_matrices()
    return P_B, P_F, f"{source}: P_B, P_F per user ({len(P_B)} users)"


def _suprema(P_B, P_F, epsilon: float) -> dict:
    """Theorem 11 suprema of BPL, FPL and TPL for a constant budget; ``"divergent"`` where infinite."""
    from .tpl import supremum

    def sup(P):
        """Theorem 11 supremum per user (ε where L ≡ 0); None if any user diverges."""
        mats = P if isinstance(P, list) else [P]
        vals = []
        for m in mats:
            if m is None:
                vals.append(epsilon)
                continue
            res = supremum(m, epsilon)
            if res.value is None:
                return None
            vals.append(res.value)
        return vals

    b, f = sup(P_B), sup(P_F)
    n = max(len(b or [0]), len(f or [0]))
    out = {"bpl": "divergent" if b is None else max(b), "fpl": "divergent" if f is None else max(f)}
    if b is None or f is None:
        out["tpl"] = "divergent"
    else:
        b = b * n if len(b) == 1 else b
        f = f * n if len(f) == 1 else f
        out["tpl"] = max(x + y - epsilon for x, y in zip(b, f))  # per user, then the max (eq. 3)
    return out


def _cmd_tpl(args) -> int:
    import numpy as np

    from .tpl import leakage

    start = time.perf_counter()
    if args.budgets is not None:
        if args.epsilon is not None or args.horizon is not None:
            raise InvalidInputError("give either --budgets FILE or --epsilon E --horizon T, not both")
        from .io import read_budgets

        budgets = read_budgets(args.budgets)
    else:
        if args.epsilon is None or args.horizon is None:
            raise InvalidInputError("give --epsilon E and --horizon T (or --budgets FILE)")
        budgets = np.full(args.horizon, args.epsilon)
    P_B, P_F, source = _tpl_matrices(args)
    res = leakage(P_B, P_F, budgets)
    eps_sup = float(np.max(budgets))
    out = {
        "source": source,
        "budgets": budgets.tolist(),
        "bpl": res.bpl.tolist(),
        "fpl": res.fpl.tolist(),
        "tpl": res.tpl.tolist(),
        "max_tpl": res.tpl_level,
        "supremum": _suprema(P_B, P_F, eps_sup),
        "supremum_epsilon": eps_sup,
        "wall_time_s": time.perf_counter() - start,
    }
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        sup = out["supremum"]
        show = lambda v: v if isinstance(v, str) else _up(v)  # noqa: E731
        lines = [
            "policyopt tpl: temporal privacy leakage (Cao et al., eqs. (11), (13), (15); nats)",
            f"model    : {source}",
            f"steps    : {budgets.size}, budgets from {_g(float(budgets.min()))} to {_g(eps_sup)} nats",
            f"max TPL  : {_up(res.tpl_level)} nats (the release is α-DP_T for α ≥ this)",
            f"supremum : BPL {show(sup['bpl'])}, FPL {show(sup['fpl'])}, TPL {show(sup['tpl'])} "
            f"(Theorem 11, constant budget {_g(eps_sup)})",
            "   t        ε_t        BPL        FPL        TPL",
        ]
        T = budgets.size
        for t in sorted(set(list(range(min(T, 5))) + list(range(max(0, T - 3), T)))):
            lines.append(f"{t + 1:>4} {budgets[t]:>10.6g} {_up(res.bpl[t]):>10} {_up(res.fpl[t]):>10} {_up(res.tpl[t]):>10}")
        lines.append(f"wall time: {out['wall_time_s']:.3f} s")
        print("\n".join(lines))
    return 0


def _cmd_tpl_budget(args) -> int:
    import numpy as np

    from policyopt.problems.tpl_budget import BudgetAllocationProblem

    from .tpl import leakage

    start = time.perf_counter()
    P_B, P_F, source = _tpl_matrices(args)
    problem = BudgetAllocationProblem(P_B, P_F, args.alpha, args.horizon)
    sol = problem.solve(args.method)
    naive = leakage(P_B, P_F, np.full(args.horizon, args.alpha))  # ε_t = α, ignoring the correlations
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
    }
    if sol.decision is not None:
        budgets = np.asarray(sol.decision["budgets"], dtype=float)
        after = leakage(P_B, P_F, budgets)
        out.update(
            budgets=budgets.tolist(),
            max_tpl=after.tpl_level,
            total_variance=sol.values.get("total_variance", sol.objective),
            bpl=after.bpl.tolist(),
            fpl=after.fpl.tolist(),
            tpl=after.tpl.tolist(),
        )
        out.update({k: v for k, v in sol.values.items() if k.startswith("savings")})
    out["wall_time_s"] = time.perf_counter() - start
    if args.json:
        from .schedule import _json_clean

        print(json.dumps(_json_clean(out), indent=2, ensure_ascii=False))
    else:
        lines = [
            f"policyopt tpl-budget: budgets for α = {_g(args.alpha)}-DP_T over {args.horizon} steps ({args.method})",
            f"model      : {source}",
            f"status     : {out['status']}",
            f"message    : {sol.message}",
            f"before     : ε_t = α every step gives max TPL = {_up(naive.tpl_level)} nats",
        ]
        if out["budgets"] is not None:
            b = out["budgets"]
            lines += [
                f"budgets    : ε_1 = {_g(b[0], 10)}, ε_2..ε_{{T−1}} = {_g(b[len(b) // 2], 10)}, ε_T = {_g(b[-1], 10)} nats",
                f"after      : max TPL = {_up(out['max_tpl'], 15)} nats (verified ≤ α within 1e-9 relative)",
                f"variance   : Σ 2(Δf/ε_t)² = {_g(out['total_variance'])} (Δf = 1)",
            ]
        lines.append(f"wall time  : {out['wall_time_s']:.3f} s")
        print("\n".join(lines))
    return 0


def _load_model(args):
    """Population plus model facts from the command-line options."""
    from .markov import Population

    uses_data = args.chain is None and args.matrix is None
    if not uses_data:
        if args.states is not None:
            raise InvalidInputError("--states applies to --data (or the bundled data) only; omit it with --chain/--matrix")
        if args.smoothing is not None:
            raise InvalidInputError("--smoothing applies to --data (or the bundled data) only; omit it with --chain/--matrix")
        if args.chain is not None:
            from .io import parse_chain_spec

            chain = parse_chain_spec(args.chain)
            source = f"two-state chain {args.chain}"
        else:
            from .io import read_matrix

            chain = read_matrix(args.matrix)
            source = f"matrix {args.matrix}"
        users = DEFAULT_USERS if args.users is None else args.users
        return Population([chain], [users]), {"source": source, "excluded_users": {}}, ""

    from .estimation import fit_population

    if args.data is None:
        from .data import load_citylearn

        df = load_citylearn()
        source, unit = "bundled CityLearn 2022, 17 homes, hourly kWh", "kWh^2"
    else:
        from .io import read_readings_csv

        df = read_readings_csv(args.data)
        source, unit = f"data {args.data}", ""
    states = DEFAULT_STATES if args.states is None else args.states
    smoothing = DEFAULT_SMOOTHING if args.smoothing is None else args.smoothing
    fitted = fit_population(df, states, smoothing=smoothing, source=f"--data {args.data!r}" if args.data else "bundled data")
    if args.users is not None and args.users != fitted.population.n_users:
        raise InvalidInputError(
            f"--users {args.users} disagrees with the data, which has {fitted.population.n_users} usable users; "
            "omit --users when giving data"
        )
    info = {
        "source": source,
        "smoothing": smoothing,
        "state_values": fitted.quantizer.state_values.tolist(),
        "excluded_users": dict(fitted.excluded),
    }
    return fitted.population, info, unit


def _cmd_schedule(args) -> int:
    from .penalty import MSEPenalty
    from .schedule import design_schedule

    start = time.perf_counter()
    if args.plot is not None:
        from .plots import check_plot_path, require_matplotlib

        if args.relax:
            raise InvalidInputError("--plot draws integer schedules (time in whole slots); omit --relax")
        check_plot_path(args.plot, "--plot")
        require_matplotlib("--plot")
    population, info, unit = _load_model(args)
    penalty = MSEPenalty(population, unit=unit)
    report = design_schedule(
        population,
        max_penalty=args.max_penalty,
        A_max=args.max_age,
        S_max=args.max_interval,
        penalty=penalty,
        releases=args.releases,
        model_info=info,
        method=args.method,
        relax=args.relax,
    )
    out = report.to_dict()
    plot_error = None
    if args.plot is not None:
        out["plot"] = None
        if out["A"] is None:
            plot_error = f"--plot: no schedule to draw (status {out['status']})"
        else:
            from .plots import plot_schedule

            plot_schedule(
                out["A"], out["S_bar"], out["epsilon_c"], population, args.plot,
                epochs=args.plot_epochs, peak_risk=out["peak_risk"], title=info["source"],
            )
            out["plot"] = str(args.plot)
    out["wall_time_s"] = time.perf_counter() - start
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        print(_format_report(out))
    if plot_error is not None:
        raise InvalidInputError(plot_error)
    return 0


def _g(x, digits=6):
    return "—" if x is None else f"{x:.{digits}g}"


def _up(x, digits=6):
    """Format a privacy bound rounded *up* to `digits` significant digits (never understated)."""
    if x is None:
        return "—"
    from decimal import ROUND_CEILING, Decimal

    d = Decimal(repr(float(x)))
    if d == 0 or not d.is_finite():
        return f"{x:.{digits}g}"
    step = Decimal(1).scaleb(d.adjusted() - (digits - 1))
    return f"{float(d.quantize(step, rounding=ROUND_CEILING)):.{digits}g}"


def _format_report(r: dict) -> str:
    m = r["model"]
    unit = f" {m['penalty_unit']}" if m.get("penalty_unit") else ""
    lines = [
        "policyopt schedule: peak age-dependent privacy risk (Zhang et al., problem (28))",
        f"model       : {m['source']}; {m['users']} users, {m['states']} states",
        f"envelope    : Δ(t) ≤ c·ρ^t with c = {_up(m['c'])}, ρ = {_up(m['rho'])} (t ≤ {m['envelope_horizon']} slots, ρ = λ*)",
    ]
    if m.get("excluded_users"):
        lines.append(f"excluded    : {len(m['excluded_users'])} users: " + "; ".join(f"{u} ({why})" for u, why in m["excluded_users"].items()))
    lines.append(f"bound       : MSE of the released mean ≤ f̄ = {_g(r['max_penalty'])}{unit}")
    lines.append(f"status      : {r['status']}")
    if r["A"] is not None:
        lines += [
            f"schedule    : A = {_g(r['A'], 10)} slots, S̄ = {_g(r['S_bar'], 10)} slots, ε_C = {_g(r['epsilon_c'], 10)} nats per release",
            f"peak risk   : ε* = {_up(r['peak_risk'])} nats"
            + ("" if r["method"] == "exact" else " ((39a) with the envelope: an upper bound on the exact ε* of integer schedules)"),
            f"penalty     : {_g(r['penalty'])}{unit} at peak AoI {r['peak_aoi']} slots",
        ]
    else:
        lines.append(f"min penalty : {_g(r.get('min_penalty'))}{unit} (smallest achievable)")
    lines.append(f"message     : {r['message']}")
    na = r["benchmarks"]["no_aging"]
    if na["A"] is not None:
        lines.append(
            f"no aging    : S̄ = {na['S_bar']}, ε_C = {_g(na['epsilon_c'], 10)}, ε* = {_up(na['peak_risk'])} nats ({na['status']})"
        )
    else:
        lines.append(f"no aging    : {na['status']}")
    no = r["benchmarks"]["noise_only"]
    if no["epsilon_c"] is not None:
        lines.append(
            f"noise only  : ε_C = {_g(no['epsilon_c'], 10)} nats every slot; risk after {no['releases']} releases "
            f"= {_up(no['risk_after_releases'])} nats (Δ ≡ 1, grows without bound)"
        )
    else:
        lines.append("noise only  : infeasible")
    if r.get("kkt"):
        k = r["kkt"]
        res = k.get("residual_40")
        lines.append(
            f"KKT         : branch {k.get('branch')}, (40) residual {_g(res, 3)}, "
            f"{'passed' if k.get('passed') else 'FAILED'} (tolerance {_g(k.get('tolerance'), 2)})"
        )
    if r.get("comparison"):
        lines.append("comparison  :")
        head = f"  {'method':<28} {'status':<11} {'objective':>12} {'bound':>12} {'gap':>9} {'time s':>8} {'KKT res':>9}"
        lines.append(head)
        for row in r["comparison"]:
            lines.append(
                f"  {row['method']:<28} {row['status']:<11} {_up(row['objective'], 8):>12} {_g(row['bound'], 8):>12} "
                f"{_g(row['gap'], 2):>9} {_g(row['wall_time_s'], 3):>8} {_g(row.get('kkt_residual'), 2):>9}"
            )
            if row["status"] == "unavailable":
                lines.append(f"    ({row['message']})")
    if r.get("plot"):
        lines.append(f"plot        : {r['plot']} (ε(t) and AoI(t) over the first epochs)")
    lines.append(f"wall time   : {r['wall_time_s']:.3f} s")
    return "\n".join(lines)


def main(argv=None) -> int:
    """Entry point of the ``policyopt`` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return args.handler(args)
    except BrokenPipeError:  # output piped into e.g. `head`: not an error of the input
        sys.stderr.close()
        return 0
    except (PolicyOptError, OSError) as exc:
        text = " ".join(str(exc).split())
        print(f"policyopt: error: {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
