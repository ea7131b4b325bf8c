"""Correlation models and their estimation: finite Markov chains and populations (Δ(t) of Zhang et al. eq. (12)),
coupled chains (Luo et al. 2025), the AR(1) process (Zhang et al. 2024, Appendix I), estimation from readings.

May import: errors, result, formatting, search, registry, data (never utility, privacy, problems, solvers, studies, cli).
"""
