r"""Ball arithmetic helpers of :mod:`ntkref.enclosures`: python-flint's ``arb``, exact inputs, the
:class:`Enclosure` result and its outward-rounded float64 view.

**Exact inputs.**  A float64 (or float32) value is a dyadic rational m·2^e, so ``flint.arb(float)`` is an
exact ball (radius 0) and a Python ``int`` likewise.  :func:`exact_rows` goes further: each row becomes a list
of integers M_i with one exponent e (x_i = M_i·2^e), so the Gram quantities ‖x‖², x·x′ and the Lagrange
identity's ‖x‖²‖x′‖² − (x·x′)² = Σ_{i<j}(x_i x′_j − x_j x′_i)² are *exact integers* (Python's big integers):
the angle between two rows is known without rounding, whatever their norms (1e-300 … 1e300, subnormals).

**Outward rounding to float64** (:func:`to_float_view`).  Theorem: for a ball B = [m ± r] (m, r ∈ ℚ dyadic, as
arb stores them) let m̃ = fl(m) be a float64 (any rounding) and

    r̃ = the smallest float64 ≥ u,   u = an exact upper bound of |m̃ − B| = max_{β∈B} |m̃ − β|

(u is ``abs_upper`` of the arb ball m̃ − B, an exact dyadic number ≥ |m̃ − m| + r; r̃ is ``float(u)``,
moved up one step by ``math.nextafter`` when the conversion rounded down, which is decided exactly by
comparing the two dyadic numbers).  Then every β ∈ B satisfies |β − m̃| ≤ u ≤ r̃, i.e. B ⊆ [m̃ − r̃, m̃ + r̃]
as real intervals.  Proof: β − m̃ ∈ B − m̃, whose absolute value arb bounds by u (arb's operations are
rigorous: the computed ball m̃ − B contains every β − m̃); and r̃ ≥ u by construction.  No assumption about
the floating-point unit is used: the comparisons are between exact dyadic numbers in arb.  Entries whose
m̃ or r̃ is not a finite float64 (a kernel beyond 1.8e308, e.g. norms 1e300) have no float view: ``mid`` and
``rad`` then raise, and :attr:`Enclosure.balls` holds the exact enclosures.

**The clamps.**  Where a quantity is known by a theorem to lie in a range (a cosine in [−1, 1] by
Cauchy–Schwarz, 1 − cos θ ≥ 0), its ball is intersected with that range (:func:`nonneg`, :func:`clamp_unit`):
the true value lies in both, hence in the intersection, so the enclosure stays rigorous and ``sqrt``/``acos``
stay defined.

**g(t) = sin t − t cos t** (:func:`g_series`, :func:`g_direct`), the cancellation at the heart of the ReLU
arc-cosine kernel (J(θ) = g(π − θ), π(1 − cos θ) − g(θ) = π(1 − J(θ)/π)): for |t| ≤ 1/2 the alternating
series g(t) = Σ_{k≥1} (−1)^{k+1}·2k·t^{2k+1}/(2k+1)! (term ratio t²/(2k(2k+3)) < 1) is summed to a relative
2^-(prec+8) and its tail is bounded by the first omitted term (Leibniz), added to the radius; above 1/2 the
direct form loses at most a few bits.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np  # the enclosures are a host step by design: results are NumPy (module docstring of the face)

from .._lib.backend import is_array, to_numpy
from .._lib.validation import InvalidParameterError, check_array, check_int

_INSTALL = 'pip install -e ".[rigorous]"'


def flint():
    """The ``flint`` module (python-flint), or an ImportError naming the extra that installs it."""
    try:
        import flint as _flint
    except ImportError as exc:  # pragma: no cover - exercised with flint hidden in the tests
        raise ImportError(
            "ntkref.enclosures needs python-flint (ball arithmetic, the 'arb' type), which is not installed; "
            f"install the 'rigorous' extra: {_INSTALL} (or pip install python-flint)."
        ) from exc
    return _flint


def check_prec(prec, caller):
    """Working precision in bits: an int ≥ 30 (below that the enclosures decide nothing)."""
    return check_int(prec, "prec", caller=caller, low=30, high=1 << 20)


def host_array(x, name, caller, ndim):
    """``x`` of any namespace copied to the host explicitly (``to_numpy``: the enclosures are a host step),
    checked (finite, ``ndim``) and converted to float64 — exact for float64/float32 input."""
    import array_api_compat.numpy as npx

    if is_array(x):
        x = to_numpy(x)  # an explicit host copy: ball arithmetic runs on the CPU in python-flint
    return np.asarray(check_array(x, name, caller=caller, ndim=ndim, xp=npx, dtype=npx.float64, device="cpu"))


# ---------------------------------------------------------------------------------------------
# exact rows
# ---------------------------------------------------------------------------------------------
def exact_rows(x):
    """Each row of a float64 array as (integers M, exponent e) with x_i = M_i·2^e exactly, and the exact
    squared norm ‖x‖² = N·2^{2e} as the pair (N, 2e)."""
    rows = []
    for row in x.tolist():
        parts = [v.as_integer_ratio() for v in row]  # v = p/q, q a power of two
        shifts = [q.bit_length() - 1 for _, q in parts]
        top = max(shifts) if shifts else 0
        ints = [p << (top - s) for (p, _), s in zip(parts, shifts)]
        rows.append((ints, -top, sum(m * m for m in ints)))
    return rows


def norm_key(n, e2):
    """A canonical key of the dyadic number n·2^{e2} (n ≥ 0): equal keys ⇔ equal numbers."""
    if n == 0:
        return (0, 0)
    tz = (n & -n).bit_length() - 1
    return (n >> tz, e2 + tz)


def dyadic(n, e):
    """The exact ball n·2^e (n a Python int)."""
    arb = flint().arb
    return arb(n) * arb(2) ** e if e else arb(n)


# ---------------------------------------------------------------------------------------------
# clamps and the function g
# ---------------------------------------------------------------------------------------------
def nonneg(b):
    """b ∩ [0, ∞) for a quantity known to be ≥ 0."""
    return b if b >= 0 else b.nonnegative_part()


def clamp_unit(b):
    """b ∩ [−1, 1] for a cosine (Cauchy–Schwarz)."""
    arb = flint().arb
    if b >= -1 and b <= 1:
        return b
    return b.intersection(arb(-1).union(arb(1)))


def g_series(t, prec):
    """g(t) = sin t − t cos t for a ball with |t| ≤ 1/2, by its alternating series with the tail in the radius."""
    arb = flint().arb
    if t.is_zero():
        return arb(0)
    t2 = t * t
    term = t2 * t / 3  # k = 1: 2·t³/3!
    total = term
    goal = term.abs_upper() * arb(2) ** (-(prec + 8))
    k = 1
    while True:
        k += 1
        # T_k = (−1)^{k+1}·2k·t^{2k+1}/(2k+1)!  ⇒  T_k/T_{k−1} = −t²·k/((k−1)·2k·(2k+1))
        term = -term * t2 * k / ((k - 1) * (2 * k) * (2 * k + 1))
        if term.abs_upper() <= goal or k > prec:
            # Leibniz: the remaining alternating, decreasing tail is at most |this term|
            return total + arb(0, term.abs_upper())
        total += term


def g_direct(sin_t, cos_t, t):
    """g(t) = sin t − t cos t from balls of sin t and cos t (for t ≥ 1/2: no large cancellation)."""
    return sin_t - t * cos_t


def g_of(t, sin_t, cos_t, prec):
    """g(t) by the series for t ≤ 1/2, directly above."""
    if t <= 0.5:
        return g_series(t, prec)
    return g_direct(sin_t, cos_t, t)


# ---------------------------------------------------------------------------------------------
# the result
# ---------------------------------------------------------------------------------------------
def to_float_view(ball):
    """(m̃, r̃) float64 with ball ⊆ [m̃ − r̃, m̃ + r̃] (module docstring, proof), or None if not finite."""
    arb = flint().arb
    m = float(ball.mid())
    if not math.isfinite(m):
        return None
    r = upward_float((arb(m) - ball).abs_upper())  # one step up where the conversion rounded down
    return (m, r) if math.isfinite(r) else None


def upward_float(u):
    """The smallest float64 ≥ the exact non-negative arb number ``u`` (inf beyond the range)."""
    arb = flint().arb
    r = float(u)
    if math.isfinite(r) and arb(r) < u:
        r = math.nextafter(r, math.inf)
    return r


def exact_point(v):
    """An exact arb for a float, int, ``fractions.Fraction`` with a power-of-two denominator, or mpmath mpf;
    None for a non-finite value.  (Called inside a context with enough precision.)"""
    fl = flint()
    arb = fl.arb
    if isinstance(v, (float, np.floating)):
        v = float(v)
        return arb(v) if math.isfinite(v) else None
    if isinstance(v, (int, np.integer)):
        return arb(int(v))
    if isinstance(v, arb):
        return v
    man_exp = getattr(v, "man_exp", None)  # mpmath.mpf: (man, exp) exactly
    if man_exp is not None and not callable(man_exp):
        man, exp = man_exp
        if int(man) == 0 and v != 0 or v != v:  # mpmath's inf and nan carry a zero mantissa
            return None
        return dyadic(-abs(int(man)) if v < 0 else abs(int(man)), int(exp))  # man_exp drops the sign
    raise InvalidParameterError(
        "The 'values' parameter of Enclosure.contains must hold floats, ints, mpmath mpf or flint arb values. "
        f"Got a {type(v).__name__} instead."
    )


@dataclass(frozen=True, eq=False)
class Enclosure:
    """Rigorous enclosures of an array of real numbers: each exact value lies in its ball.

    ``balls`` holds python-flint ``arb`` balls (a NumPy object array; the exact enclosures), ``prec`` the
    working precision in bits.  ``mid`` and ``rad`` are their float64 view, rounded outward: the exact value
    lies in the real interval [mid − rad, mid + rad] (proof in :mod:`ntkref.enclosures._ball`).  NumPy
    arrays on the host, by design (ball arithmetic runs on the CPU).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.enclosures import fc
    >>> e = fc(np.array([[1.0, 0.0], [0.0, 1.0]]), depth=0, get="ntk").ntk   # x·x′/d, exactly
    >>> e.mid.tolist(), e.rad.tolist()
    ([[0.5, 0.0], [0.0, 0.5]], [[0.0, 0.0], [0.0, 0.0]])
    >>> e.contains(np.array([[0.5, 0.0], [0.0, 0.5 + 2**-52]])).tolist()
    [[True, True], [True, False]]
    """

    balls: np.ndarray
    prec: int
    _view: tuple = field(default=None, repr=False)
    #: float64 upper bounds of the balls' own radii (how tight the enclosure is; ``rad`` adds the distance from
    #: the float64 midpoint to the ball's midpoint, up to half an ulp of ``mid``)
    ball_rad: np.ndarray = field(default=None, repr=False)

    def __post_init__(self):
        fl = flint()
        mids = np.empty(self.balls.shape, dtype=np.float64)
        rads = np.empty(self.balls.shape, dtype=np.float64)
        brads = np.empty(self.balls.shape, dtype=np.float64)
        ok = True
        with fl.ctx.workprec(max(self.prec, 64)):
            for idx, ball in np.ndenumerate(self.balls):
                view = to_float_view(ball)
                brads[idx] = upward_float(ball.rad())
                if view is None:
                    ok = False
                    mids[idx], rads[idx] = np.inf, np.inf
                else:
                    mids[idx], rads[idx] = view
        object.__setattr__(self, "_view", (mids, rads, ok))
        object.__setattr__(self, "ball_rad", brads)

    @property
    def shape(self):
        return self.balls.shape

    def _float_view(self, what):
        mids, rads, ok = self._view
        if not ok:
            raise OverflowError(
                f"Enclosure.{what}: some enclosed values lie beyond float64's range (±1.8e308), so they have no "
                "float64 midpoint and radius; use Enclosure.balls (python-flint arb balls) or Enclosure.contains."
            )
        return mids if what == "mid" else rads

    @property
    def mid(self):
        """float64 midpoints (NumPy), see the class docstring."""
        return self._float_view("mid")

    @property
    def rad(self):
        """float64 radii (NumPy), rounded up so that [mid − rad, mid + rad] contains each ball."""
        return self._float_view("rad")

    def contains(self, values):
        """Boolean NumPy array: each value (exactly, as a real number) lies in its ball.

        ``values``: an array of any namespace (copied to the host explicitly) or nested lists of floats,
        ints, mpmath ``mpf`` or flint ``arb`` values, of the enclosure's shape.  Non-finite values are not
        contained.  (A ball from an ``arb`` value is contained if it lies wholly inside.)
        """
        fl = flint()
        if is_array(values):
            values = to_numpy(values)
        vals = np.asarray(values, dtype=object)
        if vals.shape != self.balls.shape:
            raise InvalidParameterError(
                f"The 'values' parameter of Enclosure.contains must have the enclosure's shape {self.balls.shape}; "
                f"got {vals.shape}."
            )
        out = np.zeros(vals.shape, dtype=bool)
        for idx, v in np.ndenumerate(vals):
            bits = self.prec
            man_exp = getattr(v, "man_exp", None)
            if man_exp is not None and not callable(man_exp):
                bits = max(bits, int(man_exp[0]).bit_length() + 8)
            elif isinstance(v, (int, np.integer)):
                bits = max(bits, int(v).bit_length() + 8)
            with fl.ctx.workprec(bits):
                point = exact_point(v)
                out[idx] = point is not None and bool(self.balls[idx].contains(point))
        return out

    def __repr__(self):
        mids, rads, ok = self._view
        if not ok:
            return f"Enclosure(shape={self.balls.shape}, prec={self.prec}, beyond float64: see .balls)"
        with np.printoptions(precision=17, threshold=20):
            return (f"Enclosure(shape={self.balls.shape}, prec={self.prec},\n  mid={np.array2string(mids)},\n"
                    f"  rad={np.array2string(rads)})")
