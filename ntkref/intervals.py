r"""Outward-rounded interval arithmetic on the array API: enclosures that hold in floating point.

An :class:`Interval` is a pair of arrays (lo, hi) of one namespace and device (NumPy, PyTorch, CuPy,
``array_api_strict``, …; float32 or float64) standing for the set of real numbers lo ≤ x ≤ hi, elementwise.
Every operation returns an interval that contains the exact real result for every choice of exact real
operands in the operand intervals (the *inclusion property*).  This module is what makes the radii of
``ntkref.certify`` theorems about the floats they are computed from, not only about the real-number model
(the certificates re-evaluate their bound with it at the end).

The theorem and its assumptions
-------------------------------
Assumptions (A1)–(A4) are the only ones; the tests check each operation against exact rational arithmetic
(``fractions.Fraction``) on hypothesis-drawn and adversarial operands (huge, tiny, subnormal, signed zeros).

- (A1) IEEE-754 binary32/binary64 arithmetic with round-to-nearest and gradual underflow (no flush-to-zero,
  no denormals-are-zero): then + − × ÷ √ are *correctly rounded* — the computed r = fl(x ∘ y) is the
  representable number nearest to the exact x ∘ y, also in the subnormal range.  So the exact value lies
  strictly between ``nextafter(r, −∞)`` and ``nextafter(r, +∞)``: one step of ``xp.nextafter`` outward
  encloses it.  This includes overflow: round-to-nearest gives ±∞ only when |x ∘ y| exceeds the largest
  finite number, and ``nextafter(+∞, −∞)`` is that number.
- (A2) The library functions exp, log, acos, asin, atan2 and erf return a value within ``LIBRARY_ULPS`` = 4
  representable numbers of the exact value (glibc, CUDA's libdevice and the MKL/SLEEF kernels PyTorch
  uses document ≤ 1–4 ulp for these in float64 and float32); their results are moved outward by that
  many ``nextafter`` steps.  This is an assumption about the math library, not a theorem.
- (A3) Sums and matrix products are evaluated by *some* sequence of correctly rounded additions and
  multiplications (or fused multiply-adds) — any order, any tree (pairwise, blocked, SIMD lanes, GPU
  tree reductions, BLAS), but no Strassen-type algorithm and no reduced-precision inputs (TF32 off).
- (A4) Python floats are IEEE binary64 (every platform CPython runs on).

Rounding of sums and dot products (proved here, used by :func:`sum` and :func:`matmul`).  Let u = eps/2 and
γₖ = k·u/(1 − k·u) (Higham, *Accuracy and Stability*, Lemma 3.1 and eqs. (3.4)–(4.4)).  Under (A1) and
(A3), for xᵢ, yᵢ floats and n terms:

- summation:    |fl(Σ xᵢ) − Σ xᵢ| ≤ γ_{n−1} Σ|xᵢ|;  each xᵢ passes through at most n − 1 additions in any
  summation tree, each a factor (1 + δ), |δ| ≤ u (additions whose result is subnormal are exact, so
  underflow adds nothing).
- dot product:  |fl(Σ xᵢyᵢ) − Σ xᵢyᵢ| ≤ γ_n Σ|xᵢ||yᵢ| + n·η,  η = the smallest positive subnormal
  (a product that underflows is off by at most η/2 absolutely; a fused multiply-add only removes roundings).
- for non-negative terms the exact S obeys S ≤ (fl(S) + n·η)/(1 − γ_n), which bounds the unknown exact
  Σ|xᵢ||yᵢ| by a computed quantity.

So a sum is enclosed by fl(Σ) ∓ c·fl(Σ|xᵢ|) with c ≥ γ_{n−1}/(1 − γ_{n−1}), and a matrix product of
intervals in midpoint–radius form [A] = ⟨Aₘ, A_r⟩, [B] = ⟨Bₘ, B_r⟩ by ⟨fl(AₘBₘ), ρ⟩ with
ρ ≥ γ_n|Aₘ||Bₘ| + n·η + |Aₘ|B_r + A_r(|Bₘ| + B_r) (Rump, *Fast and parallel interval arithmetic*, BIT 39
(1999)); every constant (γ, c) is a host float rounded up exactly from its rational value, and every
elementwise step that builds ρ is rounded upward by ``nextafter``.  This costs two matrix products for a
point times a point, three when one factor is an interval, and per-element work O(1) — the a-priori
bound, not per-operation ``nextafter``, which would need a sequential loop.  These bounds assume no overflow:
an entry whose fl(Σ) or fl(AₘBₘ) is not finite (an intermediate sum overflowed, though the exact result may be
finite — ∞ never returns to a finite value under + and ×) is [−∞, +∞] on that side or entry; a finite one
had no overflow anywhere in its evaluation, so the bounds hold for it.

Special values.  Endpoints may be ±∞ (an unbounded side).  0·∞ inside a product is taken as 0 (every
real number times 0 is 0); an undefined combination (∞ − ∞) widens that side to ±∞; a result is never
NaN.  Division by an interval that contains 0 returns [−∞, +∞] (stated, not an error: the caller's
test lo > 0 then simply fails).  :func:`sqrt`, :func:`log`, :func:`acos` and :func:`asin` evaluate on the
intersection of the operand with their domain ([0, ∞), [0, ∞), [−1, 1]): the caller asserts that the exact
value lies in the domain (e.g. (R − p)(R + p) ≥ 0 by Cauchy–Schwarz), which outward rounding may have
widened beyond.  :func:`atan2` takes y ≥ 0 (the upper half-plane, result in [0, π]).
"""
from __future__ import annotations

import math
import struct
from fractions import Fraction

from ._lib.backend import device_of, is_array, namespace
from ._lib.validation import InvalidParameterError, check_array, check_int

__all__ = [
    "LIBRARY_ULPS",
    "Interval",
    "constant",
    "sqrt",
    "square",
    "exp",
    "log",
    "acos",
    "asin",
    "atan2",
    "erf",
    "abs",
    "relu",
    "maximum",
    "minimum",
    "where",
    "sum",
    "matmul",
]

LIBRARY_ULPS = 4
"""Assumption (A2): exp, log, acos, asin, atan2, erf are within this many representable numbers of exact."""

_INF = math.inf


# ---------------------------------------------------------------------------
# host constants, rounded outward into the dtype
# ---------------------------------------------------------------------------
def _f32(c):
    """c rounded to the nearest binary32 (±inf beyond its range)."""
    try:
        return struct.unpack("<f", struct.pack("<f", c))[0]
    except OverflowError:
        return math.copysign(_INF, c)


def _f32_next(f, up):
    """The binary32 neighbour of the binary32 value f towards +inf (up) or −inf."""
    if math.isinf(f) or math.isnan(f):
        return f
    if f == 0.0:
        tiny = struct.unpack("<f", struct.pack("<I", 1))[0]
        return tiny if up else -tiny
    bits = struct.unpack("<I", struct.pack("<f", f))[0]
    away = (f > 0) == up  # moving away from zero increases the magnitude bits
    bits = bits + 1 if away else bits - 1
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _bounds_of(c, single):
    """(lo, hi): floats representable in binary32 (``single``) or binary64 with lo ≤ c ≤ hi, c real
    (int, float or Fraction) — outward rounding of a host constant."""
    exact = Fraction(c)
    f = float(exact) if not single else _f32(float(exact))
    if math.isinf(f):
        big = 3.4028234663852886e38 if single else 1.7976931348623157e308
        return (math.copysign(big, f), _INF) if f > 0 else (-_INF, math.copysign(big, f))
    if Fraction(f) == exact:
        return f, f
    nxt = (lambda v, up: _f32_next(v, up)) if single else (lambda v, up: math.nextafter(v, _INF if up else -_INF))
    if Fraction(f) < exact:
        return f, nxt(f, True)
    return nxt(f, False), f


def _up_const(c, dtype, xp):
    """A host float ≥ c, representable in ``dtype`` (float32 or float64)."""
    return _bounds_of(c, dtype == xp.float32)[1]


def _gamma_ratio(k, dtype, xp):
    """A float ≥ γₖ/(1 − γₖ), γₖ = k·u/(1 − k·u), u = eps/2 (for k = 0: 0)."""
    if k <= 0:
        return 0.0
    u = Fraction(float(xp.finfo(dtype).eps)) / 2
    if k * u >= Fraction(1, 2):
        raise InvalidParameterError(f"intervals: {k} terms exceed what the a-priori rounding bound allows (k·u < 1/2).")
    g = k * u / (1 - k * u)
    return _up_const(g / (1 - g), dtype, xp)


def _gamma(k, dtype, xp):
    u = Fraction(float(xp.finfo(dtype).eps)) / 2
    return _up_const(k * u / (1 - k * u), dtype, xp) if k > 0 else 0.0


# ---------------------------------------------------------------------------
# elementwise helpers
# ---------------------------------------------------------------------------
def _full(x, value, xp):
    return xp.asarray(value, dtype=x.dtype, device=device_of(x))


def _down(x, xp, steps=1):
    target = _full(x, -_INF, xp)
    for _ in range(steps):
        x = xp.nextafter(x, target)
    return x


def _up(x, xp, steps=1):
    target = _full(x, _INF, xp)
    for _ in range(steps):
        x = xp.nextafter(x, target)
    return x


def _clean(lo, hi, xp):
    """NaN endpoints (∞ − ∞ and the like) become the unbounded side: never NaN."""
    return xp.where(xp.isnan(lo), -_INF, lo), xp.where(xp.isnan(hi), _INF, hi)


def _nan_to_zero(x, xp):
    return xp.where(xp.isnan(x), 0.0, x)


class Interval:
    r"""Arrays ``lo`` ≤ ``hi`` enclosing real numbers elementwise; arithmetic rounds outward (module docstring).

    Parameters
    ----------
    lo : array (float32 or float64)
        Lower ends; any namespace and device.
    hi : array or None
        Upper ends, same namespace, dtype and shape as ``lo``; None gives the point interval [lo, lo]
        (the float values themselves, exactly).

    Operators ``+ − × ÷`` (and unary −) take intervals, arrays (points) and Python numbers (exact reals,
    rounded outward into the dtype when not representable, e.g. 0.1 in float32).  A point array is taken
    exactly, so it must have the interval's dtype, namespace and device and hold no NaN (±∞ is an unbounded
    end), and it must broadcast against the interval; otherwise an ``InvalidParameterError`` names the operand
    (as do :func:`maximum`, :func:`minimum`, :func:`where`, :func:`atan2` and :func:`matmul`); indexing
    ``I[key]`` indexes both ends.  ``I.lo``/``I.hi`` are the enclosure; ``I.contains(x)`` tests points.

    Examples
    --------
    >>> import numpy as np
    >>> from fractions import Fraction
    >>> from ntkref import intervals
    >>> x = intervals.Interval(np.array([0.1]))           # the float 0.1 exactly
    >>> s = x + x + x                                     # encloses 3·fl(0.1) in real arithmetic
    >>> bool(Fraction(s.lo[0]) <= 3 * Fraction(0.1) <= Fraction(s.hi[0]))
    True
    >>> third = intervals.Interval(np.array([1.0])) / 3   # 1/3 is not a float: a one-ulp-wide enclosure
    >>> bool(Fraction(third.lo[0]) < Fraction(1, 3) < Fraction(third.hi[0]))
    True
    >>> (intervals.Interval(np.array([1.0])) / intervals.Interval(np.array([-1.0]), np.array([1.0]))).hi
    array([inf])
    """

    __slots__ = ("lo", "hi", "_point")

    def __init__(self, lo, hi=None):
        lo = check_array(lo, "lo", caller="Interval", finite=False)
        xp = namespace(lo)
        if lo.dtype not in (xp.float32, xp.float64):
            raise InvalidParameterError(f"The 'lo' parameter of Interval must be float32 or float64; got {lo.dtype}.")
        if bool(xp.any(xp.isnan(lo))):
            raise InvalidParameterError("The 'lo' parameter of Interval must not contain NaN.")
        if hi is None:
            hi, point = lo, True
        else:
            hi = check_array(hi, "hi", caller="Interval", xp=xp, like=lo, finite=False)
            if tuple(hi.shape) != tuple(lo.shape):
                raise InvalidParameterError(f"The 'hi' parameter of Interval must have the shape of 'lo', "
                                            f"{tuple(lo.shape)}. Got {tuple(hi.shape)} instead.")
            if hi.dtype != lo.dtype:
                raise InvalidParameterError(f"The 'hi' parameter of Interval must have dtype {lo.dtype}; got {hi.dtype}.")
            if not bool(xp.all(lo <= hi)):  # also refuses NaN in hi
                raise InvalidParameterError("The 'lo' and 'hi' parameters of Interval must satisfy lo <= hi.")
            point = False
        self.lo, self.hi, self._point = lo, hi, point

    @classmethod
    def _make(cls, lo, hi, point=False):
        """Unchecked constructor for results (their ends are ordered by construction)."""
        out = cls.__new__(cls)
        out.lo, out.hi, out._point = lo, hi, point
        return out

    # -- basic properties ---------------------------------------------------
    @property
    def xp(self):
        return namespace(self.lo)

    @property
    def dtype(self):
        return self.lo.dtype

    @property
    def shape(self):
        return tuple(self.lo.shape)

    def __repr__(self):
        return f"Interval(lo={self.lo!r}, hi={self.hi!r})"

    def __getitem__(self, key):
        return Interval._make(self.lo[key], self.hi[key], self._point)

    def contains(self, x):
        """Boolean array: lo ≤ x ≤ hi (``x`` real numbers broadcasting against the interval; NaN lies in none)."""
        _check_exact_points(x, "x", "Interval.contains", self.xp)
        x = check_array(x, "x", caller="Interval.contains", xp=self.xp, like=self.lo, finite=False)
        _check_broadcast(x.shape, self.shape, "x", "Interval.contains")
        return (self.lo <= x) & (x <= self.hi)

    # -- arithmetic -----------------------------------------------------------
    def __neg__(self):
        return Interval._make(-self.hi, -self.lo, self._point)

    def __add__(self, other):
        o = _as_interval(other, self, "other", "Interval +")
        xp = self.xp
        lo, hi = _clean(_down(self.lo + o.lo, xp), _up(self.hi + o.hi, xp), xp)
        return Interval._make(lo, hi)

    __radd__ = __add__

    def __sub__(self, other):
        return self + (-_as_interval(other, self, "other", "Interval -"))

    def __rsub__(self, other):
        return _as_interval(other, self, "other", "Interval -") + (-self)

    def __mul__(self, other):
        o = _as_interval(other, self, "other", "Interval *")
        xp = self.xp
        if o._point and self._point:
            p = self.lo * o.lo
            lo, hi = _clean(_down(p, xp), _up(p, xp), xp)
            return Interval._make(lo, hi)
        prods = [_nan_to_zero(a * b, xp) for a in (self.lo, self.hi) for b in (o.lo, o.hi)]
        lo, hi = prods[0], prods[0]
        for p in prods[1:]:
            lo, hi = xp.minimum(lo, p), xp.maximum(hi, p)
        lo, hi = _clean(_down(lo, xp), _up(hi, xp), xp)
        return Interval._make(lo, hi)

    __rmul__ = __mul__

    def __truediv__(self, other):
        o = _as_interval(other, self, "other", "Interval /")
        xp = self.xp
        quots = [a / b for a in (self.lo, self.hi) for b in (o.lo, o.hi)]
        lo, hi = quots[0], quots[0]
        for q in quots[1:]:
            lo, hi = xp.minimum(lo, q), xp.maximum(hi, q)
        lo, hi = _clean(_down(lo, xp), _up(hi, xp), xp)
        straddle = (o.lo <= 0.0) & (o.hi >= 0.0)  # division by an interval containing 0: [−∞, ∞]
        return Interval._make(xp.where(straddle, -_INF, lo), xp.where(straddle, _INF, hi))

    def __rtruediv__(self, other):
        return _as_interval(other, self, "other", "Interval /") / self


_EXACT_INT = 2 ** 53  # integers of at most this magnitude are exact in float64


def _check_exact_points(value, name, caller, xp):
    """Refuse points that converting to a float array would round (a list's big ints or Fractions, an integer
    array beyond 2^53): a point is taken exactly, so rounding it to nearest would make an enclosure unsound.
    Python numbers and Fractions go one by one through :func:`constant` (rounded outward) instead."""
    if isinstance(value, (list, tuple)):
        stack = list(value)
        while stack:
            v = stack.pop()
            if isinstance(v, (list, tuple)):
                stack.extend(v)
            elif isinstance(v, float) or (isinstance(v, int) and -_EXACT_INT <= v <= _EXACT_INT):  # (abs: the interval's)
                continue
            else:
                raise InvalidParameterError(
                    f"The {name!r} parameter of {caller} must hold floats, or ints of magnitude at most 2^53, which "
                    f"are taken exactly; got {v!r}, which a float array would round. Pass it on its own (a Python "
                    "number or Fraction is rounded outward, as intervals.constant does).")
    elif is_array(value):
        vx = namespace(value)  # (its own namespace: another library's array is refused by the caller, by name)
        if vx.isdtype(value.dtype, "integral") and math.prod(value.shape) > 0 \
                and float(vx.max(vx.abs(vx.astype(value, vx.float64)))) > _EXACT_INT:
            raise InvalidParameterError(f"The {name!r} parameter of {caller} holds integers beyond 2^53, which a float "
                                        "array would round; it is taken exactly, so it must be exact in float64.")
    elif isinstance(value, int) and not isinstance(value, bool) and not -_EXACT_INT <= value <= _EXACT_INT:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} is an integer beyond 2^53, which a float "
                                    "would round; it is taken exactly, so it must be exact in float64.")
    elif isinstance(value, Fraction):
        raise InvalidParameterError(f"The {name!r} parameter of {caller} is a Fraction, which a float would round; "
                                    "compare with the interval's ends in exact arithmetic instead.")


def _check_broadcast(shape, other, name, caller):
    """Refuse an operand whose shape does not broadcast against the other operand's (naming it)."""
    for a, b in zip(reversed(tuple(shape)), reversed(tuple(other))):
        if a != b and a != 1 and b != 1:
            raise InvalidParameterError(f"The {name!r} parameter of {caller} must broadcast against the shape "
                                        f"{tuple(other)}. Got shape {tuple(shape)} instead.")


def _check_interval(x, name, caller):
    if not isinstance(x, Interval):
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be an Interval (intervals.Interval(lo, "
                                    f"hi)). Got a {type(x).__name__} instead.")
    return x


def _operands(a, b, names, caller, shape=True):
    """Both operands of a binary function as Intervals (at least one must be one: it is the other's template)."""
    if not isinstance(a, Interval) and not isinstance(b, Interval):
        raise InvalidParameterError(f"The {names[0]!r} or {names[1]!r} parameter of {caller} must be an Interval. "
                                    f"Got a {type(a).__name__} and a {type(b).__name__} instead.")
    a = _as_interval(a, a if isinstance(a, Interval) else b, names[0], caller, shape=shape)
    return a, _as_interval(b, a, names[1], caller, shape=shape)


def _as_interval(value, like, name, caller, shape=True):
    """``value`` (Interval, array or real number) as an Interval of ``like``'s namespace, dtype and device; an
    array is a point taken exactly, so it must already have the interval's dtype (no rounding) and no NaN."""
    if isinstance(value, Interval):
        if value.dtype != like.dtype:
            raise InvalidParameterError(f"The {name!r} parameter of {caller} must have dtype {like.dtype}. "
                                        f"Got an Interval of {value.dtype} instead.")
        if shape:
            _check_broadcast(value.shape, like.shape, name, caller)
        return value
    if isinstance(value, (int, float, Fraction)) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidParameterError(f"The {name!r} parameter of {caller} must be a finite real number or an "
                                        f"Interval. Got {value!r} instead.")
        return constant(value, like.lo)
    if not (is_array(value) or isinstance(value, (list, tuple))):
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be an Interval, an array of "
                                    f"{like.dtype} or a real number. Got a {type(value).__name__} instead.")
    src = value.dtype if is_array(value) else None
    xp = like.xp
    _check_exact_points(value, name, caller, xp)
    if src is not None and namespace(value) is not xp:
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} is a {type(value).__module__}.{type(value).__name__} while the "
            f"interval computes in {getattr(xp, '__name__', xp)}: inputs from different array libraries are not "
            "converted implicitly; move them to one first.")
    arr = check_array(value, name, caller=caller, xp=xp, like=like.lo, finite=False)
    if (src if src is not None else arr.dtype) != like.dtype:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must have the interval's dtype "
                                    f"{like.dtype} (a point is taken exactly, never rounded). Got "
                                    f"{src if src is not None else arr.dtype} instead.")
    if bool(xp.any(xp.isnan(arr))):
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must not contain NaN.")
    if shape:
        _check_broadcast(arr.shape, like.shape, name, caller)
    return Interval._make(arr, arr, True)


def constant(value, like):
    r"""The tightest interval of ``like``'s dtype and device containing the real number ``value``.

    Parameters
    ----------
    value : int, float or fractions.Fraction
        An exact real number (a Python float is the binary64 number it holds).
    like : array
        Gives the namespace, dtype (float32 or float64) and device; the result is 0-dimensional.

    Returns
    -------
    Interval
        [value, value] when representable, else its two neighbours.

    Examples
    --------
    >>> import numpy as np
    >>> from fractions import Fraction
    >>> from ntkref import intervals
    >>> c = intervals.constant(Fraction(1, 10), np.zeros(1, dtype=np.float32))
    >>> bool(Fraction(float(c.lo)) < Fraction(1, 10) < Fraction(float(c.hi)))
    True
    """
    xp = namespace(like)
    if not is_array(like) or like.dtype not in (xp.float32, xp.float64):
        raise InvalidParameterError(f"The 'like' parameter of constant must be a float32 or float64 array. Got "
                                    f"{'dtype ' + str(like.dtype) if is_array(like) else 'a ' + type(like).__name__} "
                                    "instead.")
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise InvalidParameterError(f"The 'value' parameter of constant must be an int, float or Fraction; got {value!r}.")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidParameterError(f"The 'value' parameter of constant must be finite; got {value!r}.")
    lo, hi = _bounds_of(value, like.dtype == xp.float32)
    dev = device_of(like)
    lo_a = xp.asarray(lo, dtype=like.dtype, device=dev)
    if lo == hi:
        return Interval._make(lo_a, lo_a, True)
    return Interval._make(lo_a, xp.asarray(hi, dtype=like.dtype, device=dev))


# ---------------------------------------------------------------------------
# elementary functions
# ---------------------------------------------------------------------------
def _monotone(x, f, increasing, low=None, high=None, steps=LIBRARY_ULPS):
    """f over the interval x (clipped to [low, high]) for a monotone f within ``steps`` representable numbers."""
    xp = x.xp
    lo, hi = x.lo, x.hi
    if low is not None:
        lo, hi = xp.maximum(lo, low), xp.maximum(hi, low)
    if high is not None:
        lo, hi = xp.minimum(lo, high), xp.minimum(hi, high)
    a, b = (f(lo), f(hi)) if increasing else (f(hi), f(lo))
    lo, hi = _clean(_down(a, xp, steps), _up(b, xp, steps), xp)
    return Interval._make(lo, hi)


def sqrt(x):
    r"""√x over x ∩ [0, ∞) (correctly rounded: one step outward).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import intervals
    >>> r = intervals.sqrt(intervals.Interval(np.array([2.0])))
    >>> bool(r.lo[0] ** 2 < 2.0 < r.hi[0] ** 2 or r.lo[0] < np.sqrt(2.0) < r.hi[0])
    True
    """
    _check_interval(x, "x", "sqrt")
    out = _monotone(x, x.xp.sqrt, True, low=0.0, steps=1)
    return Interval._make(x.xp.maximum(out.lo, 0.0), out.hi)


def square(x):
    r"""x² (exact range of the square, rounded outward).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import intervals
    >>> s = intervals.square(intervals.Interval(np.array([-1.0]), np.array([2.0])))
    >>> float(s.lo[0]), float(s.hi[0]) > 4.0
    (0.0, True)
    """
    _check_interval(x, "x", "square")
    xp = x.xp
    a, b = x.lo * x.lo, x.hi * x.hi
    straddle = (x.lo <= 0.0) & (x.hi >= 0.0)
    lo = xp.where(straddle, 0.0, xp.maximum(_down(xp.minimum(a, b), xp), 0.0))
    lo, hi = _clean(lo, _up(xp.maximum(a, b), xp), xp)
    return Interval._make(lo, hi)


def exp(x):
    r"""eˣ (assumption (A2)).

    Examples
    --------
    >>> import numpy as np, math
    >>> from ntkref import intervals
    >>> e = intervals.exp(intervals.Interval(np.array([1.0])))
    >>> bool(e.lo[0] < math.e < e.hi[0])
    True
    """
    _check_interval(x, "x", "exp")
    out = _monotone(x, x.xp.exp, True)
    return Interval._make(x.xp.maximum(out.lo, 0.0), out.hi)


def log(x):
    r"""ln x over x ∩ [0, ∞) (assumption (A2)); ln 0 = −∞.

    Examples
    --------
    >>> import numpy as np, math
    >>> from ntkref import intervals
    >>> v = intervals.log(intervals.Interval(np.array([2.0])))
    >>> bool(v.lo[0] < math.log(2.0) < v.hi[0])
    True
    """
    _check_interval(x, "x", "log")
    return _monotone(x, x.xp.log, True, low=0.0)


def _pi_hi(x):
    return _up_const(Fraction(math.pi) + Fraction(1, 10**15), x.dtype, x.xp)  # π < math.pi + 1e-15


def acos(x):
    r"""arccos x over x ∩ [−1, 1] (assumption (A2)); the result lies in [0, π].

    Examples
    --------
    >>> import numpy as np, math
    >>> from ntkref import intervals
    >>> v = intervals.acos(intervals.Interval(np.array([-1.0])))
    >>> bool(v.lo[0] <= math.pi <= v.hi[0])
    True
    """
    _check_interval(x, "x", "acos")
    xp = x.xp
    out = _monotone(x, xp.acos, False, low=-1.0, high=1.0)
    return Interval._make(xp.maximum(out.lo, 0.0), xp.minimum(out.hi, _pi_hi(x)))


def asin(x):
    r"""arcsin x over x ∩ [−1, 1] (assumption (A2)).

    Examples
    --------
    >>> import numpy as np, math
    >>> from ntkref import intervals
    >>> v = intervals.asin(intervals.Interval(np.array([1.0])))
    >>> bool(v.lo[0] <= math.pi / 2 <= v.hi[0])
    True
    """
    _check_interval(x, "x", "asin")
    return _monotone(x, x.xp.asin, True, low=-1.0, high=1.0)


def atan2(y, x):
    r"""The angle atan2(y, x) ∈ [0, π] for y ≥ 0 (y is intersected with [0, ∞); assumption (A2)).

    On the closed upper half-plane the angle decreases in x for fixed y > 0 and is monotone in y for
    fixed x, so its range over a box is attained at the corners; a box containing the origin (where the
    angle is undefined) gives [0, π].

    Examples
    --------
    >>> import numpy as np, math
    >>> from ntkref import intervals
    >>> v = intervals.atan2(intervals.Interval(np.array([1.0])), intervals.Interval(np.array([-1.0])))
    >>> bool(v.lo[0] < 3 * math.pi / 4 < v.hi[0])
    True
    """
    y, x = _operands(y, x, ("y", "x"), "atan2")
    xp = y.xp
    ylo, yhi = xp.maximum(y.lo, 0.0), xp.maximum(y.hi, 0.0)
    if x._point and y._point:
        corners = [xp.atan2(ylo, x.lo)]
    elif x._point:
        corners = [xp.atan2(ylo, x.lo), xp.atan2(yhi, x.lo)]
    else:
        corners = [xp.atan2(a, b) for a in (ylo, yhi) for b in (x.lo, x.hi)]
    lo, hi = corners[0], corners[0]
    for c in corners[1:]:
        lo, hi = xp.minimum(lo, c), xp.maximum(hi, c)
    lo, hi = _clean(_down(lo, xp, LIBRARY_ULPS), _up(hi, xp, LIBRARY_ULPS), xp)
    origin = (ylo <= 0.0) & (x.lo <= 0.0) & (x.hi >= 0.0)
    pi_hi = _pi_hi(y)
    lo = xp.where(origin, 0.0, xp.maximum(lo, 0.0))
    hi = xp.where(origin, pi_hi, xp.minimum(hi, pi_hi))
    return Interval._make(lo, hi)


def erf(x):
    r"""erf x (assumption (A2) for the namespace's erf: SciPy, CuPy, PyTorch; ``ntkref._lib.compat.erf``).

    Examples
    --------
    >>> import numpy as np, math
    >>> from ntkref import intervals
    >>> v = intervals.erf(intervals.Interval(np.array([0.5])))
    >>> bool(v.lo[0] < math.erf(0.5) < v.hi[0])
    True
    """
    from ._lib.compat import erf as _erf

    _check_interval(x, "x", "erf")
    xp = x.xp
    out = _monotone(x, lambda v: _erf(v, xp), True)
    return Interval._make(xp.maximum(out.lo, -1.0), xp.minimum(out.hi, 1.0))


def abs(x):  # noqa: A001 - the interval absolute value
    r"""|x| (exact).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import intervals
    >>> v = intervals.abs(intervals.Interval(np.array([-2.0]), np.array([1.0])))
    >>> float(v.lo[0]), float(v.hi[0])
    (0.0, 2.0)
    """
    _check_interval(x, "x", "abs")
    xp = x.xp
    lo = xp.where(x.lo >= 0.0, x.lo, xp.where(x.hi <= 0.0, -x.hi, 0.0))
    hi = xp.maximum(-x.lo, x.hi)
    return Interval._make(lo, hi)


def relu(x):
    r"""max(x, 0) (exact).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import intervals
    >>> v = intervals.relu(intervals.Interval(np.array([-2.0]), np.array([1.0])))
    >>> float(v.lo[0]), float(v.hi[0])
    (0.0, 1.0)
    """
    _check_interval(x, "x", "relu")
    xp = x.xp
    return Interval._make(xp.maximum(x.lo, 0.0), xp.maximum(x.hi, 0.0))


def maximum(a, b):
    r"""Elementwise max(a, b) (exact; operands as for the arithmetic operators).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import intervals
    >>> v = intervals.maximum(intervals.Interval(np.array([0.0]), np.array([3.0])), 1.0)
    >>> float(v.lo[0]), float(v.hi[0])
    (1.0, 3.0)
    """
    a, b = _operands(a, b, ("a", "b"), "maximum")
    xp = a.xp
    return Interval._make(xp.maximum(a.lo, b.lo), xp.maximum(a.hi, b.hi))


def minimum(a, b):
    r"""Elementwise min(a, b) (exact).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import intervals
    >>> v = intervals.minimum(intervals.Interval(np.array([0.0]), np.array([3.0])), 1.0)
    >>> float(v.lo[0]), float(v.hi[0])
    (0.0, 1.0)
    """
    a, b = _operands(a, b, ("a", "b"), "minimum")
    xp = a.xp
    return Interval._make(xp.minimum(a.lo, b.lo), xp.minimum(a.hi, b.hi))


def where(condition, a, b):
    r"""Elementwise a where ``condition`` else b.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import intervals
    >>> v = intervals.where(np.array([True, False]), intervals.Interval(np.array([1.0, 1.0])), 2.0)
    >>> v.lo.tolist()
    [1.0, 2.0]
    """
    a, b = _operands(a, b, ("a", "b"), "where")
    xp = a.xp
    condition = _mask(condition, a)
    return Interval._make(xp.where(condition, a.lo, b.lo), xp.where(condition, a.hi, b.hi))


def _mask(condition, like):
    """``condition`` of :func:`where` as a boolean array of ``like``'s namespace and device, broadcasting."""
    xp, dev = like.xp, device_of(like.lo)
    if is_array(condition):
        if namespace(condition) is not xp or device_of(condition) != dev:
            raise InvalidParameterError(
                f"The 'condition' parameter of where must be an array of the intervals' array library and device "
                f"({getattr(xp, '__name__', xp)}, {dev!r}): inputs from different array libraries or devices are "
                f"not converted implicitly. Got a {type(condition).__module__}.{type(condition).__name__} instead.")
    elif isinstance(condition, (bool, list, tuple)):
        try:
            condition = xp.asarray(condition, device=dev)
        except Exception as exc:  # noqa: BLE001 - named below
            raise InvalidParameterError(f"The 'condition' parameter of where must be a boolean array: {exc}") from exc
    if not is_array(condition) or not xp.isdtype(condition.dtype, "bool"):
        got = f"dtype {condition.dtype}" if is_array(condition) else f"a {type(condition).__name__}"
        raise InvalidParameterError(f"The 'condition' parameter of where must be a boolean array. Got {got} instead.")
    _check_broadcast(condition.shape, like.shape, "condition", "where")
    return condition


# ---------------------------------------------------------------------------
# sums and matrix products: the a-priori bound (module docstring)
# ---------------------------------------------------------------------------
def _sum_side(v, axis, c, xp, upper):
    s = xp.sum(v, axis=axis)
    t = xp.sum(xp.abs(v), axis=axis)
    err = _up(t * c, xp)
    # a non-finite fl(Σ) (an overflow partway, or an infinite end point) bounds nothing: the unbounded side
    if upper:
        return xp.where(xp.isfinite(s), _up(s + err, xp), _full(s, _INF, xp))
    return xp.where(xp.isfinite(s), _down(s - err, xp), _full(s, -_INF, xp))


def sum(x, axis=None):  # noqa: A001 - the interval sum
    r"""Σ x along ``axis`` (None: all elements), enclosed by fl(Σ) ∓ c·fl(Σ|·|), c ≥ γ_{n−1}/(1 − γ_{n−1}).

    Examples
    --------
    >>> import numpy as np
    >>> from fractions import Fraction
    >>> from ntkref import intervals
    >>> v = np.array([1e16, 1.0, -1e16, 1.0])
    >>> s = intervals.sum(intervals.Interval(v))
    >>> bool(Fraction(float(s.lo)) <= 2 <= Fraction(float(s.hi)))   # fl(Σ) is 0 or 1 here; 2 is enclosed
    True
    """
    _check_interval(x, "x", "sum")
    xp = x.xp
    if axis is not None:
        axis = check_int(axis, "axis", caller="sum", low=-len(x.shape), high=len(x.shape) - 1)
    n = math.prod(x.shape) if axis is None else x.shape[axis]
    c = _gamma_ratio(n - 1, x.dtype, xp)
    lo = _sum_side(x.lo, axis, c, xp, False)
    hi = _sum_side(x.hi, axis, c, xp, True)
    lo, hi = _clean(lo, hi, xp)
    return Interval._make(lo, hi)


def _mid_rad(x):
    """(m, r): floats with [m − r, m + r] ⊇ [lo, hi] in real arithmetic (r None for a point)."""
    if x._point:
        return x.lo, None
    xp = x.xp
    m = x.lo / 2.0 + x.hi / 2.0
    m = xp.where(xp.isfinite(m), m, 0.0)
    r = xp.maximum(_up(m - x.lo, xp), _up(x.hi - m, xp))
    r = xp.where(xp.isnan(r), _INF, r)
    return m, r


def _nonneg_product_up(a, b, n, xp, dtype):
    """An upper bound of the exact a @ b for non-negative a, b: (fl(a@b) + n·η)/(1 − γₙ), rounded up."""
    eta = float(xp.finfo(dtype).smallest_normal) * float(xp.finfo(dtype).eps)  # smallest subnormal
    inv = _up_const(1 / (1 - Fraction(_gamma(n, dtype, xp))), dtype, xp)
    s = _up(a @ b + _up_const(Fraction(n) * Fraction(eta), dtype, xp), xp)
    return _up(s * inv, xp)


def matmul(a, b):
    r"""The matrix product a @ b of intervals (or arrays, as points), enclosed in midpoint–radius form.

    ⟨fl(Aₘ@Bₘ), ρ⟩ with ρ ≥ γₙ|Aₘ|@|Bₘ| + n·η + |Aₘ|@B_r + A_r@(|Bₘ| + B_r) (module docstring; n the inner
    dimension); 2-D operands (or 1-D on either side, as in ``@``).

    Examples
    --------
    >>> import numpy as np
    >>> from fractions import Fraction
    >>> from ntkref import intervals
    >>> A, B = np.array([[0.1, 0.2, 0.3]]), np.array([[0.3], [0.2], [0.1]])
    >>> C = intervals.matmul(intervals.Interval(A), B)
    >>> exact = Fraction(0.1) * Fraction(0.3) + Fraction(0.2) * Fraction(0.2) + Fraction(0.3) * Fraction(0.1)
    >>> bool(Fraction(C.lo[0, 0]) <= exact <= Fraction(C.hi[0, 0]))
    True
    """
    a, b = _operands(a, b, ("a", "b"), "matmul", shape=False)
    xp, dtype = a.xp, a.dtype
    for name, v in (("a", a), ("b", b)):
        if len(v.shape) not in (1, 2):
            raise InvalidParameterError(f"The {name!r} parameter of matmul must have 1 or 2 dimensions. Got shape "
                                        f"{v.shape} instead.")
    if a.shape[-1] != b.shape[0]:
        raise InvalidParameterError(f"The 'a' and 'b' parameters of matmul must have matching inner dimensions. Got "
                                    f"shapes {a.shape} and {b.shape} instead.")
    n = a.shape[-1]
    am, ar = _mid_rad(a)
    bm, br = _mid_rad(b)
    mid = am @ bm
    g = _gamma(n, dtype, xp)
    abs_am, abs_bm = xp.abs(am), xp.abs(bm)
    # ρ = γ|Aₘ||Bₘ| + nη + |Aₘ|B_r + A_r(|Bₘ| + B_r), arranged into at most two non-negative products
    if ar is None:
        left = abs_am
        right = _up(g * abs_bm, xp) if br is None else _up(_up(g * abs_bm, xp) + br, xp)
        rad = _nonneg_product_up(left, right, n, xp, dtype)
    else:
        left = _up(_up(g * abs_am, xp) + ar, xp)
        right = abs_bm if br is None else _up(abs_bm + br, xp)
        rad = _nonneg_product_up(left, right, n, xp, dtype)
        if br is not None:
            rad = _up(rad + _nonneg_product_up(abs_am, br, n, xp, dtype), xp)
    eta = float(xp.finfo(dtype).smallest_normal) * float(xp.finfo(dtype).eps)
    rad = _up(rad + _up_const(Fraction(n) * Fraction(eta), dtype, xp), xp)  # the underflow of fl(Aₘ@Bₘ)
    rad = xp.where(xp.isnan(rad), _INF, rad)
    lo, hi = _clean(_down(mid - rad, xp), _up(mid + rad, xp), xp)
    # a non-finite fl(Aₘ@Bₘ) means an overflow partway (inf stays inf or NaN under + and ×): the bound above
    # assumes none, so that entry is [−inf, inf]; a finite one had no overflow in any of its operations
    fin = xp.isfinite(mid)
    lo = xp.where(fin, lo, _full(lo, -_INF, xp))
    hi = xp.where(fin, hi, _full(hi, _INF, xp))
    return Interval._make(lo, hi)
