"""Theorem 3's recursion (:func:`policyopt.privacy.age_dependent.compose`) steps with one-float helpers; they must give
the array functions' values bit for bit (the printed bounds are those of the array code, whose rounding is proven)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings, strategies as st

from policyopt.privacy import age_dependent as ad

LOG_MAX_TV = st.one_of(st.just(-math.inf), st.just(0.0), st.just(-0.0), st.just(-5e-324),
                       st.floats(min_value=-800.0, max_value=0.0), st.floats(min_value=-1e-12, max_value=0.0))
EPSILON = st.one_of(st.sampled_from([0.0, 5e-324, 1e-300, 1e-16, 30.0, 50.0, 700.0, 5000.0]),
                    st.floats(min_value=0.0, max_value=1e4))


def _same(a: float, b: float) -> bool:
    return np.float64(a).tobytes() == np.float64(b).tobytes()


@settings(max_examples=400, deadline=None)
@given(LOG_MAX_TV, EPSILON, st.integers(min_value=0, max_value=10**6), st.booleans())
def test_one_float_upper_bound_is_the_array_functions_bit_for_bit(log_max_tv, epsilon_c, age, exact):
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        one = ad._upper_1(log_max_tv, epsilon_c, age, exact)
        leak = ad._leak_log_1(log_max_tv, epsilon_c)
        log_expm1 = ad._log_expm1_1(epsilon_c)
    assert _same(one, ad.risk_after_aging_upper(log_max_tv, epsilon_c, age, exact_max_tv=exact))
    assert _same(leak, float(ad._leak_log(log_max_tv, epsilon_c)))
    assert _same(log_expm1, float(ad.log_expm1(epsilon_c)))


def test_refused_inputs_get_the_array_functions_error():
    import pytest

    from policyopt.errors import InvalidInputError

    for ld, eps in ((0.5, 1.0), (math.nan, 1.0), (-1.0, -1.0), (-1.0, math.nan)):
        with pytest.raises(InvalidInputError) as one:
            ad._upper_1(ld, eps, 0, False)
        with pytest.raises(InvalidInputError) as arr:
            ad.risk_after_aging_upper(ld, eps, 0)
        assert str(one.value) == str(arr.value)
