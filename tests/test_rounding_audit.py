"""Issue 26: privacy numbers checked against exact arithmetic (mpmath at 50–60 digits, exact rationals), run through
the installed ``policyopt`` as a subprocess: no printed upper bound below its exact value, no printed lower bound
above it.

Sources: Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, Theorem 3
(eq. 25) and eq. (30); Luo, Zhang, Xu, Chen, Huang, "Correlated-Sequence Differential Privacy", preprint, 2025,
Definition 9 (Δ_k) and eq. (45) first line (sound bound).
"""

from __future__ import annotations

import mpmath as mp
import pytest

from _cli import run_cli, strict_json
from _mp_fran_refs import MpCMC

# (p, q, λ) of the two-binary model (Luo et al. 2025, eq. 25) with Δ_k(16, 16) ≈ 1e-16: the float kernel's rows
# agree to the last bit, so a difference of rows loses every digit (issue 26 found 8 of 23 such cases below).
TINY_DELTA = [
    (0.8466796875, 0.2607421875, 0.5224609375),
    (0.7109375, 0.3671875, 0.4453125),
    (0.9013671875, 0.1533203125, 0.6103515625),
    (0.6259765625, 0.4521484375, 0.3330078125),
]


@pytest.mark.parametrize("p,q,lam", TINY_DELTA)
def test_fran_tiny_distance_not_below_exact(p, q, lam):
    out = strict_json(run_cli("fran", "--two-binary", f"p={p},q={q},lambda={lam}", "--max-mse", "5", "--max-age", "16",
                              "--json").stdout)
    ref = MpCMC([[[[1 - p, p], [q, 1 - q]]] * 2] * 2, [[lam, 1 - lam], [1 - lam, lam]], [0.0, 1.0])
    with mp.workdps(60):
        dist = ref.distance(out["aoi"])
        eps_s = mp.log1p(dist * mp.expm1(mp.mpf(out["d_k"]) * mp.mpf(out["epsilon_c"])))
        assert out["distance_kind"] == "exact"
        assert mp.mpf(out["distance"]) >= dist, (out["distance"], dist)
        assert mp.mpf(out["distance"]) <= dist * (1 + mp.mpf(2) ** -50)  # exact, then one rounding up
        assert mp.mpf(out["epsilon_s"]) >= eps_s, (out["epsilon_s"], eps_s)
