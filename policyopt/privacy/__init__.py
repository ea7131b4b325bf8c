"""Privacy notions and their accounting: age-dependent risk and composition (Zhang et al.), temporal privacy
leakage BPL/FPL/TPL (Cao et al.), discounted DP (Farokhi), correlated-sequence DP and FRAN bounds (Luo et al.).

May import: utility, io, models and the base modules (never problems, solvers, studies, cli).
"""
