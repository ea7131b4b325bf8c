"""Utility penalties of a released statistic: MSE of the released mean (exact and Monte Carlo), failure rate,
the AR(1) penalties, and the continuous penalties of problem (39).

May import: io, models and the base modules (never privacy, problems, solvers, studies, cli).
"""
