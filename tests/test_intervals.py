"""ntkref.intervals: the inclusion property against exact arithmetic.

Every operation on intervals [a] ∘ [b] must contain the exact real result a ∘ b for every exact a ∈ [a],
b ∈ [b].  The exact routes are independent of the module: ``fractions.Fraction`` for + − × ÷, squares,
square roots (x ∈ [lo², hi²] is decided exactly), sums and matrix products, and 80-digit ``mpmath`` for
exp, log, acos, asin, atan2 and erf (converted exactly to Fractions).  Operands are hypothesis-drawn over
the whole float range (subnormals, ±0, values near overflow) plus adversarial lists; both float64 and
float32; the namespace under test (NumPy, array_api_strict on device1, PyTorch, CuPy).
"""
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ntkref import intervals
from ntkref.intervals import Interval
from ntkref._lib.validation import InvalidParameterError

ADVERSARIAL64 = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-300, 0.1, 1.0 / 3.0, 1.0, -1.0,
                 1.0 + 2**-52, 2.0**53, 1e300, 1.7976931348623157e308, -1.7976931348623157e308, 3.0, -0.7]
ADVERSARIAL32 = [0.0, 1e-45, -1e-45, 1.1754944e-38, 1e-30, 0.1, 1.0, -1.0, 3.4028235e38, -3.4028235e38, 16777217.0]


def _finite(width):
    return st.floats(allow_nan=False, allow_infinity=False, width=width)


def _pairs(width, n=6):
    adv = ADVERSARIAL64 if width == 64 else ADVERSARIAL32
    one = st.one_of(_finite(width), st.sampled_from(adv))
    interval = st.tuples(one, one).map(lambda t: (min(t), max(t)))
    return st.lists(interval, min_size=1, max_size=n)


def _F(v):
    return Fraction(float(v))


def _encloses(lo, hi, exact):
    """lo ≤ exact ≤ hi, with ±inf ends and exact a Fraction."""
    lo, hi = float(lo), float(hi)
    assert not (math.isnan(lo) or math.isnan(hi)), (lo, hi)
    ok_lo = lo == -math.inf or (lo != math.inf and Fraction(lo) <= exact)
    ok_hi = hi == math.inf or (hi != -math.inf and exact <= Fraction(hi))
    return ok_lo and ok_hi


def _inner(a, b):
    """Exact points of [a, b] to test: both ends and an exact interior rational."""
    fa, fb = Fraction(float(a)), Fraction(float(b))
    return [fa, fb, fa + (fb - fa) / 3]


def _make(asxp, pairs, dtype):
    lo = np.array([p[0] for p in pairs], dtype=dtype)
    hi = np.array([p[1] for p in pairs], dtype=dtype)
    hi = np.maximum(lo, hi)
    return Interval(asxp(lo), asxp(hi)), lo, hi


def _pm(dtype):
    return st.sampled_from([(np.float64, 64), (np.float32, 32)])


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@given(data=st.data())
def test_arithmetic_contains_the_exact_result(asxp, tonp, op, data):
    dtype, width = data.draw(_pm(None))
    pa = data.draw(_pairs(width))
    pb = data.draw(_pairs(width, len(pa)).filter(lambda p: len(p) == len(pa)))
    A, alo, ahi = _make(asxp, pa, dtype)
    B, blo, bhi = _make(asxp, pb, dtype)
    R = {"add": A + B, "sub": A - B, "mul": A * B, "div": A / B}[op]
    lo, hi = tonp(R.lo), tonp(R.hi)
    assert lo.dtype == dtype and not np.any(np.isnan(lo)) and not np.any(np.isnan(hi))
    for i in range(len(pa)):
        for x in _inner(alo[i], ahi[i]):
            for y in _inner(blo[i], bhi[i]):
                if op == "div":
                    if blo[i] <= 0 <= bhi[i]:
                        assert lo[i] == -math.inf and hi[i] == math.inf
                        continue
                    exact = x / y
                else:
                    exact = {"add": x + y, "sub": x - y, "mul": x * y}[op]
                assert _encloses(lo[i], hi[i], exact), (op, x, y, lo[i], hi[i])


def test_arithmetic_on_adversarial_points(asxp, tonp):
    """All pairs of the adversarial float64 values as points: the results enclose the exact ones; overflow
    of the rounded result (1e300·1e300) keeps a finite, correct lower end (nextafter(+inf, −inf) = max)."""
    vals = np.array(ADVERSARIAL64)
    a, b = np.meshgrid(vals, vals)
    a, b = a.ravel(), b.ravel()
    A, B = Interval(asxp(a)), Interval(asxp(b))
    for R, f in ((A + B, lambda x, y: x + y), (A - B, lambda x, y: x - y), (A * B, lambda x, y: x * y)):
        lo, hi = tonp(R.lo), tonp(R.hi)
        for i in range(a.size):
            assert _encloses(lo[i], hi[i], f(_F(a[i]), _F(b[i])))
    big = Interval(asxp(np.array([1e300])))
    prod = big * big
    assert tonp(prod.lo)[0] == np.finfo(np.float64).max and tonp(prod.hi)[0] == math.inf
    tiny = Interval(asxp(np.array([5e-324])))
    half = tiny * 0.5  # exact 2.5e-324 rounds to 0 or 5e-324: enclosed by one subnormal step
    assert tonp(half.lo)[0] <= 0 and tonp(half.hi)[0] >= 5e-324


@given(data=st.data())
def test_sqrt_and_square_contain_the_exact_result(asxp, tonp, data):
    dtype, width = data.draw(_pm(None))
    pa = data.draw(_pairs(width))
    A, alo, ahi = _make(asxp, pa, dtype)
    S, Q = intervals.square(A), intervals.sqrt(A)
    slo, shi, qlo, qhi = (tonp(v) for v in (S.lo, S.hi, Q.lo, Q.hi))
    for i in range(len(pa)):
        for x in _inner(alo[i], ahi[i]):
            assert _encloses(slo[i], shi[i], x * x)
            if x >= 0:  # √x ∈ [qlo, qhi] ⇔ qlo² ≤ x ≤ qhi² (qlo ≥ 0), decided exactly
                assert qlo[i] >= 0
                assert _F(qlo[i]) ** 2 <= x
                assert qhi[i] == math.inf or x <= _F(qhi[i]) ** 2


def _mp_fraction(v):
    """An mpmath number as an exact Fraction (its binary mantissa and exponent)."""
    sign, man, exp, _ = mpmath.mpf(v)._mpf_
    return (-1) ** sign * Fraction(int(man)) * (Fraction(2) ** int(exp))


FUNCTIONS = {
    "exp": (intervals.exp, mpmath.exp, (-800.0, 800.0)),
    "log": (intervals.log, mpmath.log, (1e-320, 1e308)),
    "acos": (intervals.acos, mpmath.acos, (-1.0, 1.0)),
    "asin": (intervals.asin, mpmath.asin, (-1.0, 1.0)),
    "erf": (intervals.erf, mpmath.erf, (-30.0, 30.0)),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@given(data=st.data())
def test_library_functions_contain_the_exact_result(asxp, tonp, name, data):
    """Assumption (A2) (≤ LIBRARY_ULPS representable numbers) checked on drawn points: 80-digit mpmath."""
    f, mp_f, (a, b) = FUNCTIONS[name]
    dtype, width = data.draw(_pm(None))
    one = st.floats(a, b, width=width) if width == 64 else st.floats(float(np.float32(max(a, -3e38))),
                                                                     float(np.float32(min(b, 3e38))), width=32)
    pts = data.draw(st.lists(one, min_size=1, max_size=6))
    x = np.array(pts, dtype=dtype)
    x = np.where(x == 0, np.asarray(0.0, dtype), x)  # −0 → +0
    R = f(Interval(asxp(x)))
    lo, hi = tonp(R.lo), tonp(R.hi)
    with mpmath.workdps(80):
        for i in range(x.size):
            if name == "log" and x[i] <= 0:
                continue
            exact = _mp_fraction(mp_f(mpmath.mpf(float(x[i]))))
            assert _encloses(lo[i], hi[i], exact), (name, x[i], lo[i], hi[i])


@given(data=st.data())
def test_atan2_contains_the_exact_angle(asxp, tonp, data):
    dtype, width = data.draw(_pm(None))
    big = 1e30 if width == 64 else float(np.float32(1e30))
    pos = st.floats(0.0, big, width=width)
    anyf = st.floats(-big, big, width=width)
    ys = data.draw(st.lists(st.tuples(pos, pos).map(sorted), min_size=1, max_size=5))
    xs = data.draw(st.lists(st.tuples(anyf, anyf).map(sorted), min_size=len(ys), max_size=len(ys)))
    Y, ylo, yhi = _make(asxp, ys, dtype)
    X, xlo, xhi = _make(asxp, xs, dtype)
    R = intervals.atan2(Y, X)
    lo, hi = tonp(R.lo), tonp(R.hi)
    with mpmath.workdps(80):
        for i in range(len(ys)):
            for y in (ylo[i], yhi[i]):
                for x in (xlo[i], xhi[i]):
                    if y == 0 and x == 0:
                        continue
                    exact = _mp_fraction(mpmath.atan2(mpmath.mpf(float(y)), mpmath.mpf(float(x))))
                    assert _encloses(lo[i], hi[i], exact), (y, x, lo[i], hi[i])


@given(data=st.data())
def test_sum_and_matmul_contain_the_exact_result(asxp, tonp, data):
    """The a-priori bounds γ_{n−1}Σ|x| (sums) and γₙ|A||B| + nη (products), against exact Fractions, on
    cancelling, subnormal and huge entries."""
    dtype, width = data.draw(_pm(None))
    big = 1e300 if width == 64 else float(np.float32(1e35))
    vals = st.one_of(st.floats(-big, big, width=width), st.sampled_from([1e-320 if width == 64 else 1e-44, 1.0, -1.0]))
    m, k, n = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 7)), data.draw(st.integers(1, 3))
    A = np.array(data.draw(st.lists(vals, min_size=m * k, max_size=m * k)), dtype=dtype).reshape(m, k)
    B = np.array(data.draw(st.lists(vals, min_size=k * n, max_size=k * n)), dtype=dtype).reshape(k, n)
    rad = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.5, 1e-310 if width == 64 else 1e-40]),
                                      min_size=m * k, max_size=m * k)), dtype=dtype).reshape(m, k)
    IA = Interval(asxp(A - rad), asxp(A + rad)) if data.draw(st.booleans()) else Interval(asxp(A))
    C = intervals.matmul(IA, asxp(B))
    lo, hi = tonp(C.lo), tonp(C.hi)
    Alo, Ahi = tonp(IA.lo), tonp(IA.hi)
    for i in range(m):
        for j in range(n):
            for pick in (Alo, Ahi):
                exact = sum(_F(pick[i, t]) * _F(B[t, j]) for t in range(k))
                assert _encloses(lo[i, j], hi[i, j], exact)
    S = intervals.sum(Interval(asxp(A)), axis=1)
    slo, shi = tonp(S.lo), tonp(S.hi)
    for i in range(m):
        assert _encloses(slo[i], shi[i], sum(_F(v) for v in A[i]))


def test_matmul_of_two_intervals_and_cancellation(asxp, tonp):
    """Both factors intervals, and fl(Σ) = 0 where the exact sum is 2 (catastrophic cancellation)."""
    a = np.array([[1e16, 1.0, -1e16, 1.0]])
    b = np.ones((4, 1))
    C = intervals.matmul(Interval(asxp(a)), Interval(asxp(b) - 0.25, asxp(b) + 0.25))
    lo, hi = tonp(C.lo)[0, 0], tonp(C.hi)[0, 0]
    for s in (-0.25, 0.25):
        assert _encloses(lo, hi, sum(Fraction(v) * (1 + Fraction(s)) for v in a[0]))
    S = intervals.sum(Interval(asxp(a[0])))
    assert _encloses(tonp(S.lo), tonp(S.hi), Fraction(2))


def test_constants_round_outward(asxp, tonp):
    f32 = asxp(np.zeros(1, np.float32))
    c = intervals.constant(Fraction(1, 10), f32)
    assert _F(tonp(c.lo)) < Fraction(1, 10) < _F(tonp(c.hi))
    x = Interval(f32 + 1.0)
    y = x * 0.1  # the Python float 0.1 is not a float32: enclosed, not rounded to nearest
    assert _encloses(tonp(y.lo)[0], tonp(y.hi)[0], Fraction(0.1))
    pi = intervals.acos(Interval(asxp(np.array([-1.0]))))
    with mpmath.workdps(50):
        assert _encloses(tonp(pi.lo)[0], tonp(pi.hi)[0], _mp_fraction(mpmath.pi))


def test_division_by_zero_straddle_and_no_nan(asxp, tonp):
    one = Interval(asxp(np.array([1.0, 1.0, 0.0])))
    den = Interval(asxp(np.array([-1.0, 0.0, 0.0])), asxp(np.array([1.0, 0.0, 0.0])))
    q = one / den
    assert np.all(tonp(q.lo) == -np.inf) and np.all(tonp(q.hi) == np.inf)
    inf = Interval(asxp(np.array([-np.inf])), asxp(np.array([np.inf])))
    z = Interval(asxp(np.array([0.0])))
    prod = inf * z  # every real times 0 is 0
    assert -1e-323 <= tonp(prod.lo)[0] <= 0 <= tonp(prod.hi)[0] <= 1e-323
    d = inf - inf
    assert tonp(d.lo)[0] == -np.inf and tonp(d.hi)[0] == np.inf


def test_results_stay_on_the_inputs_device(asxp, on_device):
    A = Interval(asxp(np.array([[0.5, 2.0]])), asxp(np.array([[1.0, 3.0]])))
    outs = [A + A, A * A, A / 3.0, intervals.sqrt(A), intervals.acos(A * 0.1), intervals.matmul(A, asxp(np.ones((2, 1)))),
            intervals.sum(A, axis=1), intervals.atan2(A, -A), intervals.exp(A), intervals.log(A)]
    for R in outs:
        on_device(R.lo, R.hi)


def test_invalid_intervals_raise(asxp):
    with pytest.raises(InvalidParameterError, match="'lo' and 'hi'"):
        Interval(asxp(np.array([1.0])), asxp(np.array([0.0])))
    with pytest.raises(InvalidParameterError, match="'lo'.*NaN"):
        Interval(asxp(np.array([np.nan])))
    with pytest.raises(InvalidParameterError, match="'value'"):
        intervals.constant(math.inf, asxp(np.zeros(1)))


# --------------------------------------------------------------------------- overflow partway (review, wave 3)
def test_sum_and_matmul_enclose_when_a_partial_sum_overflows(asxp, tonp):
    """The exact result is finite but fl(Σ) overflows partway (every order of five terms near 2¹⁰²³): the
    enclosure must still contain it (before the fix matmul returned [1.797e308, inf] around −9.89e307, and
    sum's lower end was +inf); each entry is checked against exact Fractions."""
    import itertools

    M = 2.0 ** 1023
    vals = [0.9 * M, 0.9 * M, 0.9 * M, -1.9 * M, -1.9 * M]
    with np.errstate(all="ignore"):
        for perm in set(itertools.permutations(range(5))):
            row = np.array([[vals[i] for i in perm]])
            exact = sum(_F(v) for v in row[0])
            C = intervals.matmul(Interval(asxp(row)), asxp(np.ones((5, 1))))
            assert _encloses(tonp(C.lo)[0, 0], tonp(C.hi)[0, 0], exact), perm
            S = intervals.sum(Interval(asxp(row[0])))
            assert _encloses(tonp(S.lo), tonp(S.hi), exact), perm
        big = np.array([1.7e308, 1.7e308, -1.7e308])  # fl: inf (pairwise or left to right); exact 1.7e308
        S = intervals.sum(Interval(asxp(big)))
        assert _encloses(tonp(S.lo), tonp(S.hi), _F(1.7e308))
        C = intervals.matmul(Interval(asxp(big[None, :])), asxp(np.ones((3, 1))))
        assert _encloses(tonp(C.lo)[0, 0], tonp(C.hi)[0, 0], _F(1.7e308))


def test_points_a_float_array_would_round_are_refused_not_rounded():
    """A point operand is taken exactly, so one that converting to a float array rounds to nearest (an int beyond
    2^53, a Fraction in a list) would give an enclosure missing the exact value: [-2^60] + [2^60 + 1] enclosed
    only 0, the exact 1 outside.  Refused, naming the operand; Python numbers go through constant() (outward)."""
    from fractions import Fraction

    a = Interval(np.array([-(2.0 ** 60)]))
    for bad in ([2 ** 60 + 1], [Fraction(1, 10)], ([1.0], [2 ** 61 + 1])):
        with pytest.raises(InvalidParameterError, match="'other'"):
            a + bad
    with pytest.raises(InvalidParameterError, match="'x'"):
        a.contains(np.array([2 ** 60 + 1]))
    with pytest.raises(InvalidParameterError, match="'x'"):
        a.contains(2 ** 60 + 1)
    r = a + (2 ** 60 + 1)  # a Python int: outward-rounded, so the exact 1 is enclosed
    assert Fraction(float(r.lo[0])) <= 1 <= Fraction(float(r.hi[0]))
    s = Interval(np.array([-0.1])) + [0.1, 3]  # floats and small ints are exact: fine
    assert float(s.lo[0]) <= 0.0 <= float(s.hi[0])
