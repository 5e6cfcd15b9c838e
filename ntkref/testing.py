r"""Oracle tooling: hypothesis strategies for hard inputs and ``check_*`` helpers.

Users compare their own NTK / kernel-machine / dynamics / certificate code with
ntkref.  This module makes that a one-line test in *their* pytest
suite::

    # test_my_ntk.py (your project)
    import numpy as np
    from ntkref.testing import check_kernel

    def my_ntk(x1, x2=None):          # any callable: NumPy arrays in, array-like out
        ...

    def test_my_ntk_matches_ntkref():
        # depth = number of hidden layers, neural-tangents' convention (docs/conventions.md, 'FC kernels')
        check_kernel(my_ntk, depth=2, activation="relu", W_std=1.0, b_std=0.0,
                     which="ntk", diag_tol=1e-12, offdiag_tol=1e-12)

On disagreement :func:`check_kernel` raises :class:`OracleMismatch` (an
``AssertionError``) whose message shows the minimal failing example found
(hypothesis shrinking, then reduction to the rows involved), both values, the
location ``(i, j)`` and the measured error; the report object is attached as
``exc.report``.  Call the ``check_*`` helpers from a plain test function (not
from inside another ``@given`` test: hypothesis does not nest).

Error measure for kernels
-------------------------
For an entry (i, j) with reference value R = K_ref(xᵢ, x′ⱼ),

.. math::  e_{ij} = \frac{|K_{ij} - R_{ij}|}{\sqrt{K_{\rm ref}(x_i, x_i)\,K_{\rm ref}(x'_j, x'_j)}} ,

the error relative to the Cauchy–Schwarz bound |R| ≤ √(K(x,x)K(x′,x′)) (for a
PSD kernel), which is the scale a kernel entry can be known to.  It is scale
free (rows of norm 1e-150 and 1e150 alike) and meaningful where R itself is 0
(orthogonal rows, Θ(x, 0) = 0).  Entries fail where
|K − R| > tol·√(…) + ``atol`` with tol = ``diag_tol`` on the diagonal of a
symmetric call (x2 = None, i = j) and ``offdiag_tol`` elsewhere; a non-finite
candidate value always fails.  ntkref's own accuracy in this measure is
1e-13 (ReLU and erf, every entry, float64, input norms from 1e-300 to ~1e150; see
:mod:`ntkref.kernels`), so tolerances down to ~1e-12 are meaningful in float64;
float32 candidates need ~1e-5 (their inputs are cast to float32 first and the
reference is computed, in float64, on the cast values).

Known results (``validation/nt_oracle_check.py``): neural-tangents 0.6.5 in
float64 fails ``diag_tol=1e-11`` with a ~1e-8 error on the NTK diagonal (its
angle arctan2(√(q₁q₂ − k²), k) loses half the digits at θ = 0), while its
off-diagonal entries on generic inputs pass at ``offdiag_tol=1e-11``.

Strategies
----------
:func:`rows`, :func:`kernel_inputs`, :func:`generic_kernel_inputs`, :func:`ill_conditioned_kernels`,
:func:`labels`, :func:`machine_problems`, :func:`learning_rates`,
:func:`widths` — hypothesis strategies returning NumPy arrays (convert them to
your namespace yourself), bounded in size, reproducible under hypothesis'
seeding.  :func:`hard_inputs` is a fixed (non-hypothesis) battery.

This module needs ``hypothesis`` (``pip install ntkref[test]``); the rest of
ntkref does not.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np  # host-side test tooling: inputs and reports are NumPy arrays by design

try:
    import hypothesis
    from hypothesis import HealthCheck, Phase, Verbosity
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - exercised only without the test extra
    raise ImportError(
        "ntkref.testing needs the 'hypothesis' package: pip install hypothesis (or ntkref[test])."
    ) from exc

from . import _backend
from ._backend import BackendError, backend_name, default_namespace, to_numpy
from ._validation import InvalidParameterError, check_int, check_option, check_real
from .cli import kernel_error  # the normalised error measure, shared with `ntkref compare`

__all__ = [
    "ROW_KINDS",
    "OracleMismatch",
    "CheckReport",
    "Mismatch",
    "rows",
    "kernel_inputs",
    "generic_kernel_inputs",
    "ill_conditioned_kernels",
    "labels",
    "machine_problems",
    "learning_rates",
    "widths",
    "hard_inputs",
    "kernel_error",
    "check_kernel",
    "check_fit",
    "check_dynamics",
    "check_certificate",
]

ROW_KINDS = ("gaussian", "near_parallel", "antiparallel", "duplicate", "scaled_duplicate", "zero")
"""Kinds of rows :func:`rows` mixes (``gaussian`` first: hypothesis shrinks towards it)."""


# =============================================================================================
# reports
# =============================================================================================
@dataclass
class Mismatch:
    """One disagreement between a candidate and ntkref (the minimal example found).

    Attributes
    ----------
    inputs : dict
        The arrays the candidate was called with (e.g. ``{"x1": ..., "x2": None}``).
    location : tuple
        Index of the worst entry (``(i, j)`` for kernels, ``(t, i)`` for trajectories, …).
    candidate_value, reference_value : float
        The two values there (NaN if the candidate raised or returned a wrong shape).
    error : float
        The measured error there (see the checker's docstring for the measure).
    tolerance : float
        The tolerance it exceeded.
    entry : str
        What kind of entry (``"diagonal"``, ``"off-diagonal"``, ``"objective"``, …).
    detail : str
        Anything else worth saying (an exception the candidate raised, a shape mismatch).
    """

    inputs: dict
    location: tuple
    candidate_value: float
    reference_value: float
    error: float
    tolerance: float
    entry: str
    detail: str = ""

    def __str__(self):
        lines = [
            f"  location {self.location} ({self.entry}): candidate {self.candidate_value!r}, "
            f"reference {self.reference_value!r}",
            f"  measured error {self.error:.3e} > tolerance {self.tolerance:.3e}",
        ]
        if self.detail:
            lines.append(f"  {self.detail}")
        with np.printoptions(precision=17, floatmode="unique", linewidth=120, threshold=10_000):
            for name, value in self.inputs.items():
                text = f"np.{value!r}" if isinstance(value, np.ndarray) else repr(value)
                lines.append(f"  {name} = {text}")
        return "\n".join(lines)


@dataclass
class CheckReport:
    """Outcome of a ``check_*`` run.

    Attributes
    ----------
    passed : bool
    n_examples : int
        Inputs tried (hypothesis examples + battery cases).
    max_error : dict
        Largest error seen per entry kind over all inputs tried (e.g.
        ``{"diagonal": 1.1e-8, "off-diagonal": 3e-12}``).
    failure : Mismatch or None
        The minimal failing example.
    source : str
        ``"hypothesis"`` or ``"battery"`` (where the failure came from), ``""`` if passed.
    description : str
        What was checked (candidate, parameters, tolerances).
    """

    passed: bool
    n_examples: int
    max_error: dict = field(default_factory=dict)
    failure: Mismatch | None = None
    source: str = ""
    description: str = ""

    def __str__(self):
        errs = ", ".join(f"{k} {v:.3e}" for k, v in sorted(self.max_error.items()))
        head = f"{self.description}\n{'PASSED' if self.passed else 'FAILED'} after {self.n_examples} inputs"
        head += f"; largest errors seen: {errs or 'none'}"
        if self.failure is not None:
            head += f"\nminimal failing example (from the {self.source}):\n{self.failure}"
        return head


class OracleMismatch(AssertionError):
    """A candidate disagrees with ntkref beyond the stated tolerance (``.report`` has the details)."""

    def __init__(self, report):
        super().__init__(str(report))
        self.report = report


class _Found(Exception):
    """Internal: raised inside the hypothesis test to carry a Mismatch through shrinking."""

    def __init__(self, mismatch):
        super().__init__(str(mismatch))
        self.mismatch = mismatch


def _finish(report, raise_on_failure):
    if not report.passed and raise_on_failure:
        raise OracleMismatch(report)
    return report


def _run_search(strategy, test, *, max_examples, seed, shrink=True):
    """Run ``test`` over ``strategy`` (shrinking the first failure); return the Mismatch or None."""
    max_examples = check_int(max_examples, "max_examples", caller="ntkref.testing", low=0)
    if max_examples == 0:
        return None
    config = hypothesis.settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=False,
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target) + ((Phase.shrink,) if shrink else ()),
        suppress_health_check=list(HealthCheck),
    )
    wrapped = hypothesis.seed(seed)(config(hypothesis.given(strategy)(test)))
    try:
        wrapped()
    except _Found as found:
        return found.mismatch
    return None


# =============================================================================================
# strategies
# =============================================================================================
def _int_range(value, name, low):
    if isinstance(value, (tuple, list)):
        lo, hi = (check_int(v, name, caller="ntkref.testing", low=low) for v in value)
        if hi < lo:
            raise InvalidParameterError(f"The {name!r} range must have min <= max. Got {value!r} instead.")
        return lo, hi
    v = check_int(value, name, caller="ntkref.testing", low=low)
    return v, v


def _default_scale_range(dtype):
    return (1e-150, 1e150) if np.dtype(dtype) == np.float64 else (1e-15, 1e15)


def _unit(v):
    n = np.linalg.norm(v)
    return v / n if n > 0 else v


def _orthogonal_direction(base_unit, v):
    """A unit vector orthogonal to ``base_unit``, from ``v`` (a coordinate axis if v is degenerate)."""
    d = base_unit.shape[0]
    candidates = [v] + [np.eye(d)[k] for k in np.argsort(np.abs(base_unit))]
    for c in candidates:
        w = c - (c @ base_unit) * base_unit
        w = w - (w @ base_unit) * base_unit  # second Gram–Schmidt pass: orthogonal to rounding
        if np.linalg.norm(w) > 1e-6 * max(np.linalg.norm(c), 1e-300):
            return _unit(w)
    return None


def _draw_rows(draw, n, d, kinds, scale_range, min_angle, entry_bound):
    """Draw an (n, d) float64 array mixing the requested row kinds."""
    # entries are 0 or of magnitude ≥ 1e-3, so a nonzero row has a norm ≥ 1e-4 before its scale
    magnitude = st.floats(1e-3, entry_bound, allow_nan=False, allow_infinity=False)
    entries = st.one_of(st.just(0.0), magnitude, magnitude.map(lambda v: -v))
    log_lo, log_hi = math.log10(scale_range[0]), math.log10(scale_range[1])
    log_min_angle = math.log10(min_angle)
    out = []  # final rows
    unscaled = []  # the same rows before their 10^k scale: relatives are built from these
    for _ in range(n):
        kind = draw(st.sampled_from(kinds))
        k = draw(st.integers(0, len(out) - 1)) if out and kind not in ("gaussian", "zero") else None
        if k is None and kind != "zero":
            kind = "gaussian"
        if kind == "zero":
            out.append(np.zeros(d))
            unscaled.append(np.zeros(d))
            continue
        if kind == "duplicate":
            out.append(out[k].copy())
            unscaled.append(unscaled[k].copy())
            continue
        if kind == "gaussian":
            row = np.array([draw(entries) for _ in range(d)], dtype=np.float64)
        elif kind == "scaled_duplicate":
            row = unscaled[k] * draw(st.sampled_from((2.0, 0.5, 3.0, 0.1, 10.0)))
        else:
            base = unscaled[k]
            norm = np.linalg.norm(base)
            v = np.array([draw(entries) for _ in range(d)], dtype=np.float64)
            direction = _orthogonal_direction(_unit(base), v) if norm > 0 and d > 1 else None
            # angle 10^e, e uniform in [log10(min_angle), -1]: down to min_angle (default 1e-9)
            angle = 10.0 ** draw(st.floats(log_min_angle, -1.0, allow_nan=False))
            if kind == "antiparallel":
                angle = math.pi - angle
            if direction is None:  # d = 1 or a zero base: exactly (anti)parallel instead
                row = base.copy() if kind == "near_parallel" else -base
            else:
                row = norm * (math.cos(angle) * _unit(base) + math.sin(angle) * direction)
        unscaled.append(row)
        norm = float(np.linalg.norm(row))
        if norm == 0:
            out.append(row)
            continue
        # a power of ten that puts the row's norm inside scale_range (0, i.e. no scaling, if allowed)
        e_lo = math.ceil(log_lo - math.log10(norm))
        e_hi = math.floor(log_hi - math.log10(norm))
        exponent = draw(st.integers(e_lo, e_hi)) if e_lo <= e_hi else e_lo
        out.append(row * 10.0**exponent if exponent else row)
    x = np.array(out, dtype=np.float64).reshape(n, d)
    return x


def _check_kinds(kinds):
    kinds = tuple(kinds)
    if not kinds or any(k not in ROW_KINDS for k in kinds):
        raise InvalidParameterError(f"The 'kinds' parameter must be a non-empty subset of {ROW_KINDS}. Got {kinds!r}.")
    return tuple(k for k in ROW_KINDS if k in kinds)  # gaussian first: shrinks towards it


def _check_strategy_args(kinds, scale_range, min_angle, entry_bound, dtype):
    kinds = _check_kinds(kinds)
    dtype = check_option(str(np.dtype(dtype)), "dtype", ("float64", "float32"), caller="ntkref.testing")
    if scale_range is None:
        scale_range = _default_scale_range(dtype)
    lo = check_real(scale_range[0], "scale_range", caller="ntkref.testing", low=0.0, closed="neither")
    hi = check_real(scale_range[1], "scale_range", caller="ntkref.testing", low=lo)
    min_angle = check_real(min_angle, "min_angle", caller="ntkref.testing", low=0.0, high=0.1, closed="right")
    entry_bound = check_real(entry_bound, "entry_bound", caller="ntkref.testing", low=0.0, closed="neither")
    return kinds, (lo, hi), min_angle, entry_bound, dtype


def rows(
    n=(1, 6),
    d=(1, 6),
    *,
    kinds=ROW_KINDS,
    scale_range=None,
    min_angle=1e-9,
    entry_bound=4.0,
    dtype="float64",
):
    """Strategy for (n, d) arrays whose rows break naive kernel implementations.

    Each row is one of ``kinds``: ``"gaussian"`` (entries in [−entry_bound,
    entry_bound]), ``"near_parallel"`` / ``"antiparallel"`` (an earlier row
    rotated by an angle 10^e, e uniform in [log₁₀ min_angle, −1], resp. π minus
    that; angles down to ``min_angle`` = 1e-9 by default), ``"duplicate"`` (an
    exact copy), ``"scaled_duplicate"`` (a positive multiple: angle 0 up to
    rounding, another norm) and ``"zero"``.  Entries are 0 or of magnitude in
    [1e-3, entry_bound]; every non-duplicate row is then multiplied by a power of
    ten 10^k, k uniform among those that put its norm inside ``scale_range``
    (default 1e-150 … 1e150 in float64, so that K(x, x) ~ ‖x‖²/d stays a normal
    number; 1e-15 … 1e15 in float32).  Hypothesis shrinks towards few Gaussian
    rows of scale 1 with small entries.

    Parameters
    ----------
    n, d : int or (min, max)
        Number of rows (≥ 1) and features (≥ 1).
    kinds : sequence of str
        A subset of :data:`ROW_KINDS`.
    scale_range : (float, float), optional
    min_angle : float in (0, 0.1]
    entry_bound : float > 0
    dtype : {"float64", "float32"}
        The returned array's dtype (generated in float64, then cast).

    Returns
    -------
    hypothesis strategy of numpy.ndarray, shape (n, d)
    """
    n_lo, n_hi = _int_range(n, "n", 1)
    d_lo, d_hi = _int_range(d, "d", 1)
    kinds, scale_range, min_angle, entry_bound, dtype = _check_strategy_args(
        kinds, scale_range, min_angle, entry_bound, dtype
    )

    @st.composite
    def strategy(draw):
        nn = draw(st.integers(n_lo, n_hi))
        dd = draw(st.integers(d_lo, d_hi))
        return _draw_rows(draw, nn, dd, kinds, scale_range, min_angle, entry_bound).astype(dtype)

    return strategy()


def kernel_inputs(
    n1=(1, 5),
    n2=(1, 5),
    d=(1, 5),
    *,
    symmetric=None,
    kinds=ROW_KINDS,
    scale_range=None,
    min_angle=1e-9,
    entry_bound=4.0,
    dtype="float64",
):
    """Strategy for ``(x1, x2)`` kernel arguments (``x2`` may be ``None``, meaning x1).

    The rows of x1 and x2 are drawn together (see :func:`rows`), so rows of x2
    can be near-parallel, antiparallel or equal to rows of x1.

    Parameters
    ----------
    n1, n2, d : int or (min, max)
    symmetric : bool or None
        ``True``: always ``x2=None``; ``False``: always an explicit x2; ``None``: both.
    kinds, scale_range, min_angle, entry_bound, dtype
        As in :func:`rows`.

    Returns
    -------
    hypothesis strategy of (numpy.ndarray, numpy.ndarray or None)
    """
    n1_lo, n1_hi = _int_range(n1, "n1", 1)
    n2_lo, n2_hi = _int_range(n2, "n2", 1)
    d_lo, d_hi = _int_range(d, "d", 1)
    kinds, scale_range, min_angle, entry_bound, dtype = _check_strategy_args(
        kinds, scale_range, min_angle, entry_bound, dtype
    )

    @st.composite
    def strategy(draw):
        sym = draw(st.booleans()) if symmetric is None else bool(symmetric)
        a = draw(st.integers(n1_lo, n1_hi))
        b = 0 if sym else draw(st.integers(n2_lo, n2_hi))
        dd = draw(st.integers(d_lo, d_hi))
        x = _draw_rows(draw, a + b, dd, kinds, scale_range, min_angle, entry_bound).astype(dtype)
        if sym:
            return x, None
        # shuffle which rows go to x2 so that x2's rows can precede their x1 relatives
        perm = draw(st.permutations(range(a + b)))
        x = x[list(perm)]
        return x[:a], x[a:]

    return strategy()


def generic_kernel_inputs(n1=(1, 5), n2=(1, 5), d=(2, 6), *, symmetric=None, scale_range=(1e-2, 1e2),
                          dtype="float64"):
    """Strategy for ``(x1, x2)`` of *generic* rows: i.i.d. Gaussian entries from a drawn seed.

    Unlike :func:`kernel_inputs` (whose shrunk examples have small round entries, so rows may be
    exactly parallel), the rows here are in general position with probability 1: no two are
    (anti)parallel, none is zero.  Each row is scaled by 10^k, k uniform in ``scale_range``
    (log10).  Use it to measure an implementation's accuracy *away from* the hard cases (e.g.
    neural-tangents' off-diagonal entries).  Shrinking only lowers the sizes and the seed.

    Returns
    -------
    hypothesis strategy of (numpy.ndarray, numpy.ndarray or None)
    """
    n1_lo, n1_hi = _int_range(n1, "n1", 1)
    n2_lo, n2_hi = _int_range(n2, "n2", 1)
    d_lo, d_hi = _int_range(d, "d", 1)
    lo, hi = math.log10(scale_range[0]), math.log10(scale_range[1])
    dtype = check_option(str(np.dtype(dtype)), "dtype", ("float64", "float32"), caller="generic_kernel_inputs")

    @st.composite
    def strategy(draw):
        sym = draw(st.booleans()) if symmetric is None else bool(symmetric)
        a = draw(st.integers(n1_lo, n1_hi))
        b = 0 if sym else draw(st.integers(n2_lo, n2_hi))
        dd = draw(st.integers(d_lo, d_hi))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        x = rng.standard_normal((a + b, dd)) * 10.0 ** rng.uniform(lo, hi, size=(a + b, 1))
        x = x.astype(dtype)
        return (x, None) if sym else (x[:a], x[a:])

    return strategy()


def ill_conditioned_kernels(n=(2, 8), *, max_log10_condition=12.0, allow_singular=True, scale_range=(1e-3, 1e3)):
    """Strategy for symmetric PSD Gram matrices with condition numbers up to 10^max_log10_condition.

    K = Q diag(λ) Qᵀ (exactly symmetrised), Q orthogonal from the QR factorisation of a
    Gaussian matrix drawn from a hypothesis-chosen seed, λ_k = s·10^{−c·k/(n−1)} with c
    uniform in [0, max_log10_condition] and s in ``scale_range``; with ``allow_singular``
    some trailing eigenvalues may be exactly 0 (rank-deficient, like duplicated points).
    Rounding makes the smallest eigenvalues of the float64 matrix accurate only to
    ~n·eps·s, so "PSD" holds to that level.

    Returns
    -------
    hypothesis strategy of numpy.ndarray, shape (n, n)
    """
    n_lo, n_hi = _int_range(n, "n", 1)
    max_c = check_real(max_log10_condition, "max_log10_condition", caller="ill_conditioned_kernels", low=0.0)

    @st.composite
    def strategy(draw):
        nn = draw(st.integers(n_lo, n_hi))
        seed = draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        q, r = np.linalg.qr(rng.standard_normal((nn, nn)))
        q = q * np.sign(np.diag(r))
        c = draw(st.floats(0.0, max_c, allow_nan=False))
        s = 10.0 ** draw(st.floats(math.log10(scale_range[0]), math.log10(scale_range[1]), allow_nan=False))
        lam = s * 10.0 ** (-c * np.arange(nn) / max(nn - 1, 1))
        if allow_singular and nn > 1:
            zeros = draw(st.integers(0, nn - 1))
            if zeros:
                lam[nn - zeros:] = 0.0
        K = (q * lam) @ q.T
        return (K + K.T) / 2

    return strategy()


def labels(n, *, kind="binary", both_classes=True, bound=3.0):
    """Strategy for a label vector of length ``n``.

    ``kind="binary"``: entries ±1 (both present if ``both_classes`` and n ≥ 2);
    ``kind="regression"``: reals in [−bound, bound].

    Returns
    -------
    hypothesis strategy of numpy.ndarray, shape (n,), float64
    """
    n = check_int(n, "n", caller="labels", low=1)
    kind = check_option(kind, "kind", ("binary", "regression"), caller="labels")
    if kind == "regression":
        return st.lists(st.floats(-bound, bound, allow_nan=False), min_size=n, max_size=n).map(
            lambda v: np.asarray(v, dtype=np.float64)
        )

    def to_labels(bits):
        y = np.where(np.asarray(bits, dtype=bool), 1.0, -1.0)
        if both_classes and n >= 2 and np.all(y == y[0]):
            y[-1] = -y[0]
        return y

    return st.lists(st.booleans(), min_size=n, max_size=n).map(to_labels)


def machine_problems(n=(2, 8), d=(1, 4), *, kind="binary", ill_conditioned=False):
    """Strategy for ``(K, y)``: a Gram matrix and labels of the same size.

    By default K is the depth-1 ReLU NTK (``ntkref.kernels.fc``) of rows drawn by
    :func:`rows` with moderate scales (so duplicated rows give singular K); with
    ``ill_conditioned=True`` K comes from :func:`ill_conditioned_kernels`.
    Returned as NumPy float64 arrays.
    """
    n_lo, n_hi = _int_range(n, "n", 1)

    @st.composite
    def strategy(draw):
        if ill_conditioned:
            K = draw(ill_conditioned_kernels((n_lo, n_hi), max_log10_condition=8.0))
        else:
            x = draw(rows((n_lo, n_hi), d, kinds=("gaussian", "near_parallel", "duplicate"), scale_range=(0.1, 10.0),
                          min_angle=1e-3))
            from .kernels import fc

            # on the default namespace and device (NTKREF_BACKEND/NTKREF_DEVICE), copied back to the host
            K = to_numpy(fc(_backend.asarray(x), depth=1, get="ntk").ntk)
            K = np.array(K, dtype=np.float64)
        y = draw(labels(K.shape[0], kind=kind))
        return K, y

    return strategy()


def learning_rates(min_lr=1e-4, max_lr=1.0, *, lam=None):
    """Strategy for step sizes η, log-uniform in [min_lr, max_lr] (and η < 1/λ if ``lam`` is given)."""
    min_lr = check_real(min_lr, "min_lr", caller="learning_rates", low=0.0, closed="neither")
    max_lr = check_real(max_lr, "max_lr", caller="learning_rates", low=min_lr)
    if lam is not None:
        lam = check_real(lam, "lam", caller="learning_rates", low=0.0)
        if lam > 0:
            max_lr = min(max_lr, 0.999 / lam)
        if max_lr < min_lr:
            raise InvalidParameterError(f"No learning rate in [{min_lr}, 1/lam) for lam={lam}.")
    return st.floats(math.log10(min_lr), math.log10(max_lr), allow_nan=False).map(
        lambda e: min(max(10.0**e, min_lr), max_lr)
    )


def widths(min_width=1, max_width=10_000):
    """Strategy for network widths: powers of ten in range, or any integer in range."""
    lo = check_int(min_width, "min_width", caller="widths", low=1)
    hi = check_int(max_width, "max_width", caller="widths", low=lo)
    powers = [10**k for k in range(0, 10) if lo <= 10**k <= hi]
    base = st.integers(lo, hi)
    return st.one_of(base, st.sampled_from(powers)) if powers else base


def hard_inputs(d=4, *, seed=0, dtype="float64"):
    """A fixed battery of (name, x1, x2) kernel inputs that break naive implementations.

    Covers: a generic pair, rows at angles 1e-3 … 1e-12 (parallel and
    antiparallel), exactly parallel/antiparallel rows of different norms, a
    zero row, norms 1e-150 and 1e150 (1e-15/1e15 in float32), duplicates,
    orthogonal rows and d = 1.  Deterministic for a given ``seed``.
    """
    d = check_int(d, "d", caller="hard_inputs", low=2)
    rng = np.random.default_rng(seed)
    big = 1e150 if np.dtype(dtype) == np.float64 else 1e15
    b = _unit(rng.standard_normal(d))
    v = _orthogonal_direction(b, rng.standard_normal(d))
    cases = [("generic", rng.standard_normal((4, d)), None)]
    for k in (3, 6, 8, 9, 10, 12):
        t = 10.0**-k
        near = math.cos(t) * b + math.sin(t) * v
        anti = -(math.cos(t) * b + math.sin(t) * v)
        cases.append((f"angle 1e-{k}", np.stack([b, 3.0 * near, 0.5 * anti]), None))
    cases += [
        ("parallel, other norm", np.stack([b, 7.0 * b, -0.25 * b]), None),
        ("zero row", np.stack([b, np.zeros(d), v]), None),
        ("tiny and huge", np.stack([b / big, b * big, v * big, v / big]), None),
        ("duplicates", np.stack([b, b, v, b]), None),
        ("orthogonal", np.stack([b, v]), None),
        ("cross near-parallel", np.stack([b, v]), np.stack([math.cos(1e-9) * b + math.sin(1e-9) * v, -v])),
        ("d = 1", np.array([[1.0], [-2.0], [0.0], [3e-100]]), None),
    ]
    return [(name, x1.astype(dtype), None if x2 is None else x2.astype(dtype)) for name, x1, x2 in cases]


# =============================================================================================
# kernel checker
# =============================================================================================
def _namespace_named(backend):
    if backend is None:
        return default_namespace()
    import importlib

    from ._backend import _MODULES, ENV_VAR

    if backend not in _MODULES:
        raise BackendError(f"backend={backend!r} is not a known backend; choose one of {', '.join(_MODULES)} "
                           f"(or set {ENV_VAR}).")
    try:
        return importlib.import_module(_MODULES[backend])
    except ImportError as exc:
        raise BackendError(f"backend={backend!r} cannot be imported: {exc}") from exc


def _mover(backend):
    """Host (NumPy) → the namespace of the reference computation, explicitly.

    ``backend=None`` (or the one ``NTKREF_BACKEND`` names): the default namespace on the device ``NTKREF_DEVICE``
    names (:func:`ntkref._backend.asarray`); another backend: that library's default device.  The oracle's inputs and
    reports stay NumPy; only the reference computation runs there, and its results come back with ``to_numpy``.
    """
    xp = _namespace_named(backend)
    if backend is None or backend == backend_name():
        return lambda a: _backend.asarray(to_numpy(a))  # explicit host copy, then to the default device
    return lambda a: xp.asarray(to_numpy(a))


def _fc_reference(which, params, backend):
    from .kernels import fc, fc_diagonal

    def reference(x1, x2):
        put = _mover(backend)
        a1 = put(np.asarray(to_numpy(x1), dtype=np.float64))
        a2 = None if x2 is None else put(np.asarray(to_numpy(x2), dtype=np.float64))
        K = getattr(fc(a1, a2, get=which, **params), which)
        d1 = getattr(fc_diagonal(a1, **params), which)
        d2 = d1 if a2 is None else getattr(fc_diagonal(a2, **params), which)
        return (np.asarray(to_numpy(K), dtype=np.float64), np.asarray(to_numpy(d1), dtype=np.float64),
                np.asarray(to_numpy(d2), dtype=np.float64))

    return reference


def _custom_reference(fn):
    def reference(x1, x2):
        K = np.asarray(to_numpy(fn(x1, x2)), dtype=np.float64)
        d1 = np.diagonal(np.asarray(to_numpy(fn(x1, None)), dtype=np.float64)).copy()
        d2 = d1 if x2 is None else np.diagonal(np.asarray(to_numpy(fn(x2, None)), dtype=np.float64)).copy()
        return K, d1, d2

    return reference


def _compare_kernel(candidate, x1, x2, reference, diag_tol, offdiag_tol, atol, seen, pass_none):
    """Compare one input; return the Mismatch (worst violating entry) or None. ``seen`` collects max errors."""
    K_ref, d1, d2 = reference(x1, x2)
    inputs = {"x1": x1, "x2": x2}
    try:
        out = candidate(x1, x2 if (x2 is not None or pass_none) else x1)
        K = np.asarray(to_numpy(out), dtype=np.float64)
    except Exception as exc:  # the candidate's own failure is a disagreement too
        return Mismatch(inputs, (), math.nan, math.nan, math.inf, 0.0, "call",
                        f"candidate raised {type(exc).__name__}: {exc}")
    if K.shape != K_ref.shape:
        return Mismatch(inputs, (), math.nan, math.nan, math.inf, 0.0, "shape",
                        f"candidate returned shape {K.shape}, expected {K_ref.shape}")
    err, scale = kernel_error(K, K_ref, d1, d2)
    diag_mask = np.zeros(K.shape, dtype=bool)
    if x2 is None:
        np.fill_diagonal(diag_mask, True)
    tol = np.where(diag_mask, diag_tol, offdiag_tol)
    with np.errstate(all="ignore"):
        allowed = np.where(scale > 0, tol * scale, 0.0) + atol  # |K − R| ≤ tol·√(R(x,x)R(x',x')) + atol
        bad = ~np.isfinite(K) | (np.abs(K - K_ref) > allowed)
    for name, mask in (("diagonal", diag_mask), ("off-diagonal", ~diag_mask)):
        if mask.any():
            m = float(np.max(err[mask]))
            seen[name] = max(seen.get(name, 0.0), m)
    if not bad.any():
        return None
    ratio = np.where(bad, np.where(tol > 0, err / np.where(tol > 0, tol, 1.0), np.inf), -1.0)
    i, j = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    entry = "diagonal" if diag_mask[i, j] else "off-diagonal"
    return Mismatch(inputs, (int(i), int(j)), float(K[i, j]), float(K_ref[i, j]), float(err[i, j]),
                    float(tol[i, j]), entry, f"scale √(K(x,x)K(x',x')) = {scale[i, j]:.6e}")


def _reduce_kernel_example(candidate, mismatch, reference, diag_tol, offdiag_tol, atol, pass_none):
    """Try the sub-problem made of the rows involved only; keep it if it still fails."""
    if not mismatch.location:
        return mismatch
    i, j = mismatch.location
    x1, x2 = mismatch.inputs["x1"], mismatch.inputs["x2"]
    if x2 is None:
        sub = (x1[[i]], None) if i == j else (x1[[i, j]], None)
    else:
        sub = (x1[[i]], x2[[j]])
    if sub[0].shape[0] == x1.shape[0] and (x2 is None or x2.shape[0] == 1):
        return mismatch
    smaller = _compare_kernel(candidate, sub[0], sub[1], reference, diag_tol, offdiag_tol, atol, {}, pass_none)
    return smaller if smaller is not None and smaller.location else mismatch


def check_kernel(
    candidate,
    *,
    depth=1,
    activation="relu",
    W_std=1.0,
    b_std=0.0,
    which="ntk",
    diag_tol=1e-10,
    offdiag_tol=1e-10,
    atol=0.0,
    max_examples=200,
    battery=True,
    inputs=None,
    dtype="float64",
    reference=None,
    backend=None,
    pass_none=True,
    seed=0,
    shrink=True,
    raise_on_failure=True,
):
    r"""Search for inputs on which ``candidate(x1, x2)`` differs from ntkref's FC kernel.

    Compares ``candidate(x1, x2)`` (shape (n1, n2); ``x2=None`` means x1) with
    ``ntkref.kernels.fc(x1, x2, depth=depth, activation=activation,
    W_std=W_std, b_std=b_std).<which>`` (neural-tangents' convention, docs/conventions.md, 'FC kernels'),
    entry by entry, with the error

    .. math::  e_{ij} = |K_{ij} - R_{ij}| / \sqrt{R(x_i,x_i)\,R(x'_j,x'_j)}

    (module docstring), failing where e > ``diag_tol`` on the diagonal of a
    symmetric call, e > ``offdiag_tol`` elsewhere (plus ``atol`` in absolute
    terms), or the candidate's value is not finite, raises, or has the wrong shape.

    The search runs hypothesis over ``inputs`` (default :func:`kernel_inputs`
    with every row kind: angles down to 1e-9, zero rows, norms 1e-150 … 1e150,
    duplicates) and shrinks the first failure; if nothing is found and
    ``battery`` is set, the fixed cases of :func:`hard_inputs` are tried.  A
    failure is then reduced to the one or two rows involved when that still
    fails.

    Parameters
    ----------
    candidate : callable (x1, x2) -> array-like
        Gets NumPy arrays of ``dtype``; may return any array convertible by
        :func:`ntkref.to_numpy`.
    depth, activation, W_std, b_std : as in :func:`ntkref.kernels.fc`
    which : {"ntk", "nngp"}
    diag_tol, offdiag_tol : float ≥ 0
        Tolerances on e (defaults 1e-10; ntkref itself is good to 1e-13).
    atol : float ≥ 0
        Extra absolute slack (needed only where the reference scale is 0).
    max_examples : int
        Hypothesis examples (0: battery only).
    battery : bool
    inputs : hypothesis strategy of (x1, x2), optional
    dtype : {"float64", "float32"}
        Inputs are cast to this before the candidate and the reference see them.
    reference : callable (x1, x2) -> array, optional
        Compare with this instead of ``fc`` (e.g. ``ntkref.kernels.arora_ntk``);
        its diagonal (from ``reference(x, None)``) sets the scale.
    backend : str, optional
        Namespace the reference is computed in (default ``NTKREF_BACKEND``).
    pass_none : bool
        Call ``candidate(x1, None)`` for symmetric inputs (else ``candidate(x1, x1)``).
    seed : int
        Hypothesis seed (the search is reproducible).
    shrink : bool
        Shrink the first failing input to a minimal one (default; each shrink step calls the
        candidate again).
    raise_on_failure : bool
        Raise :class:`OracleMismatch` (default) or return the report.

    Returns
    -------
    CheckReport
        ``max_error`` holds the largest diagonal and off-diagonal errors seen.

    Raises
    ------
    OracleMismatch
        On disagreement, with the minimal example in the message and ``.report``.
    """
    which = check_option(which, "which", ("ntk", "nngp"), caller="check_kernel")
    diag_tol = check_real(diag_tol, "diag_tol", caller="check_kernel", low=0.0, allow_inf=True)
    offdiag_tol = check_real(offdiag_tol, "offdiag_tol", caller="check_kernel", low=0.0, allow_inf=True)
    atol = check_real(atol, "atol", caller="check_kernel", low=0.0)
    dtype = check_option(str(np.dtype(dtype)), "dtype", ("float64", "float32"), caller="check_kernel")
    if not callable(candidate):
        raise InvalidParameterError(f"The 'candidate' parameter of check_kernel must be callable. Got {candidate!r}.")
    params = dict(depth=depth, activation=activation, W_std=W_std, b_std=b_std)
    ref = _custom_reference(reference) if reference is not None else _fc_reference(which, params, backend)
    ref(np.ones((1, 2)), None)  # validate the parameters once, with ntkref's own error messages
    if inputs is None:
        inputs = kernel_inputs(dtype=dtype)
    name = getattr(candidate, "__qualname__", repr(candidate))
    desc = (f"check_kernel({name}, which={which!r}, "
            + (f"reference={getattr(reference, '__qualname__', reference)!r}" if reference is not None else
               f"depth={depth}, activation={activation!r}, W_std={W_std!r}, b_std={b_std!r}")
            + f", diag_tol={diag_tol:g}, offdiag_tol={offdiag_tol:g}, atol={atol:g}, dtype={dtype})")
    seen = {}
    count = [0]

    def cast(x):
        return None if x is None else np.asarray(x).astype(dtype)

    def test(pair):
        x1, x2 = cast(pair[0]), cast(pair[1])
        count[0] += 1
        mismatch = _compare_kernel(candidate, x1, x2, ref, diag_tol, offdiag_tol, atol, seen, pass_none)
        if mismatch is not None:
            hypothesis.target(min(mismatch.error, 1e300) if math.isfinite(mismatch.error) else 1e300)
            raise _Found(mismatch)

    found = _run_search(inputs, test, max_examples=max_examples, seed=seed, shrink=shrink)
    source = "hypothesis" if found is not None else ""
    if found is None and battery:
        d_battery = 4
        for case_name, x1, x2 in hard_inputs(d_battery, seed=seed, dtype=dtype):
            count[0] += 1
            found = _compare_kernel(candidate, x1, x2, ref, diag_tol, offdiag_tol, atol, seen, pass_none)
            if found is not None:
                found.detail = (found.detail + f"; battery case {case_name!r}").lstrip("; ")
                source = "battery"
                break
    if found is not None:
        found = _reduce_kernel_example(candidate, found, ref, diag_tol, offdiag_tol, atol, pass_none)
    report = CheckReport(found is None, count[0], seen, found, source, desc)
    return _finish(report, raise_on_failure)


# =============================================================================================
# kernel machines, dynamics, certificates (need ntkref.machines / dynamics / certify)
# =============================================================================================
def _import(module):
    import importlib

    try:
        return importlib.import_module(f"ntkref.{module}")
    except ImportError as exc:  # pragma: no cover - only while the module does not exist
        raise ImportError(f"this checker needs ntkref.{module}, which could not be imported: {exc}") from exc


def _scaled_gap(a, b, floor=1.0):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    scale = max(floor, float(np.max(np.abs(b))) if b.size else 0.0)
    with np.errstate(all="ignore"):
        err = np.abs(a - b) / scale
    return np.where(np.isfinite(err), err, np.inf)


def check_fit(
    candidate,
    *,
    loss="hinge",
    lam=0.1,
    reduction="sum",
    loss_options=None,
    objective_tol=1e-8,
    max_examples=50,
    problems=None,
    backend=None,
    seed=0,
    shrink=True,
    raise_on_failure=True,
):
    r"""Check a kernel-machine solver ``candidate(K, y, lam) -> alpha`` against ``ntkref.machines.fit``.

    The minimiser of seed 000 eq. (7), P(α) = (λ/2)αᵀKα + Σ l((Kα)ᵢ, yᵢ) (``"mean"``:
    the loss sum / n), is unique in β (λ-strong convexity) but α need not be
    (singular K), so the candidate is judged by its objective:

    .. math::  e = \frac{P(\alpha_{\rm cand}) - P(\alpha_{\rm ref})}{\max(1, |P(\alpha_{\rm ref})|)} \le \text{objective\_tol},

    which bounds the function error: ‖β_cand − β*‖² ≤ 2(P(α_cand) − P*)/λ
    (strong convexity), so |g_cand(x) − g*(x)| ≤ √K(x,x)·√(2 e max(1,|P*|)/λ).
    ``max_error`` also records max |Kα_cand − Kα_ref| / max(1, max|Kα_ref|).

    Parameters
    ----------
    candidate : callable (K, y, lam) -> alpha (shape (n,))
    loss, lam, reduction, loss_options : as in ``ntkref.machines.fit`` / ``ntkref.losses.get``
    objective_tol : float
    problems : hypothesis strategy of (K, y), optional
        Default :func:`machine_problems` (regression labels for the regression losses).
    backend : str, optional
        Namespace of the reference computation.
    max_examples, seed, shrink, raise_on_failure : as in :func:`check_kernel`.
    """
    machines = _import("machines")
    losses = _import("losses")
    loss_obj = losses.get(loss, **(loss_options or {}))
    objective_tol = check_real(objective_tol, "objective_tol", caller="check_fit", low=0.0)
    if problems is None:
        problems = machine_problems(kind="binary" if loss_obj.classification else "regression")
    seen = {}
    count = [0]

    def test(problem):
        K, y = (np.asarray(a, dtype=np.float64) for a in problem)
        count[0] += 1
        put = _mover(backend)
        Kx, yx = put(K), put(y)
        alpha_ref = machines.fit(Kx, yx, loss_obj, lam, reduction=reduction)
        p_ref = float(machines.objective(alpha_ref, Kx, yx, loss_obj, lam, reduction=reduction))
        inputs = {"K": K, "y": y, "lam": lam}
        try:
            alpha = np.asarray(to_numpy(candidate(K, y, lam)), dtype=np.float64)
        except Exception as exc:
            raise _Found(Mismatch(inputs, (), math.nan, p_ref, math.inf, objective_tol, "call",
                                  f"candidate raised {type(exc).__name__}: {exc}")) from None
        if alpha.shape != (K.shape[0],) or not np.all(np.isfinite(alpha)):
            raise _Found(Mismatch(inputs, (), math.nan, p_ref, math.inf, objective_tol, "shape",
                                  f"candidate returned shape {alpha.shape} or non-finite values: {alpha!r}"))
        p_c = float(machines.objective(put(alpha), Kx, yx, loss_obj, lam, reduction=reduction))
        err = (p_c - p_ref) / max(1.0, abs(p_ref))
        g_err = _scaled_gap(K @ alpha, K @ np.asarray(to_numpy(alpha_ref)))
        seen["objective"] = max(seen.get("objective", 0.0), err)
        seen["outputs"] = max(seen.get("outputs", 0.0), float(np.max(g_err)) if g_err.size else 0.0)
        if not err <= objective_tol:
            i = int(np.argmax(g_err))
            raise _Found(Mismatch(
                inputs | {"alpha_candidate": alpha, "alpha_reference": np.asarray(to_numpy(alpha_ref))},
                ("objective",), p_c, p_ref, err, objective_tol, "objective",
                f"largest output gap at training point {i}: g_cand = {float((K @ alpha)[i])!r}, "
                f"g_ref = {float((K @ np.asarray(to_numpy(alpha_ref)))[i])!r}"))

    found = _run_search(problems, test, max_examples=max_examples, seed=seed, shrink=shrink)
    desc = (f"check_fit({getattr(candidate, '__qualname__', candidate)}, loss={loss_obj.name!r}, lam={lam!r}, "
            f"reduction={reduction!r}, objective_tol={objective_tol:g})")
    return _finish(CheckReport(found is None, count[0], seen, found, "hypothesis" if found else "", desc),
                   raise_on_failure)


def check_dynamics(
    candidate,
    *,
    loss="squared",
    lam=0.1,
    kind="flow",
    times=(0.0, 0.5, 1.0, 2.0),
    lr=0.05,
    steps=20,
    reduction="sum",
    tol=1e-6,
    max_examples=30,
    problems=None,
    backend=None,
    seed=0,
    shrink=True,
    raise_on_failure=True,
):
    r"""Check training-dynamics code against ``ntkref.dynamics``.

    ``kind="flow"``: ``candidate(K, y, lam, times) -> g`` of shape (T, n), the
    outputs g_t(xᵢ) of the gradient flow dα/dt = −λα − c·l′(Kα) from α = 0
    (seed 000 eqs. (3), (8); c = 1 for ``"sum"``, 1/n for ``"mean"``), compared
    with ``ntkref.dynamics.gradient_flow(K, y, loss, lam, times).g_train``
    (exact for squared, hinge and ε-insensitive losses).

    ``kind="descent"``: ``candidate(K, y, lam, lr, steps) -> g`` of shape
    (steps + 1, n), the full-batch (sub)gradient descent
    α_{k+1} = (1 − ηλ)α_k − η c l′(Kα_k) (eq. (5)), compared with
    ``ntkref.dynamics.subgradient_descent(...).g_train``.  (With the hinge loss
    the discrete trajectory is discontinuous in the data at yᵢgᵢ = 1; such ties
    are measure-zero in the default strategy.)

    Error: max over (t, i) of |g_cand − g_ref| / max(1, max|g_ref|) ≤ ``tol``.

    Parameters
    ----------
    candidate : callable
        ``(K, y, lam, times) -> (T, n)`` for ``"flow"``, ``(K, y, lam, lr, steps) -> (steps + 1, n)``
        for ``"descent"`` (NumPy float64 inputs).
    loss, lam, reduction : as in ``ntkref.dynamics.gradient_flow``
    kind : {"flow", "descent"}
    times : sequence of float
        Flow output times (nondecreasing, ≥ 0).
    lr, steps : float, int
        Descent step size η (< 1/λ) and number of steps.
    tol : float
        Tolerance on the scaled error (the reference is exact to ~1e-13 for squared/hinge/ε-insensitive,
        ~10·rtol = 1e-8 for the adaptive integrator used with logistic/squared hinge).
    problems : hypothesis strategy of (K, y), optional
        Default :func:`machine_problems` with n ≤ 6.
    max_examples, backend, seed, shrink, raise_on_failure : as in :func:`check_kernel` / :func:`check_fit`.
    """
    dynamics = _import("dynamics")
    losses = _import("losses")
    kind = check_option(kind, "kind", ("flow", "descent"), caller="check_dynamics")
    loss_obj = losses.get(loss)
    tol = check_real(tol, "tol", caller="check_dynamics", low=0.0)
    times_np = np.asarray(times, dtype=np.float64)
    if problems is None:
        problems = machine_problems(n=(2, 6), kind="binary" if loss_obj.classification else "regression")
    seen = {}
    count = [0]

    def test(problem):
        K, y = (np.asarray(a, dtype=np.float64) for a in problem)
        count[0] += 1
        put = _mover(backend)
        Kx, yx = put(K), put(y)
        if kind == "flow":
            traj = dynamics.gradient_flow(Kx, yx, loss_obj, lam, put(times_np), reduction=reduction)
            call = lambda: candidate(K, y, lam, times_np.copy())  # noqa: E731
        else:
            traj = dynamics.subgradient_descent(Kx, yx, loss_obj, lam, lr, steps, reduction=reduction)
            call = lambda: candidate(K, y, lam, lr, steps)  # noqa: E731
        g_ref = np.asarray(to_numpy(traj.g_train), dtype=np.float64)
        inputs = {"K": K, "y": y, "lam": lam}
        try:
            g = np.asarray(to_numpy(call()), dtype=np.float64)
        except Exception as exc:
            raise _Found(Mismatch(inputs, (), math.nan, math.nan, math.inf, tol, "call",
                                  f"candidate raised {type(exc).__name__}: {exc}")) from None
        if g.shape != g_ref.shape:
            raise _Found(Mismatch(inputs, (), math.nan, math.nan, math.inf, tol, "shape",
                                  f"candidate returned shape {g.shape}, expected {g_ref.shape}"))
        err = _scaled_gap(g, g_ref)
        worst = float(np.max(err))
        seen["outputs"] = max(seen.get("outputs", 0.0), worst)
        if not worst <= tol:
            t, i = np.unravel_index(int(np.argmax(err)), err.shape)
            where = f"t = {times_np[t]!r}" if kind == "flow" else f"step {t}"
            raise _Found(Mismatch(inputs, (int(t), int(i)), float(g[t, i]), float(g_ref[t, i]), worst, tol,
                                  "trajectory", f"{where}, training point {i}"))

    found = _run_search(problems, test, max_examples=max_examples, seed=seed, shrink=shrink)
    desc = (f"check_dynamics({getattr(candidate, '__qualname__', candidate)}, kind={kind!r}, "
            f"loss={loss_obj.name!r}, lam={lam!r}, reduction={reduction!r}, tol={tol:g})")
    return _finish(CheckReport(found is None, count[0], seen, found, "hypothesis" if found else "", desc),
                   raise_on_failure)


def _ntk_outputs(alpha, x_train, points):
    """g(points) = Θ(points, x_train) α of the two-layer NTK machine, computed on the default namespace and device
    (NTKREF_BACKEND/NTKREF_DEVICE) from host inputs; returned on the host."""
    from .kernels import two_layer_relu_ntk

    put = _mover(None)
    g = two_layer_relu_ntk(put(np.asarray(to_numpy(points), dtype=np.float64)),
                           put(np.asarray(to_numpy(x_train), dtype=np.float64))) @ put(
        np.asarray(to_numpy(alpha), dtype=np.float64))
    return np.asarray(to_numpy(g), dtype=np.float64)


def _attack_points(x0, radius, x_train, alpha, rng, n_random):
    """Candidate adversarial points in the ℓ∞ ball: corners, projected training points, sign-gradient steps."""
    d = x0.shape[0]
    pts = [x0 + radius * rng.choice((-1.0, 1.0), size=(n_random, d)),
           x0 + radius * rng.uniform(-1.0, 1.0, size=(n_random, d)),
           np.clip(x_train, x0 - radius, x0 + radius)]
    # FGSM/PGD-like: signs of a central-difference gradient of g at x0 and at a few corners
    h = 1e-6 * max(1.0, float(np.max(np.abs(x0))))
    for start in [x0] + list(pts[0][: min(4, n_random)]):
        e = np.eye(d) * h
        grad = (_ntk_outputs(alpha, x_train, start + e) - _ntk_outputs(alpha, x_train, start - e)) / (2 * h)
        for s in (1.0, -1.0):
            pts.append((x0 + s * radius * np.sign(grad))[None, :])
    return np.concatenate(pts, axis=0)


def check_certificate(
    candidate,
    *,
    norm="linf",
    n_attack=64,
    compare_reference=True,
    max_examples=20,
    problems=None,
    seed=0,
    shrink=True,
    raise_on_failure=True,
):
    r"""Check certified radii ``candidate(alpha, x_train, x_test) -> radii`` for soundness.

    The machine is g(x) = Σᵢ αᵢ Θ(x, xᵢ) with Θ the two-layer ReLU NTK of seed
    000 eq. (63).  A radius rₖ claims sign g(x) = sign g(x₀ₖ) on the whole
    ℓ∞ ball ‖x − x₀ₖ‖∞ ≤ rₖ (Thm 4.2).  The checker attacks each claim with
    corners of the ball, training points projected onto it and sign-gradient
    points (``n_attack`` random ones per test point); any point whose g has the
    other sign (or is 0) is a counterexample: a *soundness* failure, reported
    with the point, g(x₀) and g(x).  Radii must be ≥ 0 and 0 where g(x₀) = 0.

    With ``compare_reference``, ``max_error["ratio_to_ntkref"]`` records the
    largest r_cand / r_ntkref (``ntkref.certify.certified_radius``, method
    ``"tight"``): > 1 is not an error (ntkref's bound is not the exact radius) but
    tells you your certificate claims more than ntkref can prove.

    Only ``norm="linf"`` attacks are implemented.

    Parameters
    ----------
    candidate : callable (alpha, x_train, x_test) -> radii, shape (n_test,)
    norm : {"linf"}
    n_attack : int
        Random corners and random interior points tried per test point (plus the projected
        training points and 10 sign-gradient points).
    compare_reference : bool
        Also run ``ntkref.certify.certified_radius`` and record the ratio.
    problems : hypothesis strategy of (alpha, x_train, x_test), optional
        Default: two Gaussian clusters in d ≤ 4, n_train ≤ 6, n_test ≤ 3.
    max_examples, seed, shrink, raise_on_failure : as in :func:`check_kernel`.

    Notes
    -----
    An attack can only refute a certificate, never prove it: passing means no counterexample
    was found, not that the radii are sound.
    """
    check_option(norm, "norm", ("linf",), caller="check_certificate")
    certify = _import("certify") if compare_reference else None
    rng_seed = seed
    seen = {}
    count = [0]
    if problems is None:
        problems = _certificate_problems()

    def test(problem):
        alpha, x_train, x_test = (np.asarray(a, dtype=np.float64) for a in problem)
        count[0] += 1
        inputs = {"alpha": alpha, "x_train": x_train, "x_test": x_test}
        try:
            radii = np.asarray(to_numpy(candidate(alpha, x_train, x_test)), dtype=np.float64)
        except Exception as exc:
            raise _Found(Mismatch(inputs, (), math.nan, math.nan, math.inf, 0.0, "call",
                                  f"candidate raised {type(exc).__name__}: {exc}")) from None
        if radii.shape != (x_test.shape[0],) or not np.all(np.isfinite(radii)) or np.any(radii < 0):
            raise _Found(Mismatch(inputs, (), math.nan, math.nan, math.inf, 0.0, "shape",
                                  f"radii must be finite, ≥ 0, of shape {(x_test.shape[0],)}; got {radii!r}"))
        g0 = _ntk_outputs(alpha, x_train, x_test)
        if compare_reference:
            put = _mover(None)
            r_ref = np.asarray(to_numpy(certify.certified_radius(put(alpha), put(x_train), put(x_test))),
                               dtype=np.float64)
            with np.errstate(all="ignore"):
                ratio = np.where(r_ref > 0, radii / np.where(r_ref > 0, r_ref, 1.0), np.where(radii > 0, np.inf, 1.0))
            seen["ratio_to_ntkref"] = max(seen.get("ratio_to_ntkref", 0.0), float(np.max(ratio)))
        rng = np.random.default_rng(rng_seed)
        for k in range(x_test.shape[0]):
            if radii[k] == 0:
                continue
            if g0[k] == 0:
                raise _Found(Mismatch(inputs, (k,), float(radii[k]), 0.0, math.inf, 0.0, "radius",
                                      f"test point {k} has g(x0) = 0 but a positive radius"))
            pts = _attack_points(x_test[k], radii[k], x_train, alpha, rng, n_attack)
            g = _ntk_outputs(alpha, x_train, pts)
            flipped = np.sign(g) != np.sign(g0[k])
            if flipped.any():
                m = int(np.argmax(flipped))
                raise _Found(Mismatch(inputs | {"counterexample": pts[m]}, (k,), float(radii[k]),
                                      float(np.max(np.abs(pts[m] - x_test[k]))), math.inf, 0.0, "soundness",
                                      f"g(x0) = {g0[k]!r} but g(counterexample) = {g[m]!r} at ℓ∞ distance "
                                      f"{np.max(np.abs(pts[m] - x_test[k]))!r} ≤ claimed radius {radii[k]!r} "
                                      "(candidate_value = claimed radius, reference_value = distance)"))

    found = _run_search(problems, test, max_examples=max_examples, seed=seed, shrink=shrink)
    desc = f"check_certificate({getattr(candidate, '__qualname__', candidate)}, norm={norm!r})"
    return _finish(CheckReport(found is None, count[0], seen, found, "hypothesis" if found else "", desc),
                   raise_on_failure)


def _certificate_problems():
    """(alpha, x_train, x_test): two Gaussian clusters in d ≤ 4, α from a hinge SVM-like rule."""

    @st.composite
    def strategy(draw):
        seed = draw(st.integers(0, 2**32 - 1))
        n = draw(st.integers(2, 6))
        d = draw(st.integers(1, 4))
        m = draw(st.integers(1, 3))
        rng = np.random.default_rng(seed)
        centre = rng.standard_normal(d)
        y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
        x_train = y[:, None] * centre + 0.5 * rng.standard_normal((n, d))
        x_test = x_train[rng.integers(0, n, size=m)] + 0.1 * rng.standard_normal((m, d))
        alpha = y * rng.uniform(0.1, 1.0, size=n)
        return alpha, x_train, x_test

    return strategy()
