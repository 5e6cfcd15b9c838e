"""The hypothesis strategies of :mod:`ntkref.testing` and the fixed kernel battery :func:`hard_inputs`.

Rows that break naive kernel implementations (:data:`ROW_KINDS`: near-parallel and antiparallel rows at angles
down to 1e-9, exact and scaled duplicates, zero rows, norms 1e-150 … 1e150), kernel arguments ``(x1, x2)``
drawn together, generic rows, ill-conditioned Gram matrices, labels, kernel-machine problems ``(K, y)`` (the
depth-1 ReLU NTK, seed 000 eq. (7)'s Gram), step sizes and widths.  Every strategy returns NumPy arrays.
``machine_problems`` is also used by the checkers of :mod:`ntkref.testing._machines`; ``kernel_inputs`` and
``hard_inputs`` by ``check_kernel`` (:mod:`ntkref.testing._kernel`).
"""
from __future__ import annotations

import math

import numpy as np  # host-side test tooling: inputs and reports are NumPy arrays by design
from hypothesis import strategies as st

from .. import kernels
from .._lib import backend as _backend
from .._lib.backend import to_numpy
from .._lib.validation import InvalidParameterError, check_int, check_option, check_real
from ._engine import check_dtype, int_range

__all__ = ["ROW_KINDS", "rows", "kernel_inputs", "generic_kernel_inputs", "ill_conditioned_kernels", "labels",
           "machine_problems", "learning_rates", "widths", "hard_inputs"]

ROW_KINDS = ("gaussian", "near_parallel", "antiparallel", "duplicate", "scaled_duplicate", "zero")
"""Kinds of rows :func:`rows` mixes (``gaussian`` first: hypothesis shrinks towards it)."""


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
    n_lo, n_hi = int_range(n, "n", 1)
    d_lo, d_hi = int_range(d, "d", 1)
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
    n1_lo, n1_hi = int_range(n1, "n1", 1)
    n2_lo, n2_hi = int_range(n2, "n2", 1)
    d_lo, d_hi = int_range(d, "d", 1)
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
    n1_lo, n1_hi = int_range(n1, "n1", 1)
    n2_lo, n2_hi = int_range(n2, "n2", 1)
    d_lo, d_hi = int_range(d, "d", 1)
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
    n_lo, n_hi = int_range(n, "n", 1)
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
    n_lo, n_hi = int_range(n, "n", 1)

    @st.composite
    def strategy(draw):
        if ill_conditioned:
            K = draw(ill_conditioned_kernels((n_lo, n_hi), max_log10_condition=8.0))
        else:
            x = draw(rows((n_lo, n_hi), d, kinds=("gaussian", "near_parallel", "duplicate"), scale_range=(0.1, 10.0),
                          min_angle=1e-3))
            # on the default namespace and device (NTKREF_BACKEND/NTKREF_DEVICE), copied back to the host
            K = to_numpy(kernels.fc(_backend.asarray(x), depth=1, get="ntk").ntk)
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
