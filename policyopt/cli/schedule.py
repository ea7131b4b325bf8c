"""``policyopt schedule``: the optimal aging/publishing schedule (A, S_bar, epsilon_c) and its report."""

from __future__ import annotations

import json
import time

from policyopt.cli.options import (
    Deployment,
    BUNDLED_USERS,
    BUNDLED_VALUE_RANGE,
    DEFAULT_MAX_PENALTY,
    DEFAULT_PLOT_EPOCHS,
    MAX_PLOT_EPOCHS,
    add_distributed_options,
    add_model_options,
    check_table_size,
    deployment_penalty,
    int_at_least,
    load_deployment,
    load_distributed_model,
    positive_float,
    probability,
    wants_distributed,
)
from policyopt.errors import InvalidInputError

__all__ = ["add_command", "run_schedule"]

#: f̄ of the bundled pilot's documented deployment (kWh² on the mean of 10⁵ homes' hourly kWh).
BUNDLED_MAX_PENALTY = 1.5e-05
DEFAULT_CREDIBLE = 0.95
DEFAULT_DRAWS = 200
#: Most posterior draws (time: each re-fits and re-solves a simulated pilot).
MAX_DRAWS = 10_000
DEFAULT_SEED = 0


def add_command(sub) -> None:
    """Register the ``schedule`` sub-command on the sub-parsers `sub`."""
    sched = sub.add_parser(
        "schedule",
        help="optimal aging/publishing schedule (A, S_bar, epsilon_c) minimising the peak age-dependent risk",
        description=(
            "Choose the aging A (slots), inter-publish time S_bar (slots) and per-release budget epsilon_c (nats) "
            "minimising the peak age-dependent privacy risk (Zhang et al. 2024, problem (28), Theorem 4, eq. (30)) "
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
    sched.add_argument("--draws", type=int_at_least("--draws", 2, MAX_DRAWS), default=None, metavar="M",
                       help=f"posterior draws (simulated pilots) for --credible and --robust (default {DEFAULT_DRAWS}; at most "
                       f"{MAX_DRAWS}, about 4 ms each for the bundled pilot)")
    sched.add_argument("--seed", type=int_at_least("--seed", 0), default=None, metavar="N",
                       help=f"seed of the simulation generator for the posterior draws (default {DEFAULT_SEED}; "
                       "simulation only, never released noise)")
    sched.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    sched.add_argument("--plot", metavar="FILE", help="draw ε(t) and AoI(t) of the chosen schedule over a few epochs "
                       "into FILE (.png, .pdf or .svg; needs matplotlib, the 'plot' extra)")
    sched.add_argument("--plot-epochs", type=int_at_least("--plot-epochs", 1, MAX_PLOT_EPOCHS), default=None, metavar="N",
                       help=f"epochs drawn by --plot (default {DEFAULT_PLOT_EPOCHS}, at most {MAX_PLOT_EPOCHS}; only "
                       "with --plot)")
    add_distributed_options(sched)
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
    from policyopt.studies.schedule import design_schedule, format_report

    start = time.perf_counter()
    check_table_size(args)
    if args.plot_epochs is not None and args.plot is None:
        raise InvalidInputError(f"--plot-epochs {args.plot_epochs} applies to --plot only; add --plot FILE or omit it")
    if args.plot is not None:
        from policyopt.studies.plots import check_plot_path, require_matplotlib

        if args.relax:
            raise InvalidInputError("--plot draws integer schedules (time in whole slots); omit --relax")
        check_plot_path(args.plot, "--plot")
        require_matplotlib("--plot")
    penalty = None
    if wants_distributed(args):  # a Parquet set reduced on Dask (policyopt.studies.distributed)
        population, info, unit, penalty = load_distributed_model(args)
        dep = Deployment(population=population, info=info, unit=unit, users=penalty.users, value_range=None)
    else:
        dep = load_deployment(args)
    post = _posterior_options(args, dep)
    bundled = args.data is None and args.chain is None and args.matrix is None
    max_penalty = args.max_penalty
    if max_penalty is None:
        max_penalty = BUNDLED_MAX_PENALTY if bundled else DEFAULT_MAX_PENALTY
    population = dep.population
    penalty = deployment_penalty(dep) if penalty is None else penalty
    warnings = []
    if dep.value_range is None and (dep.fitted is not None or wants_distributed(args)):
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
    m["states"] = max(c.n_states for c in population.chains) if hasattr(population, "chains") else population.n_states
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

            # draw with the Δ(t) the design used: the --robust band when given, else the model's own Δ(t)
            label = None
            if robust_info is not None:
                label = f"the simultaneous posterior upper band, level {post['robust']:g} (--robust), as in the design"
            plot_schedule(
                out["A"], out["S_bar"], out["epsilon_c"], source, args.plot,
                epochs=DEFAULT_PLOT_EPOCHS if args.plot_epochs is None else args.plot_epochs, peak_risk=out["peak_risk"],
                title=dep.info["source"], max_tv_label=label,
            )
            out["plot"] = str(args.plot)
            out["plot_max_tv"] = (f"Δ(t) = {label}" if label else
                                  "Δ(t) of the model (eq. (12), point estimate for data), as in the design")
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
