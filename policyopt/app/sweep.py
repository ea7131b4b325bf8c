"""What ``policyopt sweep`` builds below the command line: one :class:`~policyopt.studies.sweep.SweepModel` per
combination of the varied parameters, with its deployment, penalty, Δ(t) source and model verdict
(:func:`build_models`), and the checks of the guarantee options (:func:`check_guarantee_options`).

The functions take `args`, the parsed ``sweep`` options (the ``schedule`` option names: ``data``, ``chain``,
``matrix``, ``states``, ``users``, ``max_age``, ...); errors name the command-line options.
"""

from __future__ import annotations

import argparse
import itertools

from policyopt.app.inputs import deployment_penalty, load_deployment
from policyopt.errors import InvalidInputError, fmt

__all__ = ["build_models", "check_guarantee_options"]


def build_models(args, vary: dict, checks: dict | None = None, level: float | None = None) -> list:
    """One SweepModel per combination of the varied values (product, in the order given).

    With data (``--data`` or the bundled pilot) the chains are fitted once per number of states K
    and shared by every deployment size I of ``--vary users``: only the penalty (noise (HI − LO)/I,
    staleness / I) changes with I, as in ``policyopt schedule --users I``; its staleness sums are
    formed once per fit (:meth:`MSEPenalty.with_users`).  With `level` (``--max-tv empirical:LEVEL``)
    Δ(t) is estimated from the readings once per fit, as ``schedule --max-tv empirical`` does
    (:func:`~policyopt.studies.empirical_design.empirical_design`, seed 0), and shared the same way.

    The Markov model of ``--markov-model`` is checked on held-out readings once per fit, as ``schedule`` checks it
    (:func:`~policyopt.studies.markov_check.design_check`, seed 0; its
    :func:`~policyopt.studies.markov_check.check_summary` goes into `checks` under K) and, when it is not the
    first-order chain, fitted on every design reading once per fit
    (:func:`~policyopt.studies.markov_check.fit_for_design`): the points' Δ(t).  Each model carries its
    :class:`~policyopt.studies.guarantee.GuaranteeSettings` (δ from its own I) and the check's
    :class:`~policyopt.studies.sweep.ModelVerdict`; a ``--chain``/``--matrix`` model is ``assumed``.
    """
    import dataclasses

    from policyopt.app.inputs import guarantee_settings, markov_selection
    from policyopt.io import parse_chain_spec
    from policyopt.studies.sweep import SweepModel, given_model_verdict, model_verdict, tabulate_population

    base_p = base_q = None
    if args.chain is not None:
        P = parse_chain_spec(args.chain).P
        base_p, base_q = float(P[0, 1]), float(P[1, 0])
    uses_data = args.chain is None and args.matrix is None
    horizon = max(args.max_age, args.max_interval) + 1
    names = list(vary)
    fits: dict = {}  # data: K → (Deployment, tabulated population, penalty, empirical, Markov model, verdict)
    models = []
    for combo in itertools.product(*(vary[n] for n in names)):
        values = dict(zip(names, combo))
        ns = argparse.Namespace(**vars(args))
        p, q = values.get("p", base_p), values.get("q", base_q)
        if args.chain is not None and ("p" in values or "q" in values):
            ns.chain = f"two-state:p={p!r},q={q!r}"
        if "users" in values:
            ns.users = values["users"]
        if "states" in values:
            ns.states = values["states"]
        if uses_data and ns.states in fits:
            dep, population, first, empirical, markov, verdict = fits[ns.states]
            dep = dataclasses.replace(dep, users=ns.users)  # same pilot, another deployment size I
            penalty = first.with_users(dep.users)  # the staleness sums shared: computed once per fit
        else:
            dep = load_deployment(ns)
            empirical = markov = None
            verdict = given_model_verdict("the given chain" if args.chain is not None else "the given matrix")
            if level is not None:  # Δ(t) from the readings, once per fit (the states depend on K)
                from policyopt.studies.empirical_design import empirical_design

                empirical = empirical_design(dep.fitted, dep.readings, args.max_age, args.max_interval, level,
                                             horizon=args.horizon)
            # Δ(0..max(A_MAX, S_MAX) + 1) once per fitted model, shared by all its points (and workers)
            population = tabulate_population(dep.population, horizon)
            penalty = deployment_penalty(dep, population)  # the deployment's I users, as `policyopt schedule`
            if hasattr(penalty, "band"):
                penalty.band()  # the readings penalty's bootstrap once here, shared by every I and shipped with the model
            if uses_data and dep.readings is not None:  # the Markov model checked on held-out readings, once per fit
                selection, markov = markov_selection(dep, guarantee_settings(ns, dep), max_age=args.max_age,
                                                     max_interval=args.max_interval, seed=0)
                verdict = model_verdict(selection, empirical=empirical is not None)
                if checks is not None:
                    from policyopt.studies.markov_check import check_summary

                    checks[ns.states] = {"states": int(dep.fitted.quantizer.n_states), **check_summary(selection)}
            if uses_data:
                fits[ns.states] = (dep, population, penalty, empirical, markov, verdict)
        gs = guarantee_settings(ns, dep)  # δ = min(1e-6, 1/(10·I)) of this model's I unless --delta
        info = dep.info
        lo, hi = penalty.value_range
        inputs = {
            "p": p,
            "q": q,
            "users": dep.users,
            "pilot_users": population.n_users,
            "states": max(c.n_states for c in population.chains),
            "smoothing": info.get("smoothing"),
            "value_range_lo": float(lo),
            "value_range_hi": float(hi),
            # the MSE model is part of a point's identity (a resumed --out never mixes the readings and chain penalties)
            "source": info["source"] + (f"; MSE from the readings ({penalty.design}, worst of "
                                        f"{penalty.moments.phase_period} phases)" if hasattr(penalty, "moments") else ""),
            "max_tv_source": "chain" if empirical is None else empirical.spec,
            "horizon": gs.horizon if empirical is None else empirical.horizon,
        }
        models.append(SweepModel(population=population, penalty=penalty, info=info, inputs=inputs, empirical=empirical,
                                 markov=markov, guarantee=gs, verdict=verdict))
    return models


def check_guarantee_options(args, uses_data: bool, level: float | None) -> None:
    """Refuse guarantee options that cannot apply, before any fit: a ``--markov-model`` other than ``chain`` without
    readings, with ``--max-tv empirical`` or a method other than exact; ``--privacy model-free`` without the exact
    method; a malformed ``--markov-model``.

    Raises
    ------
    InvalidInputError
        As above; the message names the option and shows the value.
    """
    spec = args.markov_model
    if spec is not None:
        from policyopt.app.inputs import slot_seconds
        from policyopt.models.markov_model import MarkovModelSpec
        from policyopt.studies.markov_check import periods_from_slot

        try:
            MarkovModelSpec.parse(spec, default_period=periods_from_slot(slot_seconds(args))[0])
        except InvalidInputError as exc:  # the option's name for the argument's (`model` ...)
            msg = str(exc)
            raise InvalidInputError("--markov-model " + msg.removeprefix("`model` ") if msg.startswith("`model` ")
                                    else f"--markov-model {fmt(spec)}: {msg}") from None
    if spec is not None and spec != "chain":
        if not uses_data:
            raise InvalidInputError(f"--markov-model {spec} is fitted to readings: give --data (or use the bundled "
                                    "data), not --chain/--matrix")
        if level is not None:
            raise InvalidInputError(f"--max-tv {args.max_tv} applies to the first-order chains; omit it with "
                                    f"--markov-model {spec}")
        if args.method != "exact" or args.relax:
            raise InvalidInputError(f"--markov-model {spec} designs with the exact Δ(t) table: use --method exact "
                                    "without --relax")
    if args.privacy == "model-free" and (args.method != "exact" or args.relax):
        raise InvalidInputError("--privacy model-free designs by exact enumeration over --horizon: use --method exact "
                                "without --relax")
