"""Privacy notions and their accounting: age-dependent risk and composition (Zhang et al. 2024), temporal privacy
leakage BPL/FPL/TPL (Cao et al. 2019), discounted DP (Farokhi 2020), correlated-sequence DP and FRAN bounds (Luo et al. 2025).

May import: utility, io, models and the base modules (never problems, solvers, studies, cli).
"""
