"""``policyopt schedule``: the optimal aging/publishing schedule (A, S_bar, epsilon_c) and its report."""

from __future__ import annotations

import json
import time

from policyopt.cli.options import (
    DEFAULT_MAX_PENALTY,
    DEFAULT_PLOT_EPOCHS,
    add_distributed_options,
    add_model_options,
    int_at_least,
    load_distributed_model,
    load_model,
    positive_float,
    wants_distributed,
)
from policyopt.errors import InvalidInputError
from policyopt.formatting import fmt_upper, fmt_value

__all__ = ["add_command", "run_schedule", "format_report"]


def add_command(sub) -> None:
    """Register the ``schedule`` sub-command on the sub-parsers `sub`."""
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
    add_model_options(sched)
    sched.add_argument("--max-penalty", type=positive_float("--max-penalty"), default=DEFAULT_MAX_PENALTY, metavar="F",
                       help=f"bound f̄ on the MSE of the released mean, squared value units (default {DEFAULT_MAX_PENALTY})")
    sched.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    sched.add_argument("--plot", metavar="FILE", help="draw ε(t) and AoI(t) of the chosen schedule over a few epochs "
                       "into FILE (.png, .pdf or .svg; needs matplotlib, the 'plot' extra)")
    sched.add_argument("--plot-epochs", type=int_at_least("--plot-epochs", 1), default=DEFAULT_PLOT_EPOCHS, metavar="N",
                       help=f"epochs drawn by --plot (default {DEFAULT_PLOT_EPOCHS})")
    add_distributed_options(sched)
    sched.set_defaults(handler=run_schedule)


def run_schedule(args) -> int:
    """Handler of ``policyopt schedule``: load the model, design the schedule, print text or JSON; exit code."""
    from policyopt.utility.penalty import MSEPenalty
    from policyopt.studies.schedule import design_schedule

    start = time.perf_counter()
    if args.plot is not None:
        from policyopt.studies.plots import check_plot_path, require_matplotlib

        if args.relax:
            raise InvalidInputError("--plot draws integer schedules (time in whole slots); omit --relax")
        check_plot_path(args.plot, "--plot")
        require_matplotlib("--plot")
    if wants_distributed(args):
        population, info, unit, penalty = load_distributed_model(args)
    else:
        population, info, unit = load_model(args)
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
            from policyopt.studies.plots import plot_schedule

            plot_schedule(
                out["A"], out["S_bar"], out["epsilon_c"], population, args.plot,
                epochs=args.plot_epochs, peak_risk=out["peak_risk"], title=info["source"],
            )
            out["plot"] = str(args.plot)
    out["wall_time_s"] = time.perf_counter() - start
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        print(format_report(out))
    if plot_error is not None:
        raise InvalidInputError(plot_error)
    return 0


def format_report(r: dict) -> str:
    """The text report of ``policyopt schedule`` from the JSON dictionary `r` (privacy bounds rounded up)."""
    m = r["model"]
    unit = f" {m['penalty_unit']}" if m.get("penalty_unit") else ""
    lines = [
        "policyopt schedule: peak age-dependent privacy risk (Zhang et al., problem (28))",
        f"model       : {m['source']}; {m['users']} users, {m['states']} states",
        f"envelope    : Δ(t) ≤ c·ρ^t with c = {fmt_upper(m['c'])}, ρ = {fmt_upper(m['rho'])} (t ≤ {m['envelope_horizon']} slots, ρ = λ*)",
    ]
    if m.get("excluded_users"):
        lines.append(f"excluded    : {len(m['excluded_users'])} users: " + "; ".join(f"{u} ({why})" for u, why in m["excluded_users"].items()))
    lines.append(f"bound       : MSE of the released mean ≤ f̄ = {fmt_value(r['max_penalty'])}{unit}")
    lines.append(f"status      : {r['status']}")
    if r["A"] is not None:
        lines += [
            f"schedule    : A = {fmt_value(r['A'], 10)} slots, S̄ = {fmt_value(r['S_bar'], 10)} slots, ε_C = {fmt_value(r['epsilon_c'], 10)} nats per release",
            f"peak risk   : ε* = {fmt_upper(r['peak_risk'])} nats"
            + ("" if r["method"] == "exact" else " ((39a) with the envelope: an upper bound on the exact ε* of integer schedules)"),
            f"penalty     : {fmt_value(r['penalty'])}{unit} at peak AoI {r['peak_aoi']} slots",
        ]
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
