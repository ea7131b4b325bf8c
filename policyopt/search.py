"""One-dimensional search used by several formulations and back ends: a grid, then Brent."""

from __future__ import annotations

import numpy as np

#: Objective value standing in for "infeasible" inside Brent's method (which needs finite values).
INFEASIBLE = 1e300


def grid_then_brent(f_grid, f_scalar, grid, *, xrtol: float = 1e-12):
    """Minimise a 1-D function: evaluate it on `grid`, then refine the best cell with bounded Brent.

    Parameters
    ----------
    f_grid : callable
        Vectorised objective: array of points → array of values (``inf``/NaN where infeasible).
    f_scalar : callable
        Scalar objective used during refinement (``inf``/NaN where infeasible).
    grid : numpy.ndarray, shape (n,)
        Increasing points.
    xrtol : float
        Brent's absolute tolerance is ``xrtol × upper end of the bracket``.

    Returns
    -------
    (x, value) : tuple of float
        The best point found and its value; ``(nan, inf)`` when every grid point is infeasible.

    Notes
    -----
    The refinement searches the two cells around the best grid point; a global optimum is
    found when the function is unimodal there (the grid's resolution bounds what can be missed).
    """
    from scipy.optimize import minimize_scalar

    grid = np.asarray(grid, dtype=float)
    vals = np.asarray(f_grid(grid), dtype=float)
    vals = np.where(np.isnan(vals), np.inf, vals)
    k = int(np.argmin(vals))
    if not np.isfinite(vals[k]):
        return float("nan"), float("inf")
    best_x, best = float(grid[k]), float(vals[k])
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]
    if hi > lo:

        def finite(x):
            """`f_scalar` with infeasible points mapped to a large finite value."""
            v = float(f_scalar(x))
            return v if np.isfinite(v) else INFEASIBLE

        res = minimize_scalar(finite, bounds=(lo, hi), method="bounded", options={"xatol": xrtol * hi})
        if res.fun < best:
            best_x, best = float(res.x), float(res.fun)
    return best_x, best
