"""The jobs a user runs, built from the layers below: the schedule design and its report, sensitivity sweeps,
plots, and the CityLearn data studies.

May import: solvers, problems, privacy, utility, io, models, data and the base modules (never the cli).
"""
