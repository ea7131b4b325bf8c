"""``policyopt schedule``: the optimal aging/publishing schedule (A, S_bar, epsilon_c) and its report."""

from __future__ import annotations

import json
import time

from policyopt.cli.options import (
    BUNDLED_USERS,
    BUNDLED_VALUE_RANGE,
    DEFAULT_MAX_PENALTY,
    DEFAULT_PLOT_EPOCHS,
    add_model_options,
    deployment_penalty,
    int_at_least,
    load_deployment,
    positive_float,
    probability,
)
from policyopt.errors import InvalidInputError
from policyopt.formatting import fmt_upper, fmt_value

__all__ = ["add_command", "run_schedule", "format_report"]

#: f̄ of the bundled pilot's documented deployment (kWh² on the mean of 10⁵ homes' hourly kWh).
BUNDLED_MAX_PENALTY = 1.5e-05
DEFAULT_CREDIBLE = 0.95
DEFAULT_DRAWS = 200
DEFAULT_SEED = 0


def add_command(sub) -> None:
    """Register the ``schedule`` sub-command on the sub-parsers `sub`."""
    sched = sub.add_parser(
        "schedule",
        help="optimal aging/publishing schedule (A, S_bar, epsilon_c) minimising the peak age-dependent risk",
        description=(
            "Choose the aging A (slots), inter-publish time S_bar (slots) and per-release budget epsilon_c (nats) "
            "minimising the peak age-dependent privacy risk (Zhang et al., problem (28), Theorem 4, eq. (30)) "
            "subject to an MSE bound on the released mean of a deployment of I users.  Without a model option the "
            "bundled CityLearn 2022 pilot (17 homes, hourly kWh) designs a documented deployment: "
            f"I = {BUNDLED_USERS} homes, readings in {BUNDLED_VALUE_RANGE[0]:g}:{BUNDLED_VALUE_RANGE[1]:g} kWh, "
            f"f̄ = {BUNDLED_MAX_PENALTY:g} kWh^2."
        ),
    )
    add_model_options(sched)
    sched.add_argument("--max-penalty", type=positive_float("--max-penalty"), default=None, metavar="F",
                       help=f"bound f̄ on the MSE of the released mean, squared value units (default {BUNDLED_MAX_PENALTY:g} "
                       f"for the bundled pilot, {DEFAULT_MAX_PENALTY} otherwise)")
    sched.add_argument("--min-row-transitions", type=int_at_least("--min-row-transitions", 1), default=None, metavar="N",
                       help="a (user, state) row observed fewer times is sparse: listed in model.sparse_states, and a "
                       "warning is given when it sets Δ(t) at the chosen A or S_bar (data only; default 30)")
    sched.add_argument("--credible", type=probability("--credible"), default=None, metavar="LEVEL",
                       help=f"posterior check of the chosen schedule: median and upper LEVEL quantile of ε* over Dirichlet "
                       f"posterior draws of the chains, a Bayesian credible statement, not a proof (data only; default "
                       f"{DEFAULT_CREDIBLE})")
    sched.add_argument("--robust", type=probability("--robust"), default=None, metavar="LEVEL",
                       help="design against a simultaneous posterior upper band of Δ(t) (t ≤ max(A_MAX, S_MAX) + 1) that "
                       "holds for the whole curve with posterior probability LEVEL (data only; exact method)")
    sched.add_argument("--draws", type=int_at_least("--draws", 2), default=None, metavar="M",
                       help=f"posterior draws (simulated pilots) for --credible and --robust (default {DEFAULT_DRAWS})")
    sched.add_argument("--seed", type=int_at_least("--seed", 0), default=None, metavar="N",
                       help=f"seed of the simulation generator for the posterior draws (default {DEFAULT_SEED}; "
                       "simulation only, never released noise)")
    sched.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    sched.add_argument("--plot", metavar="FILE", help="draw ε(t) and AoI(t) of the chosen schedule over a few epochs "
                       "into FILE (.png, .pdf or .svg; needs matplotlib, the 'plot' extra)")
    sched.add_argument("--plot-epochs", type=int_at_least("--plot-epochs", 1), default=DEFAULT_PLOT_EPOCHS, metavar="N",
                       help=f"epochs drawn by --plot (default {DEFAULT_PLOT_EPOCHS})")
    sched.set_defaults(handler=run_schedule)


def _posterior_options(args, dep) -> dict:
    """Resolve --min-row-transitions/--credible/--robust/--draws/--seed; refuse them without data."""
    given = {n: getattr(args, n) for n in ("min_row_transitions", "credible", "robust", "draws", "seed")}
    if dep.fitted is None:
        extra = [f"--{n.replace('_', '-')}" for n, v in given.items() if v is not None]
        if extra:
            raise InvalidInputError(f"{', '.join(extra)} applies to --data (or the bundled data) only; omit it with --chain/--matrix")
        return {}
    if given["robust"] is not None and args.method != "exact":
        raise InvalidInputError(f"--robust designs with the exact Δ(t) band: use --method exact, not {args.method!r}")
    if given["robust"] is not None and args.relax:
        raise InvalidInputError("--robust designs integer schedules with the exact solver; omit --relax")
    if given["credible"] is not None and args.relax:
        raise InvalidInputError("--credible checks integer schedules (whole slots); omit --relax")
    if dep.fitted.smoothing <= 0 and (given["credible"] is not None or given["robust"] is not None):
        raise InvalidInputError("--credible/--robust need --smoothing > 0 (the Dirichlet prior of the posterior)")
    from policyopt.models.estimation import DEFAULT_MIN_ROW_TRANSITIONS

    return {
        "min_row_transitions": DEFAULT_MIN_ROW_TRANSITIONS if given["min_row_transitions"] is None else given["min_row_transitions"],
        "credible": DEFAULT_CREDIBLE if given["credible"] is None else given["credible"],
        "robust": given["robust"],
        "draws": DEFAULT_DRAWS if given["draws"] is None else given["draws"],
        "seed": DEFAULT_SEED if given["seed"] is None else given["seed"],
    }


def run_schedule(args) -> int:
    """Handler of ``policyopt schedule``: load the model, design the schedule, print text or JSON; exit code."""
    import numpy as np

    from policyopt.studies.deployment import credible_peak_risk, explain, robust_source, sparse_row_warnings
    from policyopt.studies.schedule import design_schedule

    start = time.perf_counter()
    if args.plot is not None:
        from policyopt.studies.plots import check_plot_path, require_matplotlib

        if args.relax:
            raise InvalidInputError("--plot draws integer schedules (time in whole slots); omit --relax")
        check_plot_path(args.plot, "--plot")
        require_matplotlib("--plot")
    dep = load_deployment(args)
    post = _posterior_options(args, dep)
    bundled = args.data is None and args.chain is None and args.matrix is None
    max_penalty = args.max_penalty
    if max_penalty is None:
        max_penalty = BUNDLED_MAX_PENALTY if bundled else DEFAULT_MAX_PENALTY
    population = dep.population
    penalty = deployment_penalty(dep)
    warnings = []
    if dep.fitted is not None and dep.value_range is None:
        lo, hi = penalty.value_range
        warnings.append(
            f"the value range [{lo:.6g}, {hi:.6g}] (sensitivity (HI-LO)/I) was derived from the data, which is not "
            "differentially private: declare a public range with --value-range LO:HI"
        )
    rng = np.random.default_rng(post["seed"]) if post else None  # simulation only (posterior draws), never released noise
    source, robust_info = population, None
    if post and post["robust"] is not None:
        source, robust_info = robust_source(dep.fitted, max(args.max_age, args.max_interval) + 1, level=post["robust"],
                                            draws=post["draws"], rng=rng)
    report = design_schedule(
        source,
        max_penalty=max_penalty,
        A_max=args.max_age,
        S_max=args.max_interval,
        penalty=penalty,
        releases=args.releases,
        model_info=dep.info,
        method=args.method,
        relax=args.relax,
    )
    out = report.to_dict()
    m = out["model"]
    m["states"] = max(c.n_states for c in population.chains)
    if robust_info is not None:
        m["delta_source"] = f"simultaneous posterior upper band of Δ(t) (level {post['robust']})"
        out["robust"] = robust_info
    if dep.fitted is not None:
        rows = dep.fitted.row_transitions()
        m["row_transitions"] = {u: r.tolist() for u, r in rows.items()}
        m["min_row_transitions"] = post["min_row_transitions"]
        m["sparse_states"] = dep.fitted.sparse_states(post["min_row_transitions"])
        out["credible"] = None  # replaced below when there is an integer schedule to check
        if out["A"] is not None and not args.relax:
            witnesses, sparse_warn = sparse_row_warnings(
                dep.fitted, {"A": int(out["A"]), "S_bar": int(out["S_bar"])}, post["min_row_transitions"]
            )
            m["max_tv_witnesses"] = witnesses
            warnings += sparse_warn
            cred = credible_peak_risk(dep.fitted, int(out["A"]), int(out["S_bar"]), float(out["epsilon_c"]),
                                      level=post["credible"], draws=post["draws"], rng=rng)
            cred["seed"] = post["seed"]
            out["credible"] = cred
            if cred["condition_31_fails"] > 1.0 - cred["level"]:
                warnings.append(
                    f"condition (31) fails for {100 * cred['condition_31_fails']:.1f}% of the posterior draws: the schedule's "
                    "guarantee is not credible for the plausible chains; use --robust LEVEL, fewer --states or longer data"
                )
    out["warnings"] = warnings
    out["explanation"] = explain(out)
    plot_error = None
    if args.plot is not None:
        out["plot"] = None
        if out["A"] is None:
            plot_error = f"--plot: no schedule to draw (status {out['status']})"
        else:
            from policyopt.studies.plots import plot_schedule

            plot_schedule(
                out["A"], out["S_bar"], out["epsilon_c"], population, args.plot,
                epochs=args.plot_epochs, peak_risk=out["peak_risk"], title=dep.info["source"],
            )
            out["plot"] = str(args.plot)
    from policyopt.formatting import json_clean

    out = json_clean(out)
    out["wall_time_s"] = time.perf_counter() - start
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False, allow_nan=False))
    else:
        print(format_report(out))
    if plot_error is not None:
        raise InvalidInputError(plot_error)
    return 0


def format_report(r: dict) -> str:
    """The text report of ``policyopt schedule`` from its JSON dictionary `r`: the model and deployment, the schedule
    as an instruction, the benchmarks, caveats (privacy bounds rounded up)."""
    m = r["model"]
    unit = f" {m['penalty_unit']}" if m.get("penalty_unit") else ""
    vunit = " kWh" if m.get("penalty_unit") == "kWh^2" else ""
    users, pilot = m.get("users"), m.get("pilot_users")
    lines = [
        "policyopt schedule: peak age-dependent privacy risk (Zhang et al., problem (28))",
    ]
    if pilot is not None and users != pilot:
        lines.append(f"model       : {m['source']}; {pilot} pilot users, {m['states']} states")
        lines.append(f"deployment  : I = {users} users, each following one of the {pilot} pilot chains in equal shares")
    else:
        lines.append(f"model       : {m['source']}; {m['users']} users, {m['states']} states")
    if m.get("value_range") is not None:
        lo, hi = m["value_range"]
        how = "declared, public" if m.get("value_range_declared") else "from the data (NOT private)"
        clip = f"; {m['clipped_readings']} readings clipped" if m.get("clipped_readings") else ""
        lines.append(
            f"value range : [{fmt_value(lo)}, {fmt_value(hi)}]{vunit} ({how}{clip}); sensitivity of the mean "
            f"Δf = (HI − LO)/I = {fmt_value(m.get('sensitivity'))}{vunit}"
        )
    if m.get("delta_source"):
        lines.append(f"Δ(t)        : {m['delta_source']}")
    lines.append(
        f"envelope    : Δ(t) ≤ c·ρ^t with c = {fmt_upper(m['c'])}, ρ = {fmt_upper(m['rho'])} (t ≤ {m['envelope_horizon']} slots, ρ = λ*)"
    )
    if m.get("excluded_users"):
        lines.append(f"excluded    : {len(m['excluded_users'])} users: " + "; ".join(f"{u} ({why})" for u, why in m["excluded_users"].items()))
    if m.get("sparse_states") is not None:
        sp = m["sparse_states"]
        lines.append(
            f"estimation  : {len(sp)} (user, state) rows observed fewer than {m['min_row_transitions']} times"
            + (": " + ", ".join(f"{x['user']}/{x['state']} ({x['transitions']})" for x in sp[:6]) + (" …" if len(sp) > 6 else "") if sp else "")
        )
    lines.append(f"bound       : MSE of the released mean ≤ f̄ = {fmt_value(r['max_penalty'])}{unit}")
    low, high = (m.get("tradeoff_range") or [None, None])[:2]
    if low is not None:
        lines.append(
            f"trade-off   : a finite optimum exists for f̄ between {fmt_value(low)}{unit} (smallest MSE reachable under (31)) "
            f"and {fmt_value(high)}{unit} (staleness limit)"
        )
    lines.append(f"status      : {r['status']}")
    if r["A"] is not None:
        lines += [
            f"schedule    : A = {fmt_value(r['A'], 10)} slots, S̄ = {fmt_value(r['S_bar'], 10)} slots, ε_C = {fmt_value(r['epsilon_c'], 10)} nats per release",
            f"peak risk   : ε* = {fmt_upper(r['peak_risk'])} nats"
            + ("" if r["method"] == "exact" else " ((39a) with the envelope: an upper bound on the exact ε* of integer schedules)"),
            f"penalty     : {fmt_value(r['penalty'])}{unit} at peak AoI {r['peak_aoi']} slots",
        ]
        if m.get("sensitivity") is not None and r["method"] == "exact":
            scale = m["sensitivity"] / r["epsilon_c"]
            which = "the current readings" if r["A"] == 0 else f"the readings taken {r['A']} slots earlier"
            lines.append(
                f"design      : every {r['S_bar']} slots, release the mean of {which} of the {users} users plus "
                f"Laplace noise of scale Δf/ε_C = {fmt_upper(scale)}{vunit}; no user's age-dependent risk ever "
                f"exceeds ε* = {fmt_upper(r['peak_risk'])} nats "
                + ("for any chains whose Δ(t) lies below the posterior band" if m.get("delta_source") else "under the estimated chains")
            )
    else:
        lines.append(f"min penalty : {fmt_value(r.get('min_penalty'))}{unit} (smallest achievable)")
    lines.append(f"message     : {r['message']}")
    na = r["benchmarks"]["no_aging"]
    if na["A"] is not None:
        lines.append(
            f"no aging    : S̄ = {na['S_bar']}, ε_C = {fmt_value(na['epsilon_c'], 10)}, ε* = {fmt_upper(na['peak_risk'])} nats ({na['status']})"
        )
    else:
        lines.append(f"no aging    : {na['status']}")
    no = r["benchmarks"]["noise_only"]
    if no["epsilon_c"] is not None:
        lines.append(
            f"noise only  : ε_C = {fmt_value(no['epsilon_c'], 10)} nats every slot; risk after {no['releases']} releases "
            f"= {fmt_upper(no['risk_after_releases'])} nats (Δ ≡ 1, grows without bound)"
        )
    else:
        lines.append("noise only  : infeasible")
    if r["A"] is not None and r.get("peak_risk") is not None:
        best = r["peak_risk"]
        if na["A"] is not None and na.get("peak_risk") is not None:
            if r["A"] == 0:
                lines.append("vs no aging : this schedule publishes fresh data (A = 0): it is the no-aging optimum itself")
            else:
                lines.append(
                    f"vs no aging : the best schedule without aging has ε* = {fmt_upper(na['peak_risk'])} nats, "
                    f"{na['peak_risk'] / best:.3g} times this schedule's" if best > 0 else
                    f"vs no aging : the best schedule without aging has ε* = {fmt_upper(na['peak_risk'])} nats"
                )
        else:
            lines.append("vs no aging : no schedule without aging meets f̄; aging is what makes this design possible")
        if no["epsilon_c"] is not None:
            n = no["risk_after_releases"] / no["epsilon_c"] if no["epsilon_c"] else None
            k = None if not no["epsilon_c"] else max(1, int(-(-best // no["epsilon_c"])))
            lines.append(
                f"vs fresh    : fresh noisy data every slot needs ε_C = {fmt_value(no['epsilon_c'], 6)} nats per slot and, "
                f"composed without temporal decay, passes this schedule's ε* after {k} slots and keeps growing "
                f"({fmt_upper(no['risk_after_releases'])} nats after {int(n)} slots)"
            )
        else:
            lines.append("vs fresh    : fresh noisy data every slot cannot meet f̄ at any budget")
    for sentence in r.get("explanation") or []:
        lines.append(f"meaning     : {sentence}")
    cred = r.get("credible")
    if "credible" in r and cred is None:
        lines.append("credible    : no schedule to check")
    if cred:
        lines.append(
            f"credible    : posterior median ε* = {fmt_upper(cred['median'])} nats, {100 * cred['level']:g}% upper "
            f"= {fmt_upper(cred['upper']) if cred['upper'] is not None else 'inf'} nats over {cred['draws']} simulated pilots "
            f"(seed {cred.get('seed')}); a Bayesian credible statement under the Dirichlet posterior of the chains, not a proof"
        )
    if r.get("robust"):
        rb = r["robust"]
        lines.append(
            f"robust      : designed against a Δ(t) band that holds for the whole curve in {100 * rb['coverage']:.1f}% of "
            f"{rb['draws']} posterior draws (level {rb['level']:g}; at most {fmt_upper(rb.get('max_ratio'))} × the point estimate)"
        )
    for w in r.get("warnings") or []:
        lines.append(f"warning     : {w}")
    if r.get("kkt"):
        k = r["kkt"]
        res = k.get("residual_40")
        lines.append(
            f"KKT         : branch {k.get('branch')}, (40) residual {fmt_value(res, 3)}, "
            f"{'passed' if k.get('passed') else 'FAILED'} (tolerance {fmt_value(k.get('tolerance'), 2)})"
        )
    if r.get("comparison"):
        lines.append("comparison  :")
        head = f"  {'method':<28} {'status':<11} {'objective':>12} {'bound':>12} {'gap':>9} {'time s':>8} {'KKT res':>9}"
        lines.append(head)
        for row in r["comparison"]:
            lines.append(
                f"  {row['method']:<28} {row['status']:<11} {fmt_upper(row['objective'], 8):>12} {fmt_value(row['bound'], 8):>12} "
                f"{fmt_value(row['gap'], 2):>9} {fmt_value(row['wall_time_s'], 3):>8} {fmt_value(row.get('kkt_residual'), 2):>9}"
            )
            if row["status"] == "unavailable":
                lines.append(f"    ({row['message']})")
    if r.get("plot"):
        lines.append(f"plot        : {r['plot']} (ε(t) and AoI(t) over the first epochs)")
    lines.append(f"wall time   : {r['wall_time_s']:.3f} s")
    return "\n".join(lines)
