"""The model ``policyopt tpl`` and ``tpl-budget`` account with, below the command line: the transition matrices
given (``--pb``/``--pf``, assumed) or the readings' chains under ``--markov-model``, checked on held-out time
(:func:`tpl_model`).

:func:`tpl_model` takes `args`, the parsed ``tpl`` options (``pb``, ``pf``, ``data``, ``states``, ``markov_model``,
``value_range``, ``slot_length``, ``accept_refuted``); errors name the command-line options.
"""

from __future__ import annotations

from policyopt.app.inputs import DEFAULT_SMOOTHING, DEFAULT_STATES
from policyopt.errors import InvalidInputError

__all__ = ["tpl_model"]


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
        from policyopt.io import parse_matrix_arg

        P_B = None if args.pb is None else parse_matrix_arg(args.pb, "--pb")
        P_F = None if args.pf is None else parse_matrix_arg(args.pf, "--pf")
        if P_B is not None and P_F is not None and P_B.shape != P_F.shape:
            raise InvalidInputError(f"--pb is {P_B.shape[0]}×{P_B.shape[1]} but --pf is {P_F.shape[0]}×{P_F.shape[1]}; "
                                    "both describe the same states, so they must have the same size")
        source = "matrices" + ("" if args.pb and args.pf else " (the missing one: correlation unknown, L ≡ 0)")
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
