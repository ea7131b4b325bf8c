"""One deployment design from start to finish, as ``policyopt schedule`` runs it: :func:`design_deployment`.

It loads the model source (the readings, the bundled pilot, or given chains), estimates the deployment's MSE penalty,
checks the Markov model against held-out readings, designs the schedule (:func:`policyopt.design_schedule`: Zhang,
Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, problem (28), Theorem 4,
eq. (30)), states the guarantee the evidence supports (the model-free one always), and adds the posterior checks,
the backtest and the plot that were asked for.  The :class:`DeploymentReport` it returns is the command's report:
``to_dict()`` is its ``--json`` object and ``str()`` its text.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from policyopt.app.design_options import DesignOptions
from policyopt.app.inputs import (
    BUNDLED_STATES,
    DEFAULT_CREDIBLE,
    DEFAULT_DRAWS,
    DEFAULT_SEED,
    DEFAULT_STATES,
    Deployment,
    check_table_size,
    deployment_penalty,
    guarantee_settings,
    load_deployment,
    load_distributed_model,
    markov_selection,
    max_tv_level,
    penalty_bound,
    wants_distributed,
)
from policyopt.errors import InvalidInputError

__all__ = ["DeploymentReport", "design_deployment", "design_from_options", "deployment_record"]


@dataclass(frozen=True)
class DeploymentReport:
    """Everything ``policyopt schedule`` prints for one deployment design.

    Attributes
    ----------
    fields : dict
        The command's ``--json`` object (documented field by field in the CLI reference); read it with
        :meth:`to_dict`.
    plot_error : str or None
        Why ``plot`` drew nothing (no schedule to draw); the command prints the report and then exits with code 2 and
        this line.
    """

    fields: dict
    plot_error: str | None = None

    def to_dict(self) -> dict:
        """The ``policyopt schedule --json`` object (a deep copy; ``wall_time_s`` is this run's)."""
        return json.loads(self.to_json())

    def to_json(self) -> str:
        """The ``policyopt schedule --json`` output: the object, indented, without NaN or infinities."""
        return json.dumps(self.fields, indent=2, ensure_ascii=False, allow_nan=False)

    @property
    def status(self) -> str:
        """``optimal``, ``unbounded``, ``feasible``, ``infeasible``, ``relaxed`` or ``unknown`` (the JSON contract)."""
        return self.fields["status"]

    @property
    def schedule(self) -> dict:
        """``A``, ``S_bar`` (slots) and ``epsilon_c`` (nats per release) of the chosen schedule (``None`` without one)."""
        return {k: self.fields.get(k) for k in ("A", "S_bar", "epsilon_c")}

    @property
    def guarantee(self) -> dict | None:
        """The guarantee stated first (the ``guarantee`` JSON object): model-based under a model the data did not
        refute, else model-free."""
        return self.fields.get("guarantee")

    def __str__(self) -> str:
        """The text ``policyopt schedule`` prints."""
        from policyopt.studies.deployment_text import with_data_lines
        from policyopt.studies.schedule_text import format_report

        from policyopt.studies.data_check import with_data_check

        return with_data_check(with_data_lines(format_report(self.fields), self.fields), self.fields)

    def _repr_html_(self) -> str:
        """The text as a table for notebooks (:func:`policyopt.app.report.text_html`)."""
        from policyopt.app.report import text_html

        return text_html(str(self))

    def __repr__(self) -> str:
        s = self.schedule
        return (f"DeploymentReport(status={self.status!r}, A={s['A']!r}, S_bar={s['S_bar']!r}, "
                f"epsilon_c={s['epsilon_c']!r}, guarantee={(self.guarantee or {}).get('kind')!r})")


def design_deployment(**options) -> DeploymentReport:
    """Design a deployment's aging and publishing schedule as ``policyopt schedule`` does, and return its report.

    Parameters
    ----------
    **options
        The attributes of :class:`~policyopt.app.design_options.DesignOptions`, by keyword: the model source
        (``data``, ``chain`` or ``matrix``; none: the bundled pilot), ``users``, ``value_range``, ``max_penalty`` or
        ``max_rmse``, ``max_age``, ``max_interval``, ``states``, ``max_tv``, ``markov_model``, ``privacy``,
        ``horizon``, ``delta``, ``backtest``, ``plot``, ...  Each is the ``policyopt schedule`` option of the same
        name (``max_age`` is ``--max-age``) with the same default.

    Returns
    -------
    DeploymentReport
        ``to_dict()`` is the command's ``--json`` object (the wall time aside) and ``str()`` its text.

    Raises
    ------
    InvalidInputError
        An unknown keyword, a value of the wrong type or out of range (:class:`DesignOptions`), options that do not go
        together, or bad data (the message names the option as the command line does, ``--max-age``).

    Examples
    --------
    >>> import policyopt as po
    >>> report = po.design_deployment(privacy="model-free", max_rmse=0.19, max_age=24, max_interval=24)
    >>> report.status
    'optimal'
    """
    return design_from_options(DesignOptions.from_keywords("design_deployment", options))


def design_from_options(options: DesignOptions) -> DeploymentReport:
    """:func:`design_deployment` of checked options (what ``policyopt schedule`` runs after parsing its command line)."""
    import numpy as np

    from policyopt.models.markov import Population
    from policyopt.studies.deployment import explain, robust_source
    from policyopt.studies.schedule import design_schedule

    start = time.perf_counter()
    check_table_size(options)
    _check_plot_options(options)
    penalty, dist_extra = None, None
    if options.backtest is not None and wants_distributed(options):
        raise InvalidInputError(f"--backtest {options.backtest:g} replays the design on readings held in memory; omit it "
                                "with --workers/--scheduler (run `policyopt backtest` on a sample instead)")
    if wants_distributed(options):  # a Parquet set reduced on Dask (policyopt.studies.distributed)
        population, info, unit, penalty, dist_extra = load_distributed_model(options)
        dep = Deployment(population=population, info=info, unit=unit, users=penalty.users, value_range=None)
    else:
        dep = load_deployment(options)
    post = _posterior_options(options, dep)
    max_penalty = penalty_bound(options)
    population = dep.population
    penalty = deployment_penalty(dep) if penalty is None else penalty
    warnings = []
    if dep.value_range is None and (dep.fitted is not None or wants_distributed(options)):
        lo, hi = penalty.value_range
        warnings.append(
            f"the value range [{lo:.6g}, {hi:.6g}] (sensitivity (HI-LO)/I) was derived from the data, which is not "
            "differentially private: declare a public range with --value-range LO:HI"
        )
    rng = np.random.default_rng(post["seed"]) if post else None  # simulation only (posterior draws), never released noise
    gs = guarantee_settings(options, dep)
    source, robust_info = population, None
    selection, markov_source = _markov_selection(options, dep, gs, post)  # refuses --max-tv empirical before estimating it
    empirical = _empirical_options(options, dep, post)
    if empirical is not None:
        source = empirical.source
    if markov_source is not None:
        source = markov_source
    if post and post["robust"] is not None:  # the band of the design's Δ(t): the chains', or Δ_Z of the chosen model
        source, robust_info = robust_source(dep.fitted if markov_source is None else markov_source,
                                            max(options.max_age, options.max_interval) + 1, level=post["robust"],
                                            draws=post["draws"], rng=rng)
    report = design_schedule(
        source,
        max_penalty=max_penalty,
        A_max=options.max_age,
        S_max=options.max_interval,
        penalty=penalty,
        releases=options.releases,
        model_info=dep.info,
        method=options.method,
        relax=options.relax,
        chains=population if isinstance(population, Population) else None,
        privacy=gs.privacy,
        horizon=gs.horizon,
        delta=gs.delta,
        verdict=None,  # the guarantee follows the model check below (_state_guarantee)
        empirical=empirical,
        # Theorem 3 over the horizon only when its first-order premise passed (or its refutation is accepted): else the
        # horizon is designed model-free (_state_guarantee) and the O(H)-per-cell enumeration is not run
        horizon_design=(selection is None or gs.accept_refuted is not None
                        or (selection.chosen is not None and not selection.chosen.markov_test["refuted"])),
    )
    out = report.to_dict()
    if options.max_rmse is not None:
        out["max_penalty_source"] = f"--max-rmse {options.max_rmse:g}: f̄ = R²"
    out["max_rmse"] = None if out["max_penalty"] is None else out["max_penalty"] ** 0.5
    m = out["model"]
    m["states"] = max(c.n_states for c in population.chains) if hasattr(population, "chains") else population.n_states
    if robust_info is not None:
        m["max_tv_source"] = (f"simultaneous posterior upper band of Δ(t) (level {post['robust']})" if markov_source is None
                             else f"simultaneous {_draw_kind(markov_source)} upper band of Δ_Z(t) of the Markov model "
                             f"{markov_source.name} (level {post['robust']})")
        out["robust"] = robust_info
    elif markov_source is not None:  # the deployment line says "model.max_tv_source says which"
        m["max_tv_source"] = (f"Δ_Z(t) of the Markov model {markov_source.name} (point estimate, fitted on every design "
                              "reading)")
    chains_designed = empirical is None and markov_source is None  # the fitted chains are the design's Δ(t)
    chains_trusted = selection is None or selection.passed or gs.accept_refuted is not None
    _rows_and_credible(out, dep, post, rng, warnings, options.relax, chains_designed, chains_trusted, markov_source,
                       empirical)
    if options.data is not None and not wants_distributed(options) and dep.readings is not None:
        from policyopt.studies.data_check import readings_check

        out["data_check"] = readings_check(dep.readings, states=m["states"], value_range=dep.value_range,
                                           slot_seconds=dep.slot_seconds, slot_length_given=options.slot_length is not None,
                                           time_stamps=dep.time_origin is not None, source=f"data {options.data}")
    out["deployment"] = deployment_record(options, dep, post.get("robust"), None if empirical is None else empirical.level,
                                          None if markov_source is None else markov_source.name,
                                          DEFAULT_SEED if post.get("seed") is None else post["seed"])
    if wants_distributed(options) and penalty is not dist_extra["chain_penalty"] and out.get("A") is not None \
            and float(out["A"]).is_integer() and float(out["S_bar"]).is_integer():
        from policyopt.studies.deployment import penalty_comparison

        out["penalty_comparison"] = penalty_comparison(penalty, None, int(out["A"]), int(out["S_bar"]),
                                                       chain_penalty=dist_extra["chain_penalty"])
    if wants_distributed(options):
        from policyopt.studies.markov_check import design_lags

        out["model_check"] = dist_extra["model_check"]
        out["model_check"].update(design_lags(out["model_check"], out.get("A"), out.get("S_bar")))
    if selection is not None:
        from policyopt.studies.markov_check import check_summary

        out["model_check"] = check_summary(selection, out.get("A"), out.get("S_bar"))
    out["warnings"] = warnings
    _state_guarantee(out, options, dep, gs, selection, empirical, penalty, source)
    out["explanation"] = explain(out, A_max=options.max_age)
    plot_error = _draw_plot(out, options, dep, source, post, robust_info, empirical, markov_source)
    from policyopt.formatting import json_clean

    out = json_clean(out)
    if dep.backtest is not None:
        out["backtest"] = _replay(out, dep)
    out["wall_time_s"] = time.perf_counter() - start
    return DeploymentReport(out, plot_error)


def _posterior_options(options, dep) -> dict:
    """Resolve --min-row-transitions/--credible/--robust/--draws/--seed; refuse them without data."""
    given = {n: getattr(options, n) for n in ("min_row_transitions", "credible", "robust", "draws", "seed")}
    if dep.fitted is None:
        extra = [f"--{n.replace('_', '-')}" for n, v in given.items() if v is not None]
        if extra:
            raise InvalidInputError(f"{', '.join(extra)} applies to --data (or the bundled data) only; omit it with --chain/--matrix")
        return {}
    if given["robust"] is not None and options.method != "exact":
        raise InvalidInputError(f"--robust designs with the exact Δ(t) band: use --method exact, not {options.method!r}")
    if given["robust"] is not None and options.relax:
        raise InvalidInputError("--robust designs integer schedules with the exact solver; omit --relax")
    if given["credible"] is not None and options.relax:
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


def deployment_record(options, dep, robust_level=None, empirical_level=None, markov_model=None, markov_seed: int = 0) -> dict:
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
    bundled = options.data is None and options.chain is None and options.matrix is None
    slot_length = None if options.slot_length is None else format_duration(parse_duration(options.slot_length, "--slot-length"))
    if bundled:
        if slot_length is not None and slot_length != BUNDLED_SLOT_LENGTH:
            raise InvalidInputError(f"--slot-length {options.slot_length} is not the bundled data's slot ({BUNDLED_SLOT_LENGTH})")
        slot_length = BUNDLED_SLOT_LENGTH
    elif slot_length is None and getattr(dep, "slot_seconds", None) is not None:
        slot_length = format_duration(dep.slot_seconds)  # inferred from the data's time stamps
    if options.chain is not None:
        model = ModelSpec(options.chain)
    elif options.matrix is not None:
        model = ModelSpec(f"matrix:{options.matrix}").pinned("--matrix")
    else:
        data = data_digest(options.data, "--data")
        states = options.states if options.states is not None else BUNDLED_STATES if options.data is None else DEFAULT_STATES
        model = ModelSpec("bundled" if options.data is None else f"data:{options.data}", states, info.get("smoothing"),
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
        "max_tv_horizon": max(options.max_age, options.max_interval) + 1,
        "slot_length": slot_length,
        "backtest": dep.backtest if hasattr(dep, "backtest") else None,
    }


def _check_plot_options(options) -> None:
    """Refuse ``--plot-epochs`` without ``--plot``, ``--plot`` with ``--relax``, a bad plot path or no matplotlib."""
    if options.plot_epochs is not None and options.plot is None:
        raise InvalidInputError(f"--plot-epochs {options.plot_epochs} applies to --plot only; add --plot FILE or omit it")
    if options.plot is not None:
        from policyopt.studies.plots import check_plot_option

        if options.relax:
            raise InvalidInputError("--plot draws integer schedules (time in whole slots); omit --relax")
        check_plot_option(options.plot)


def _markov_selection(options, dep, gs, post):
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
    spec = gs.markov_model
    serial = dep.fitted is not None and dep.readings is not None and not wants_distributed(options)
    if spec != "chain":
        if not serial:
            raise InvalidInputError(f"--markov-model {spec} is fitted to readings held in memory: give --data (or use the "
                                    "bundled data), serially (no --workers/--scheduler)")
        if options.max_tv is not None:
            from policyopt.studies.empirical_design import parse_max_tv_source

            if parse_max_tv_source(options.max_tv)[0] != "model":
                raise InvalidInputError(
                    f"--max-tv {options.max_tv} estimates Δ̃(t) from lag pairs of the readings X, but Theorem 3 on the state Z "
                    f"of --markov-model {spec} needs Δ_Z(t) of that model: omit --max-tv (for a margin over the "
                    "estimate of Δ_Z, design against its posterior band with --robust LEVEL)")
        if options.method != "exact" or options.relax:
            raise InvalidInputError(f"--markov-model {spec} designs with the exact Δ(t) table: use --method exact without "
                                    "--relax")
    if not serial:
        return None, None
    return markov_selection(dep, gs, max_age=options.max_age, max_interval=options.max_interval,
                            seed=DEFAULT_SEED if post.get("seed") is None else post["seed"])


def _empirical_options(options, dep, post):
    """Resolve --max-tv / --horizon; for ``empirical`` estimate Δ(t) from the data (an EmpiricalDesign); ``None`` for the chains."""
    level = max_tv_level(options, dep.fitted is not None and dep.readings is not None, serial_hint=True)
    if level is None:
        return None
    if post.get("robust") is not None:
        raise InvalidInputError(f"--robust bands the chains' Δ(t); it does not combine with --max-tv {options.max_tv}")
    from policyopt.studies.empirical_design import empirical_design

    return empirical_design(dep.fitted, dep.readings, options.max_age, options.max_interval, level, horizon=options.horizon,
                            seed=DEFAULT_SEED if post.get("seed") is None else post["seed"])


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


def _state_guarantee(out: dict, options, dep, gs, selection, empirical, penalty, source) -> None:
    """The guarantee the report states first (:func:`~policyopt.studies.guarantee.apply_guarantee`): the model-based
    risk when the design's Markov model passed its checks (or was given without data), else the model-free one; with
    ``--max-tv empirical`` the premise checked is the first-order Markov test only (Δ(t) comes from the data), and
    a horizon design is redone model-free when the premise fails.  On Dask (``--workers``/``--scheduler``) the
    selection is the chains' held-out check run on the partitions
    (:func:`~policyopt.studies.distributed_heldout.held_out_check_partitions`, carried by ``model_check``), whose
    summary is redone here with the chosen schedule's lags, as the serial run's."""
    from policyopt.studies.guarantee import apply_guarantee, model_free_horizon_design, theorem3_horizon_design

    if selection is None and wants_distributed(options):
        # Dask: the chains' held-out check ran on the partitions (load_distributed_model); its summary carries the
        # selection, so the report states the serial summary with the chosen schedule's lags and follows its verdict
        selection = getattr(out.get("model_check"), "selection", None)
        if selection is not None:
            from policyopt.studies.markov_check import check_summary

            out["model_check"] = check_summary(selection, out.get("A"), out.get("S_bar"))
    if selection is None:
        if dep.fitted is None and not wants_distributed(options):  # --chain / --matrix: the user's model, no data
            model, verdict, why = ("the given chain" if options.chain else "the given matrix"), "assumed", "no data"
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
            out["horizon_design"] = model_free_horizon_design(penalty, out["max_penalty"], options.max_age,
                                                              options.max_interval, gs.horizon, gs.delta)
        elif out.get("horizon_design") is None:
            out["horizon_design"] = theorem3_horizon_design(source, penalty, out["max_penalty"], options.max_age,
                                                            options.max_interval, gs.horizon)
    apply_guarantee(out, model=model, verdict=verdict, why=why, horizon=gs.horizon, delta=gs.delta, windows=gs.windows,
                    accept_refuted=gs.accept_refuted)
    out["guarantee_settings"] = gs.to_dict()


def _draw_plot(out: dict, options, dep, source, post: dict, robust_info, empirical, markov_source) -> str | None:
    """``--plot``: draw ε(t) and AoI(t) of the schedule with the Δ(t) the design used and record it in `out`; the
    refusal to raise after the report is printed when there is no schedule to draw, else None."""
    plot_error = None
    if options.plot is not None:
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
                out["A"], out["S_bar"], out["epsilon_c"], source, options.plot,
                epochs=options.plot_epochs, peak_risk=out["peak_risk"],
                title=dep.info["source"], max_tv_label=label,
            )
            out["plot"] = str(options.plot)
            out["plot_max_tv"] = (f"Δ(t) = {label}" if label else
                                  "Δ(t) of the model (eq. (12), point estimate for data), as in the design")
    return plot_error


def _replay(out: dict, dep) -> dict | None:
    """``--backtest F``: the design (made on the first F of the time range) replayed on the rest of the readings by
    :func:`policyopt.studies.backtest.backtest` (its JSON without the per-slot series; where no finite ε* exists,
    the horizon design is replayed, ``replayed`` says which); ``None`` without an integer schedule to replay."""
    from policyopt.io.schedule_design import ScheduleDesign
    from policyopt.studies.backtest import backtest

    design = ScheduleDesign.from_json(out).fields
    A, S = design.get("A"), design.get("S_bar")
    if A is None or not float(A).is_integer() or not float(S).is_integer():
        return None
    r = backtest(dep.all_readings, out, train_fraction=dep.backtest, phase_period=dep.phase_period,
                 value_range=dep.value_range, seed=dep.seed, unit=dep.unit)
    r.pop("series")
    r["replayed"] = r["schedule"]["replayed"]
    return r
