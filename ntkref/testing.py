r"""Oracle tooling: hypothesis strategies for hard inputs and ``check_*`` helpers.

Users compare their own NTK / CNTK / kernel-machine / dynamics / certificate code with
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

(or, with the pytest plugin :mod:`ntkref.pytest_plugin`, ``def test_my_ntk(ntkref_oracle):
ntkref_oracle.check_kernel(my_ntk, depth=2)``).  Call the ``check_*`` helpers from a plain test function (not
from inside another ``@given`` test: hypothesis does not nest).

Two modes
---------
``mode="assert"`` (default): stop at the first failing input, shrink it (hypothesis), reduce it to the one
or two rows involved and raise :class:`OracleMismatch` (an ``AssertionError``) whose message shows that
minimal example, both values, the location ``(i, j)`` and the measured error; the report is ``exc.report``.
Its ``max_error`` covers the inputs tried until then.

``mode="measure"``: run the whole example budget (every hypothesis example, then the battery), record
every value, and report per failure kind (``"non_finite"`` overflow/NaN, ``"precision"``,
``"convention"``, ``"exception"``, ``"shape"``; ``"soundness"`` for certificates) the number of examples
and values, the worst example and a shrunk minimal example with an ``@example(...)`` replay line (and the
seed, which repeats the whole run).  ``max_error`` is then the largest finite error over the budget;
non-finite candidate values are counted (``n_non_finite``) and listed (``non_finite``) separately.  With
``raise_on_failure`` (default) a failing measure run also raises, after the budget.

Reports are structured: :class:`CheckReport` has ``to_dict()`` (JSON-ready, numbers as numbers, schema
:data:`REPORT_SCHEMA`, documented in :mod:`ntkref._testing_report`), ``to_json(path)`` and, for kernel
checks, the per-entry table ``entry_table()`` / ``to_csv(path)`` (row, col, candidate, reference, absolute
and scaled error, the tolerance used and where it came from, the entry's kind) — pass
``record_entries=True`` (default in measure mode).

Error measure for kernels
-------------------------
For an entry (i, j) with reference value R = K_ref(xᵢ, x′ⱼ),

.. math::  e_{ij} = \frac{|K_{ij} - R_{ij}|}{\sqrt{K_{\rm ref}(x_i, x_i)\,K_{\rm ref}(x'_j, x'_j)}} ,

the error relative to the Cauchy–Schwarz bound |R| ≤ √(K(x,x)K(x′,x′)) (for a
PSD kernel), which is the scale a kernel entry can be known to.  It is scale
free (rows of norm 1e-150 and 1e150 alike) and meaningful where R itself is 0
(orthogonal rows, Θ(x, 0) = 0).  Entries fail where
|K − R| > τ·√(…) + ``atol`` with τ = max(user tolerance, ntkref's certified bound for that entry) — the
user tolerance being ``diag_tol`` on the diagonal of a symmetric call (x2 = None, i = j) and
``offdiag_tol`` elsewhere — and the report says which of the two applied, per entry and in total
(``tolerance_counts``).  ntkref's bound for FC kernels (ReLU, erf) is 1e-13: tests/test_kernels.py checks
every entry against 50-digit mpmath at input norms from 1e-300 to ~1e150 (see :mod:`ntkref._testing_kernel`
for the tests and the depth rule); for the CNTK see :func:`check_cntk`.  A non-finite candidate value
always fails.  Tolerances down to ~1e-12 are meaningful in float64; float32 candidates need ~1e-5 (their
inputs are cast to float32 first and the reference is computed, in float64, on the cast values).

Known results (``validation/nt_oracle_check.py``): neural-tangents 0.6.5 in
float64 fails ``diag_tol=1e-11`` with a ~1e-8 error on the NTK diagonal (its
angle arctan2(√(q₁q₂ − k²), k) loses half the digits at θ = 0), while its
off-diagonal entries on generic inputs pass at ``offdiag_tol=1e-11``.

Inputs: ``inputs=`` and ``battery=``
------------------------------------
``inputs`` is the hypothesis strategy searched (default :func:`kernel_inputs`, every hard row kind).
``battery`` adds the fixed cases of :func:`hard_inputs` (images: :func:`hard_images`) *after* the search.
The default ``battery=None`` means "the battery runs only with the default strategy": a user's ``inputs=``
is searched alone (the battery's rows, d = 4, are not what a fixed-size or special-purpose candidate
accepts).  ``battery=True`` with ``inputs=`` runs both, the user's strategy first, and the report counts
each (``n_examples_by_source``) and names the source of each failure.  A user ``reference=`` is never
probed with made-up inputs: it is called only on the inputs searched (and the battery, if asked for).

Strategies
----------
:func:`rows`, :func:`kernel_inputs`, :func:`generic_kernel_inputs`, :func:`ill_conditioned_kernels`,
:func:`labels`, :func:`machine_problems`, :func:`learning_rates`, :func:`widths`, :func:`images`,
:func:`image_inputs` — hypothesis strategies returning NumPy arrays (convert them to
your namespace yourself), bounded in size, reproducible under hypothesis'
seeding.  :func:`hard_inputs` and :func:`hard_images` are fixed (non-hypothesis) batteries.

This module needs ``hypothesis`` (``pip install ntkref[test]``); the rest of
ntkref does not.
"""
from __future__ import annotations

import math

import numpy as np  # host-side test tooling: inputs and reports are NumPy arrays by design

try:
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - exercised only without the test extra
    raise ImportError(
        "ntkref.testing needs the 'hypothesis' package: pip install hypothesis (or ntkref[test])."
    ) from exc

from . import _backend
from ._backend import to_numpy
from ._testing_engine import MODES, check_dtype, check_mode, drive
from ._testing_kernel import KernelComparison, custom_reference, fc_bound, fc_reference
from ._testing_report import (
    ENTRY_COLUMNS,
    FAILURE_KINDS,
    REPORT_SCHEMA,
    CheckReport,
    KindSummary,
    Mismatch,
    certified_bound,
    json_safe,
    kernel_error,
)
from ._validation import InvalidParameterError, check_int, check_option, check_real

__all__ = [
    "ROW_KINDS",
    "IMAGE_KINDS",
    "MODES",
    "FAILURE_KINDS",
    "ENTRY_COLUMNS",
    "REPORT_SCHEMA",
    "OracleMismatch",
    "CheckReport",
    "KindSummary",
    "Mismatch",
    "certified_bound",
    "json_safe",
    "rows",
    "kernel_inputs",
    "generic_kernel_inputs",
    "ill_conditioned_kernels",
    "labels",
    "machine_problems",
    "learning_rates",
    "widths",
    "hard_inputs",
    "images",
    "image_inputs",
    "hard_images",
    "kernel_error",
    "check_kernel",
    "check_cntk",
    "check_fit",
    "check_dynamics",
    "check_certificate",
    "fit_convention_hint",
]

ROW_KINDS = ("gaussian", "near_parallel", "antiparallel", "duplicate", "scaled_duplicate", "zero")
"""Kinds of rows :func:`rows` mixes (``gaussian`` first: hypothesis shrinks towards it)."""


class OracleMismatch(AssertionError):
    """A candidate disagrees with ntkref beyond the stated tolerance (``.report`` has the details)."""

    def __init__(self, report):
        super().__init__(str(report))
        self.report = report


def _finish(report, raise_on_failure):
    if not report.passed and raise_on_failure:
        raise OracleMismatch(report)
    return report


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
    dtype = check_dtype(dtype, "ntkref.testing")
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
    dtype = check_dtype(dtype, "generic_kernel_inputs")

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
    bound = check_real(bound, "bound", caller="labels", low=0.0, closed="neither")  # checked for either kind
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
    dtype = check_dtype(dtype, "hard_inputs")
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
def _convention_threshold(value, dtype, caller):
    if value is None:
        return 1e-4 if dtype == "float64" else 1e-2
    return check_real(value, "convention_threshold", caller=caller, low=0.0, allow_inf=True)


def _battery_flag(battery, inputs, caller):
    if battery is None:
        return inputs is None
    if not isinstance(battery, bool):
        raise InvalidParameterError(f"The 'battery' parameter of {caller} must be True, False or None. "
                                    f"Got {battery!r} instead.")
    return battery


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
    battery=None,
    inputs=None,
    dtype="float64",
    reference=None,
    reference_bound=0.0,
    backend=None,
    pass_none=True,
    seed=0,
    shrink=True,
    raise_on_failure=True,
    mode="assert",
    convention_threshold=None,
    record_entries=None,
):
    r"""Search for inputs on which ``candidate(x1, x2)`` differs from ntkref's FC kernel.

    Compares ``candidate(x1, x2)`` (shape (n1, n2); ``x2=None`` means x1) with
    ``ntkref.kernels.fc(x1, x2, depth=depth, activation=activation,
    W_std=W_std, b_std=b_std).<which>`` (neural-tangents' convention, docs/conventions.md, 'FC kernels'),
    entry by entry, with the error

    .. math::  e_{ij} = |K_{ij} - R_{ij}| / \sqrt{R(x_i,x_i)\,R(x'_j,x'_j)}

    (module docstring), failing where e > max(``diag_tol``, b) on the diagonal of a
    symmetric call, e > max(``offdiag_tol``, b) elsewhere (plus ``atol`` in absolute
    terms; b = ntkref's certified bound, 1e-13 for ReLU/erf), or the candidate's value is not finite,
    raises, or has the wrong shape.

    The search runs hypothesis over ``inputs`` (default :func:`kernel_inputs`
    with every row kind: angles down to 1e-9, zero rows, norms 1e-150 … 1e150,
    duplicates), then the battery :func:`hard_inputs` (module docstring, 'Inputs').  In assert mode the
    first failure is shrunk and the battery runs only if the search found nothing; in measure mode
    everything runs and each failure kind gets its own shrunk example.  Reported examples are reduced to
    the one or two rows involved when that still fails the same way.

    Parameters
    ----------
    candidate : callable (x1, x2) -> array-like
        Gets NumPy arrays of ``dtype``; may return any array convertible by
        :func:`ntkref.to_numpy`.
    depth, activation, W_std, b_std : as in :func:`ntkref.kernels.fc`
    which : {"ntk", "nngp"}
    diag_tol, offdiag_tol : float ≥ 0 or inf
        User tolerances on e (defaults 1e-10); inf leaves that part unchecked (e.g. ``diag_tol=math.inf`` to
        measure the off-diagonal entries only), not both.
    atol : float ≥ 0
        Extra absolute slack (needed only where the reference scale is 0).
    max_examples : int
        Hypothesis examples (0: battery only; refused when no battery runs, as nothing would be checked).
    battery : bool or None
        ``None`` (default): the battery runs only when ``inputs`` is not given; ``True``: always (with
        ``inputs``: both, the user's first); ``False``: never.
    inputs : hypothesis strategy of (x1, x2), optional
    dtype : {"float64", "float32"}
        Inputs are cast to this before the candidate and the reference see them.
    reference : callable (x1, x2) -> array, optional
        Compare with this instead of ``fc`` (e.g. ``ntkref.kernels.arora_ntk``); its diagonal (from
        ``reference(x, None)`` on the same inputs) sets the scale.  Called only on the inputs checked.
    reference_bound : float ≥ 0
        The scaled error ``reference`` is known to (its certified bound; default 0).
    backend : str, optional
        Namespace the reference is computed in (default ``NTKREF_BACKEND``).
    pass_none : bool
        Call ``candidate(x1, None)`` for symmetric inputs (else ``candidate(x1, x1)``).
    seed : int
        Hypothesis seed (the search is reproducible).
    shrink : bool
        Shrink failing inputs to minimal ones (default; each shrink step calls the candidate again).
    raise_on_failure : bool
        Raise :class:`OracleMismatch` (default) or return the report.
    mode : {"assert", "measure"}
        Module docstring, 'Two modes'.
    convention_threshold : float, optional
        Failing finite errors above it are of kind ``"convention"``, below it ``"precision"`` (default 1e-4
        in float64, 1e-2 in float32).
    record_entries : bool, optional
        Keep the per-entry table (``report.entries``, ``to_csv``); default: in measure mode only.

    Returns
    -------
    CheckReport

    Raises
    ------
    OracleMismatch
        On disagreement (with ``raise_on_failure``), with the minimal example(s) in the message and ``.report``.
    """
    which = check_option(which, "which", ("ntk", "nngp"), caller="check_kernel")
    diag_tol = check_real(diag_tol, "diag_tol", caller="check_kernel", low=0.0, allow_inf=True)
    offdiag_tol = check_real(offdiag_tol, "offdiag_tol", caller="check_kernel", low=0.0, allow_inf=True)
    if math.isinf(diag_tol) and math.isinf(offdiag_tol):
        raise InvalidParameterError("The 'diag_tol' and 'offdiag_tol' parameters of check_kernel cannot both be "
                                    "inf: no value would be compared (inf leaves one of the two parts unchecked).")
    atol = check_real(atol, "atol", caller="check_kernel", low=0.0)
    dtype = check_dtype(dtype, "check_kernel")
    mode = check_mode(mode, "check_kernel")
    threshold = _convention_threshold(convention_threshold, dtype, "check_kernel")
    use_battery = _battery_flag(battery, inputs, "check_kernel")
    if not callable(candidate):
        raise InvalidParameterError(f"The 'candidate' parameter of check_kernel must be callable. Got {candidate!r}.")
    params = dict(depth=depth, activation=activation, W_std=W_std, b_std=b_std)
    alternatives = ()
    if reference is not None:
        if not callable(reference):
            raise InvalidParameterError(f"The 'reference' parameter of check_kernel must be callable. "
                                        f"Got {reference!r}.")
        rb = check_real(reference_bound, "reference_bound", caller="check_kernel", low=0.0)
        ref = custom_reference(reference, rb)
        bound, bound_source = rb, "reference_bound (user-supplied reference)"
    else:
        from .kernels import fc

        fc(_backend.asarray(np.ones((1, 2))), **params)  # ntkref's own parameter checks, with its messages
        ref = fc_reference(which, params, backend)
        other = "nngp" if which == "ntk" else "ntk"
        alternatives = ((f"ntkref's {other.upper()} (asked for the {which.upper()})",
                         fc_reference(other, params, backend)),)
        bound, bound_source = fc_bound(activation, depth)
    if inputs is None:
        inputs = kernel_inputs(dtype=dtype)
    name = getattr(candidate, "__qualname__", repr(candidate))
    desc = (f"check_kernel({name}, which={which!r}, "
            + (f"reference={getattr(reference, '__qualname__', reference)!r}" if reference is not None else
               f"depth={depth}, activation={activation!r}, W_std={W_std!r}, b_std={b_std!r}")
            + f", diag_tol={diag_tol:g}, offdiag_tol={offdiag_tol:g}, atol={atol:g}, dtype={dtype})")
    comparison = KernelComparison(candidate, ref, diag_tol=diag_tol, offdiag_tol=offdiag_tol, atol=atol,
                                  pass_none=pass_none, threshold=threshold)

    def cast(x):
        return None if x is None else np.asarray(x).astype(dtype)

    def evaluate(pair, rec):
        return comparison.evaluate(cast(pair[0]), cast(pair[1]), rec)

    cases = [(n, (x1, x2)) for n, x1, x2 in hard_inputs(4, seed=seed, dtype=dtype)] if use_battery else []
    report = drive(
        "check_kernel", strategy=inputs, evaluate=evaluate, battery_cases=cases, order=("x1", "x2"), mode=mode,
        max_examples=max_examples, seed=seed, shrink=shrink, description=desc,
        tolerance={"user": {"diagonal": diag_tol, "off-diagonal": offdiag_tol, "atol": atol},
                   "ntkref_bound": bound, "bound_source": bound_source},
        reduce=comparison.reduce, hint=lambda m: comparison.hint(m, alternatives),
        record_entries=(mode == "measure") if record_entries is None else bool(record_entries),
    )
    return _finish(report, raise_on_failure)


# the image strategies and check_cntk; kernel machines, dynamics and certificates
from ._testing_images import IMAGE_KINDS, check_cntk, hard_images, image_inputs, images  # noqa: E402
from ._testing_machines import check_certificate, check_dynamics, check_fit, fit_convention_hint  # noqa: E402
