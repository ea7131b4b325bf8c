"""``policyopt schedule``: the optimal aging/publishing schedule (A, S_bar, epsilon_c) and its report."""

from __future__ import annotations

import json
import time

from policyopt.cli.options import (
    Deployment,
    BUNDLED_STATES,
    BUNDLED_USERS,
    BUNDLED_VALUE_RANGE,
    DEFAULT_PLOT_EPOCHS,
    DEFAULT_STATES,
    MAX_PLOT_EPOCHS,
    add_bound_options,
    add_distributed_options,
    add_guarantee_options,
    add_max_tv_options,
    max_tv_level,
    bound_from_args,
    add_model_options,
    check_table_size,
    deployment_penalty,
    int_at_least,
    load_deployment,
    load_distributed_model,
    probability,
    wants_distributed,
)
from policyopt.errors import InvalidInputError

__all__ = ["add_command", "run_schedule", "deployment_record"]

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
            f"I = {BUNDLED_USERS} homes, readings in {BUNDLED_VALUE_RANGE[0]:g}:{BUNDLED_VALUE_RANGE[1]:g} kWh.  "
            "With data, f̄ bounds the MSE of the released value against the current mean of the I users' readings, in the "
            "readings' unit squared (kWh^2 for the bundled pilot), estimated from the readings (--penalty readings)."
        ),
    )
    add_model_options(sched)
    add_bound_options(sched)
    sched.add_argument("--min-row-transitions", type=int_at_least("--min-row-transitions", 1), default=None, metavar="N",
                       help="a (user, state) row observed fewer times is sparse: listed in model.sparse_states, and a "
                       "warning is given when it sets Δ(t) at the chosen A or S_bar (data only; default 30)")
    sched.add_argument("--credible", type=probability("--credible"), default=None, metavar="LEVEL",
                       help=f"posterior check of the chosen schedule: median and upper LEVEL quantile of ε* over Dirichlet "
                       f"posterior draws of the chains (of the Z chain of a --markov-model; a parametric bootstrap for "
                       f"hmm:R), a Bayesian credible statement, not a proof (data only; default {DEFAULT_CREDIBLE})")
    sched.add_argument("--robust", type=probability("--robust"), default=None, metavar="LEVEL",
                       help="design against a simultaneous posterior upper band of Δ(t) (t ≤ max(A_MAX, S_MAX) + 1) that "
                       "holds for the whole curve with posterior probability LEVEL; with a --markov-model, the band of "
                       "its Δ_Z(t) (data only; exact method)")
    sched.add_argument("--draws", type=int_at_least("--draws", 2, MAX_DRAWS), default=None, metavar="M",
                       help=f"posterior draws (simulated pilots) for --credible and --robust (default {DEFAULT_DRAWS}; at most "
                       f"{MAX_DRAWS}, about 4 ms each for the bundled pilot; with --markov-model hmm:R each is one EM "
                       "refit per user)")
    sched.add_argument("--seed", type=int_at_least("--seed", 0), default=None, metavar="N",
                       help=f"seed of the simulation generator for the posterior draws (default {DEFAULT_SEED}; "
                       "simulation only, never released noise)")
    sched.add_argument("--slot-length", metavar="DUR", default=None,
                       help="length of one slot of --data, e.g. 30min, 1h (recorded in the JSON's deployment for "
                       "`publish`; the bundled data: 1h)")
    add_max_tv_options(sched)
    add_guarantee_options(sched)
    sched.add_argument("--backtest", type=probability("--backtest"), default=None, metavar="F",
                       help="design on the first fraction F of the readings' time range only, then replay the design on "
                       "the rest as `policyopt backtest --schedule` does (realised MSE of the deployment against f̄, "
                       "and Δ(t) at A and S_bar against the held-out data): a `backtest` line and JSON object "
                       "(data or the bundled year; not with --workers)")
    sched.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    sched.add_argument("--plot", metavar="FILE", help="draw ε(t) and AoI(t) of the chosen schedule over a few epochs "
                       "into FILE (.png, .pdf or .svg; needs matplotlib, the 'plot' extra)")
    sched.add_argument("--plot-epochs", type=int_at_least("--plot-epochs", 1, MAX_PLOT_EPOCHS), default=None, metavar="N",
                       help=f"epochs drawn by --plot (default: the fewest, at least {DEFAULT_PLOT_EPOCHS}, whose last "
                       f"in-epoch peak reaches 95%% of ε*; at most {MAX_PLOT_EPOCHS}; only with --plot)")
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


def deployment_record(args, dep, robust_level=None, empirical_level=None, markov_model=None, markov_seed: int = 0) -> dict:
    """What ``publish --schedule`` and ``ledger`` need to account for this design: the ``deployment`` JSON field.

    ``model`` is the :class:`~policyopt.deploy.ModelSpec` the chains were fitted with, pinned to its data's
    digest; ``data`` the design data's identity (:func:`policyopt.io.data_digest`; ``null`` for --chain/--matrix),
    ``users`` the deployment size I, ``value_range`` the declared public range (``null``: the data's own),
    ``max_tv_horizon`` the largest lag of Δ(t) the search used (slots), ``slot_length`` the slot's duration
    (``--slot-length``; else inferred from ``--data``'s time stamps; ``"1h"`` for the bundled data; else ``null``:
    not known).  ``model.max_tv_source`` says
    which Δ(t) the design used: ``chain``, ``posterior-band:LEVEL`` (``--robust``) or ``empirical:LEVEL``
    (``--max-tv empirical``, whose table ``empirical_max_tv.max_tv_used`` ``publish`` records in the ledger and
    accounts with); ``publish`` and ``ledger`` refuse a source they cannot reproduce (``posterior-band``) rather than
    account with another Δ(t).  ``model.markov_model`` (with ``markov_seed``) names the richer Markov model whose
    Δ_Z(t) the design used (`markov_model`, ``--markov-model`` other than the chains), which ``publish`` and ``ledger``
    refit on the pinned data and account with; absent for the first-order chains.
    """
    from policyopt.data import BUNDLED_SLOT_LENGTH
    from policyopt.deploy import ModelSpec
    from policyopt.io import data_digest, format_duration, parse_duration

    info = dep.info
    data = None
    bundled = args.data is None and args.chain is None and args.matrix is None
    slot_length = None if args.slot_length is None else format_duration(parse_duration(args.slot_length, "--slot-length"))
    if bundled:
        if slot_length is not None and slot_length != BUNDLED_SLOT_LENGTH:
            raise InvalidInputError(f"--slot-length {args.slot_length} is not the bundled data's slot ({BUNDLED_SLOT_LENGTH})")
        slot_length = BUNDLED_SLOT_LENGTH
    elif slot_length is None and getattr(dep, "slot_seconds", None) is not None:
        slot_length = format_duration(dep.slot_seconds)  # inferred from the data's time stamps
    if args.chain is not None:
        model = ModelSpec(args.chain)
    elif args.matrix is not None:
        model = ModelSpec(f"matrix:{args.matrix}").pinned("--matrix")
    else:
        data = data_digest(args.data, "--data")
        states = args.states if args.states is not None else BUNDLED_STATES if args.data is None else DEFAULT_STATES
        model = ModelSpec("bundled" if args.data is None else f"data:{args.data}", states, info.get("smoothing"),
                          dep.value_range, data["sha256"], data["bytes"])
    if robust_level is not None:
        model = ModelSpec(**{**model.to_dict(), "max_tv_source": f"posterior-band:{robust_level:g}"})
    if empirical_level is not None:
        model = ModelSpec(**{**model.to_dict(), "max_tv_source": f"empirical:{empirical_level:g}"})
    if markov_model is not None and markov_model != "chain":
        model = ModelSpec(**{**model.to_dict(), "markov_model": str(markov_model), "markov_seed": int(markov_seed)})
    return {
        "model": model.to_dict(),
        "data": data,
        "users": int(dep.users),
        "value_range": None if dep.value_range is None else [float(v) for v in dep.value_range],
        "max_tv_horizon": max(args.max_age, args.max_interval) + 1,
        "slot_length": slot_length,
        "backtest": dep.backtest if hasattr(dep, "backtest") else None,
    }


def _check_plot_options(args) -> None:
    """Refuse ``--plot-epochs`` without ``--plot``, ``--plot`` with ``--relax``, a bad plot path or no matplotlib."""
    if args.plot_epochs is not None and args.plot is None:
        raise InvalidInputError(f"--plot-epochs {args.plot_epochs} applies to --plot only; add --plot FILE or omit it")
    if args.plot is not None:
        from policyopt.studies.plots import check_plot_path, require_matplotlib

        if args.relax:
            raise InvalidInputError("--plot draws integer schedules (time in whole slots); omit --relax")
        check_plot_path(args.plot, "--plot")
        require_matplotlib("--plot")


def _rows_and_credible(out: dict, dep, post: dict, rng, warnings: list, relax: bool, chains_designed: bool,
                       chains_trusted: bool, markov_source, empirical) -> None:
    """The fitted chains' transition counts per row, the sparse-row witnesses and warnings, and the credible
    statement (posterior or bootstrap draws of Δ(t)) — only under chains or a Markov model not refuted — into `out`."""
    from policyopt.studies.deployment import sparse_row_warnings

    m = out["model"]
    if dep.fitted is not None and chains_designed:
        rows = dep.fitted.row_transitions()
        m["row_transitions"] = {u: r.tolist() for u, r in rows.items()}
        m["min_row_transitions"] = post["min_row_transitions"]
        m["sparse_states"] = dep.fitted.sparse_states(post["min_row_transitions"])
        out["credible"] = None  # replaced below when there is an integer schedule to check (under chains not refuted)
        if out["A"] is not None and not relax:
            witnesses, sparse_warn = sparse_row_warnings(
                dep.fitted, {"A": int(out["A"]), "S_bar": int(out["S_bar"])}, post["min_row_transitions"]
            )
            m["max_tv_witnesses"] = witnesses
            if chains_trusted:  # refuted chains: no sparse-row warning on their ε*, and no credible statement
                warnings += sparse_warn
                out["credible"] = _credible(dep.fitted, out, post, rng, warnings)
    elif markov_source is not None and empirical is None:  # Δ_Z of the chosen model: its posterior (bootstrap) draws
        out["credible"] = None  # as the chains': a posterior under a refuted model is no guarantee
        if out["A"] is not None and not relax and chains_trusted:
            out["credible"] = _credible(markov_source, out, post, rng, warnings)


def _draw_plot(out: dict, args, dep, source, post: dict, robust_info, empirical, markov_source) -> str | None:
    """``--plot``: draw ε(t) and AoI(t) of the schedule with the Δ(t) the design used and record it in `out`; the
    refusal to raise after the report is printed when there is no schedule to draw, else None."""
    plot_error = None
    if args.plot is not None:
        out["plot"] = None
        if out["A"] is None:
            plot_error = f"--plot: no schedule to draw (status {out['status']})"
        else:
            from policyopt.studies.plots import plot_schedule

            # draw with the Δ(t) the design used: the --robust band when given, else the model's own Δ(t)
            label = None
            if robust_info is not None and markov_source is not None:
                label = (f"the simultaneous {_draw_kind(markov_source)} upper band of Δ_Z of the Markov model "
                         f"{markov_source.name}, level {post['robust']:g} (--robust), as in the design")
            elif robust_info is not None:
                label = f"the simultaneous posterior upper band, level {post['robust']:g} (--robust), as in the design"
            elif empirical is not None:
                label = f"the data's {empirical.level:g} upper band (--max-tv), as designed"
            elif markov_source is not None:
                label = f"Δ_Z(t) of the Markov model {markov_source.name} (point estimate), as in the design"
            plot_schedule(
                out["A"], out["S_bar"], out["epsilon_c"], source, args.plot,
                epochs=args.plot_epochs, peak_risk=out["peak_risk"],
                title=dep.info["source"], max_tv_label=label,
            )
            out["plot"] = str(args.plot)
            out["plot_max_tv"] = (f"Δ(t) = {label}" if label else
                                  "Δ(t) of the model (eq. (12), point estimate for data), as in the design")
    return plot_error


def run_schedule(args) -> int:
    """Handler of ``policyopt schedule``: load the model, design the schedule, print text or JSON; exit code."""
    import numpy as np

    from policyopt.models.markov import Population
    from policyopt.studies.deployment import explain, robust_source
    from policyopt.studies.schedule import design_schedule
    from policyopt.studies.schedule_text import format_report

    start = time.perf_counter()
    check_table_size(args)
    _check_plot_options(args)
    penalty, dist_extra = None, None
    if args.backtest is not None and wants_distributed(args):
        raise InvalidInputError(f"--backtest {args.backtest:g} replays the design on readings held in memory; omit it "
                                "with --workers/--scheduler (run `policyopt backtest` on a sample instead)")
    if wants_distributed(args):  # a Parquet set reduced on Dask (policyopt.studies.distributed)
        population, info, unit, penalty, dist_extra = load_distributed_model(args)
        dep = Deployment(population=population, info=info, unit=unit, users=penalty.users, value_range=None)
    else:
        dep = load_deployment(args)
    post = _posterior_options(args, dep)
    max_penalty = bound_from_args(args)
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
    gs = guarantee_settings(args, dep)
    source, robust_info = population, None
    selection, markov_source = _markov_selection(args, dep, gs, post)  # refuses --max-tv empirical before estimating it
    empirical = _empirical_options(args, dep, post)
    if empirical is not None:
        source = empirical.source
    if markov_source is not None:
        source = markov_source
    if post and post["robust"] is not None:  # the band of the design's Δ(t): the chains', or Δ_Z of the chosen model
        source, robust_info = robust_source(dep.fitted if markov_source is None else markov_source,
                                            max(args.max_age, args.max_interval) + 1, level=post["robust"],
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
        chains=population if isinstance(population, Population) else None,
        privacy=gs.privacy,
        horizon=gs.horizon,
        delta=gs.delta,
        verdict=None,  # the guarantee follows the model check below (_state_guarantee)
    )
    out = report.to_dict()
    if args.max_rmse is not None:
        out["max_penalty_source"] = f"--max-rmse {args.max_rmse:g}: f̄ = R²"
    out["max_rmse"] = None if out["max_penalty"] is None else out["max_penalty"] ** 0.5
    m = out["model"]
    m["states"] = max(c.n_states for c in population.chains) if hasattr(population, "chains") else population.n_states
    if robust_info is not None:
        m["delta_source"] = (f"simultaneous posterior upper band of Δ(t) (level {post['robust']})" if markov_source is None
                             else f"simultaneous {_draw_kind(markov_source)} upper band of Δ_Z(t) of the Markov model "
                             f"{markov_source.name} (level {post['robust']})")
        out["robust"] = robust_info
    if empirical is not None:
        from policyopt.studies.empirical_design import add_empirical_design

        # Theorem 3 over the horizon only when its first-order premise passed (or its refutation is accepted): else the
        # horizon is designed model-free (_state_guarantee) and the O(H)-per-cell enumeration is not run
        chosen = None if selection is None else selection.chosen
        premise = (selection is None or gs.accept_refuted is not None
                   or (chosen is not None and not chosen.markov_test["refuted"]))
        add_empirical_design(out, empirical, penalty, max_penalty, args.max_age, args.max_interval,
                             horizon_design=premise)
    chains_designed = empirical is None and markov_source is None  # the fitted chains are the design's Δ(t)
    chains_trusted = selection is None or selection.passed or gs.accept_refuted is not None
    _rows_and_credible(out, dep, post, rng, warnings, args.relax, chains_designed, chains_trusted, markov_source,
                       empirical)
    out["deployment"] = deployment_record(args, dep, post.get("robust"), None if empirical is None else empirical.level,
                                          None if markov_source is None else markov_source.name,
                                          DEFAULT_SEED if post.get("seed") is None else post["seed"])
    if wants_distributed(args) and penalty is not dist_extra["chain_penalty"] and out.get("A") is not None \
            and float(out["A"]).is_integer() and float(out["S_bar"]).is_integer():
        from policyopt.studies.deployment import penalty_comparison

        out["penalty_comparison"] = penalty_comparison(penalty, None, int(out["A"]), int(out["S_bar"]),
                                                       chain_penalty=dist_extra["chain_penalty"])
    if wants_distributed(args):
        out["model_check"] = dist_extra["model_check"]
        out["model_check"].update(design_lags(out["model_check"], out.get("A"), out.get("S_bar")))
    if selection is not None:
        from policyopt.studies.markov_check import check_summary

        out["model_check"] = check_summary(selection, out.get("A"), out.get("S_bar"))
    out["warnings"] = warnings
    _state_guarantee(out, args, dep, gs, selection, empirical, penalty, source)
    out["explanation"] = explain(out)
    plot_error = _draw_plot(out, args, dep, source, post, robust_info, empirical, markov_source)
    from policyopt.formatting import json_clean

    out = json_clean(out)
    if dep.backtest is not None:
        out["backtest"] = _replay(out, dep)
    out["wall_time_s"] = time.perf_counter() - start
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False, allow_nan=False))
    else:
        print(_with_data_lines(format_report(out), out))
    if plot_error is not None:
        raise InvalidInputError(plot_error)
    return 0


def _draw_kind(model) -> str:
    """``bootstrap`` for a hidden-regime model (its Δ_Z draws refit simulated data), else ``posterior``."""
    return "bootstrap" if getattr(model, "kind", None) == "hmm" else "posterior"


def _credible(fitted, out: dict, post: dict, rng, warnings: list) -> dict:
    """``--credible``: :func:`~policyopt.studies.deployment.credible_peak_risk` of the design's integer schedule under
    the posterior draws of `fitted` (the chains, or the Markov model whose Δ_Z the design used), with its seed; a
    warning is appended to `warnings` when condition (31) fails for more than 1 − level of the draws."""
    from policyopt.models.markov_model import FittedMarkovModel
    from policyopt.studies.deployment import credible_peak_risk, posterior_draw_text

    cred = credible_peak_risk(fitted, int(out["A"]), int(out["S_bar"]), float(out["epsilon_c"]),
                              level=post["credible"], draws=post["draws"], rng=rng)
    cred["seed"] = post["seed"]
    name = fitted.name if isinstance(fitted, FittedMarkovModel) else None
    if name is not None:  # a Markov model (not the chains): say which, and what its draws are
        cred["model"] = name
        cred["posterior"] = posterior_draw_text(fitted)
    if cred["condition_31_fails"] > 1.0 - cred["level"]:
        whose = "the plausible chains" if name is None else f"the plausible {name} models"
        warnings.append(
            f"condition (31) fails for {100 * cred['condition_31_fails']:.1f}% of the {_draw_kind(fitted)} draws: the "
            f"schedule's guarantee is not credible for {whose}; use --robust LEVEL, fewer --states or longer data"
        )
    return cred


def _slot_seconds(args, dep=None) -> int | None:
    """The slot length (seconds) of the design's readings: ``--slot-length``, else the data's time stamps' (`dep`),
    1 h for the bundled data, else unknown."""
    from policyopt.io import parse_duration

    if getattr(args, "slot_length", None) is not None:
        return parse_duration(args.slot_length, "--slot-length")
    if getattr(dep, "slot_seconds", None) is not None:
        return int(dep.slot_seconds)
    if args.data is None and args.chain is None and args.matrix is None:
        from policyopt.data import BUNDLED_SLOT_LENGTH

        return parse_duration(BUNDLED_SLOT_LENGTH, "--slot-length")
    return None


def guarantee_settings(args, dep):
    """:class:`~policyopt.studies.guarantee.GuaranteeSettings` of a design run: the options with their defaults (δ from
    the deployment's I, the horizon from the slot length or the readings' span)."""
    from policyopt.studies.guarantee import GuaranteeSettings

    span = None
    if dep.readings is not None:
        t = dep.readings["time"]
        span = int(t.max()) - int(t.min()) + 1
    return GuaranteeSettings.resolve(users=int(dep.users), slot_seconds=_slot_seconds(args, dep), data_slots=span,
                                     markov_model=getattr(args, "markov_model", None), privacy=getattr(args, "privacy", None),
                                     delta=getattr(args, "delta", None), horizon=getattr(args, "horizon", None),
                                     accept_refuted=getattr(args, "accept_refuted", None))


def _markov_selection(args, dep, gs, post):
    """The model check of a design on data (``--markov-model``, default ``chain``) and, for another model than the
    chain, the Δ(t) source the design uses: that model fitted on every design reading (for ``auto``, the simplest
    that passed; the chains when none did).  ``(None, None)`` without readings in memory (``--chain``/``--matrix``,
    Dask).

    ``--robust``, ``--credible`` and ``--plot`` apply to that model's Δ_Z as to the chains' Δ(t) (the band and the
    credible interval from its ``log_max_tv_draws``: :func:`~policyopt.studies.deployment.robust_source`,
    :func:`~policyopt.studies.deployment.credible_peak_risk`).

    Raises
    ------
    InvalidInputError
        ``--markov-model`` other than ``chain`` without readings, on Dask, with ``--max-tv empirical`` (Δ̃(t) is
        estimated from lag pairs of the readings X, while Theorem 3 on the model's state Z needs Δ_Z), or a method
        other than exact.
    """
    from policyopt.studies.empirical_design import box_last_age

    spec = gs.markov_model
    serial = dep.fitted is not None and dep.readings is not None and not wants_distributed(args)
    if spec != "chain":
        if not serial:
            raise InvalidInputError(f"--markov-model {spec} is fitted to readings held in memory: give --data (or use the "
                                    "bundled data), serially (no --workers/--scheduler)")
        if args.max_tv is not None:
            from policyopt.studies.empirical_design import parse_max_tv_source

            if parse_max_tv_source(args.max_tv)[0] != "model":
                raise InvalidInputError(
                    f"--max-tv {args.max_tv} estimates Δ̃(t) from lag pairs of the readings X, but Theorem 3 on the state Z "
                    f"of --markov-model {spec} needs Δ_Z(t) of that model: omit --max-tv (for a margin over the "
                    "estimate of Δ_Z, design against its posterior band with --robust LEVEL)")
        if args.method != "exact" or args.relax:
            raise InvalidInputError(f"--markov-model {spec} designs with the exact Δ(t) table: use --method exact without "
                                    "--relax")
    if not serial:
        return None, None
    from policyopt.studies.markov_check import design_check, fit_for_design, periods_from_slot

    seed = DEFAULT_SEED if post.get("seed") is None else post["seed"]
    sel = design_check(dep.readings, dep.fitted.quantizer, dep.fitted.users, spec=spec, value_range=dep.value_range,
                       box_last_age=box_last_age(args.max_age, args.max_interval), slot_seconds=gs.slot_seconds,
                       seed=seed, smoothing=dep.fitted.smoothing)
    chosen = sel.chosen
    if spec == "chain" or chosen is None or chosen.model == "chain":
        return sel, None
    model = fit_for_design(chosen.model, dep.readings, dep.fitted.quantizer, dep.fitted.users, value_range=dep.value_range,
                           smoothing=dep.fitted.smoothing, seed=seed,
                           default_period=periods_from_slot(gs.slot_seconds)[0])
    return sel, model


def _state_guarantee(out: dict, args, dep, gs, selection, empirical, penalty, source) -> None:
    """The guarantee the report states first (:func:`~policyopt.studies.guarantee.apply_guarantee`): the model-based
    risk when the design's Markov model passed its checks (or was given without data), else the model-free one; with
    ``--max-tv empirical`` the premise checked is the first-order Markov test only (Δ(t) comes from the data), and
    a horizon design is redone model-free when the premise fails.  On Dask (``--workers``/``--scheduler``) the
    selection is the chains' held-out check run on the partitions
    (:func:`~policyopt.studies.distributed_heldout.held_out_check_partitions`, carried by ``model_check``), whose
    summary is redone here with the chosen schedule's lags, as the serial run's."""
    from policyopt.studies.guarantee import apply_guarantee, model_free_horizon_design, theorem3_horizon_design

    if selection is None and wants_distributed(args):
        # Dask: the chains' held-out check ran on the partitions (load_distributed_model); its summary carries the
        # selection, so the report states the serial summary with the chosen schedule's lags and follows its verdict
        selection = getattr(out.get("model_check"), "selection", None)
        if selection is not None:
            from policyopt.studies.markov_check import check_summary

            out["model_check"] = check_summary(selection, out.get("A"), out.get("S_bar"))
    if selection is None:
        if dep.fitted is None and not wants_distributed(args):  # --chain / --matrix: the user's model, no data
            model, verdict, why = ("the given chain" if args.chain else "the given matrix"), "assumed", "no data"
        else:  # readings without a held-out check (not reached: serial data and Dask runs both check)
            model, verdict, why = "chain", "unchecked", "no held-out check of the chains ran"
    else:
        c = selection.chosen
        if empirical is not None:
            ok = c is not None and not c.markov_test["refuted"]
            model = "chain (the first-order Markov premise of Theorem 3; Δ(t) from the data's band)"
            verdict = "passed" if ok else "refuted"
            why = (f"held-out Markov test p = {c.markov_test['p_value']:.3g}, level {c.markov_test['level']:g}"
                   if c is not None else "no check")
        else:
            model = c.model if (c is not None and (selection.passed or selection.requested != "auto")) else None
            verdict = "passed" if selection.passed else "refuted"
            why = c.why() if c is not None else "no model passed"
            if selection.requested == "auto" and not selection.passed:
                why = "; ".join(f"{x.model}: {x.why()}" for x in selection.checks)
    if out.get("A") is None and out.get("max_penalty") is not None and out.get("status") != "relaxed":
        # no schedule with a finite ε*: design for the horizon, by Theorem 3 under a model that passed (or was given),
        # else model-free (the releases composed, whatever the correlation)
        if verdict not in ("passed", "assumed") and gs.accept_refuted is None:
            out["horizon_design"] = model_free_horizon_design(penalty, out["max_penalty"], args.max_age,
                                                              args.max_interval, gs.horizon, gs.delta)
        elif out.get("horizon_design") is None:
            out["horizon_design"] = theorem3_horizon_design(source, penalty, out["max_penalty"], args.max_age,
                                                            args.max_interval, gs.horizon)
    apply_guarantee(out, model=model, verdict=verdict, why=why, horizon=gs.horizon, delta=gs.delta, windows=gs.windows,
                    accept_refuted=gs.accept_refuted)
    out["guarantee_settings"] = gs.to_dict()


def _replay(out: dict, dep) -> dict | None:
    """``--backtest F``: the design (made on the first F of the time range) replayed on the rest of the readings by
    :func:`policyopt.studies.backtest.backtest` (its JSON without the per-slot series; where no finite ε* exists,
    the horizon design is replayed, ``replayed`` says which); ``None`` without an integer schedule to replay."""
    from policyopt.studies.backtest import backtest, replayable_design

    design, _ = replayable_design(out)
    A, S = design.get("A"), design.get("S_bar")
    if A is None or not float(A).is_integer() or not float(S).is_integer():
        return None
    r = backtest(dep.all_readings, out, train_fraction=dep.backtest, phase_period=dep.phase_period,
                 value_range=dep.value_range, seed=dep.seed, unit=dep.unit)
    r.pop("series")
    r["replayed"] = r["schedule"]["replayed"]
    return r


def backtest_text(r: dict | None, fraction: float) -> str:
    """The one-line ``backtest`` summary of :func:`_replay`'s result."""
    from policyopt.formatting import fmt_value
    from policyopt.studies.backtest import backtest_verdict, max_tv_comparison_text

    if r is None:
        return f"designed on the first {fraction:g} of the time range; no integer schedule to replay"
    u = f" {r['unit']}" if r.get("unit") else ""
    what = "the horizon design, made" if r.get("replayed") == "horizon_design" else "designed"
    text = (f"{what} on slots before {r['split_slot']} (the first {fraction:g}), replayed on the "
            f"{r['held_out_slots']} held-out slots: realised MSE {fmt_value(r['realized_mse'], 4)}{u} "
            f"({100 * r['bootstrap']['level']:g}% interval {fmt_value(r['realized_mse_lower'], 4)}–"
            f"{fmt_value(r['realized_mse_upper'], 4)}) vs f̄ = {fmt_value(r['max_penalty'])}{u}: {backtest_verdict(r)}")
    c = r.get("max_tv_comparison")
    if c:
        text += f"; Δ(t) at {max_tv_comparison_text(c)}"
    if r.get("ci_coverage") is not None:
        text += (f"; the releases' {100 * r['ci_level']:g} % current-mean interval covered {100 * r['ci_coverage']:.1f} % "
                 f"of them ({100 * r['bootstrap']['level']:g}% band {100 * r['ci_coverage_lower']:.1f}–"
                 f"{100 * r['ci_coverage_upper']:.1f} %)")
    left = r.get("left_out_users") or []
    if left:
        text += "; left out: " + ", ".join(f"{u['user']} ({u['why']})" for u in left)
    return text


def _empirical_options(args, dep, post):
    """Resolve --max-tv / --horizon; for ``empirical`` estimate Δ(t) from the data (an EmpiricalDesign); ``None`` for the chains."""
    level = max_tv_level(args, dep.fitted is not None and dep.readings is not None, serial_hint=True)
    if level is None:
        return None
    if post.get("robust") is not None:
        raise InvalidInputError(f"--robust bands the chains' Δ(t); it does not combine with --max-tv {args.max_tv}")
    from policyopt.studies.empirical_design import empirical_design

    return empirical_design(dep.fitted, dep.readings, args.max_age, args.max_interval, level, horizon=args.horizon,
                            seed=DEFAULT_SEED if post.get("seed") is None else post["seed"])


def design_lags(check: dict, A, S_bar) -> dict:
    """The lags whose Δ the chosen schedule's ε* rests on, and which of them the model check refutes.

    Eq. (30) and Theorem 3's recursion (Zhang et al. 2024) evaluate Δ at the ages A..A + S̄ − 1 of an epoch's input
    and at the gap S̄ between inputs; lag 0 (Δ(0) = 1) needs no model.  ``design_lags`` lists them (``null`` when no
    schedule was found), ``design_lags_refuted`` those among them the check refutes.
    """
    if A is None or S_bar is None:
        return {"design_lags": None, "design_lags_refuted": None}
    lags = sorted(({t for t in range(int(A), int(A) + int(S_bar))} | {int(S_bar)}) - {0})
    refuted = set(check.get("refuted_lags") or ())
    return {"design_lags": lags, "design_lags_refuted": [t for t in lags if t in refuted]}


def model_check_text(mc: dict, chains_used: bool = True) -> str:
    """The ``model check`` line's text: :func:`~policyopt.studies.check_model_text.format_summary` and, with
    :func:`design_lags` in `mc`, whether the lags the schedule's risk uses are refuted.

    `chains_used` False: the accounting's Δ(t) is not the chains' (an ``empirical:LEVEL`` table), which the line says
    instead of drawing a conclusion about the risk from the chains.
    """
    from policyopt.studies.check_model_text import format_summary

    line = format_summary(mc)
    if mc.get("design_lags"):
        lags, bad = mc["design_lags"], mc["design_lags_refuted"]
        line += f"; this design's ε* uses Δ at lag{'s' if len(lags) > 1 else ''} {_lag_list(lags)} (A..A + S̄ − 1 and S̄): "
        if not chains_used:
            line += (f"the chains are refuted at {len(bad)} of them, but the accounting uses the data's Δ̃(t) table, "
                     "not the chains")
        elif bad:
            line += f"REFUTED at {len(bad)} of them ({_lag_list(bad)}), so its ε* is not a bound for the data"
        else:
            line += "the chains are not refuted there (Theorem 3's composition still assumes them)"
    return line


def _lag_list(lags: list) -> str:
    return ", ".join(map(str, lags)) if len(lags) <= 4 else f"{lags[0]}–{lags[-1]}"


def _with_data_lines(text: str, out: dict) -> str:
    """The schedule text with the model-check and empirical-design lines before the wall time."""
    from policyopt.formatting import fmt_count, fmt_exact, fmt_upper

    extra = []
    if out.get("model_check") and out["model_check"].get("models") is not None:
        from policyopt.studies.markov_check import model_check_line

        extra.append(f"model check : {model_check_line(out['model_check'])}")
    elif out.get("model_check"):
        extra.append(f"model check : {model_check_text(out['model_check'], chains_used=not out.get('empirical_max_tv'))}")
    emp = out.get("empirical_max_tv")
    if emp:
        used = emp["max_tv_used"]
        extra.append(
            f"Δ(t) data   : {emp['level']:g} upper band, Δ̃(1) = {fmt_upper(used[1], 3)}, Δ̃({len(used) - 1}) = "
            f"{fmt_upper(used[-1], 3)} (direct estimate {emp['estimate'][len(used) - 2]:.3g} there); 1 beyond t = {len(used) - 1} "
            f"(band estimated for t ≤ L = {emp['max_lag']})"
        )
    if "backtest" in out:
        extra.append(f"backtest    : {backtest_text(out['backtest'], out['deployment']['backtest'])}")
    hd = out.get("horizon_design")
    if hd is not None:
        if hd["status"] == "optimal" and hd.get("accounting") == "model-free":
            extra.append(
                f"horizon     : no finite ε* is stated (condition (31) fails, or no model passed its checks), so the design "
                f"minimises the model-free (ε, δ) over {fmt_count(hd['horizon'], 'slot')}: A = {fmt_count(hd['A'], 'slot')}, "
                f"S̄ = {fmt_count(hd['S_bar'], 'slot')}, ε_C = {fmt_exact(hd['epsilon_c'])} nats, "
                f"{fmt_count(hd['releases'], 'release')}: ({fmt_upper(hd['epsilon'], 4)} nats, δ = {hd['delta']:.3g}), pure ε ≤ "
                f"{fmt_upper(hd['horizon_risk'])} nats (optimal: {hd['proof']})"
            )
        elif hd["status"] == "optimal":
            whose = "the data's Δ(t)" if out.get("empirical_max_tv") else "the model's Δ(t)"
            extra.append(
                f"horizon     : no schedule has a finite ε* under {whose} (condition (31) fails), so the design "
                f"bounds the largest risk over {hd['horizon']} slots (Theorem 3): A = {fmt_count(hd['A'], 'slot')}, "
                f"S̄ = {fmt_count(hd['S_bar'], 'slot')}, ε_C = {fmt_exact(hd['epsilon_c'])} nats, "
                f"{fmt_count(hd['releases'], 'release')}, largest risk ≤ "
                f"{fmt_upper(hd['horizon_risk'])} nats (optimal: {hd['proof']})"
            )
        else:
            extra.append(f"horizon     : no schedule in the box meets f̄ over {hd['horizon']} slots ({hd['proof']})")
    if not extra:
        return text
    lines = text.split("\n")
    return "\n".join(lines[:-1] + extra + lines[-1:])
