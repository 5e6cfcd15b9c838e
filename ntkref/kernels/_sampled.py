r"""Sampled checks of a Gram matrix too large to compare whole: N random entries or K random rows.

A candidate NNGP/NTK Gram C of shape (n1, n2) — a ``.npy`` memory map, a Zarr array, any array, or a function
returning the entries asked for — is compared with :func:`ntkref.kernels.fc` computed *only for the sampled
pairs* (the rows of x1 and x2 involved), in the scaled measure of :mod:`ntkref.kernels._accuracy`,

.. math::  e(i, j) = \frac{|C_{ij} - K(x_i, x'_j)|}{\sqrt{K(x_i, x_i)}\,\sqrt{K(x'_j, x'_j)}} ,

(the product of the square roots: K(x,x)·K(x′,x′) itself underflows at row norms ~1e-100), with the tolerance
max(the user's, ntkref's certified bound) per entry, as ``ntkref compare`` and ``ntkref.testing`` judge whole Grams.
The reference's diagonal comes from :func:`ntkref.kernels.fc_diagonal` (exact in O(n)).

What sampling can and cannot rule out (the statistics are exact, not asymptotic):

- *entries*: N draws, independent and uniform over the n1·n2 entries (with replacement).  If a fraction p of
  the entries is wrong, the number of failing draws is Binomial(N, p).  With 0 failures, p < 1 − α^{1/N}
  at confidence 1 − α (the one-sided Clopper–Pearson bound; ≤ −ln(α)/N, ≈ 3/N at 95 %: the "rule of three");
  with k > 0 failures, p is estimated as k/N with the two-sided Clopper–Pearson interval (Beta quantiles).
- *rows*: K draws of a row index, uniform over the n1 rows (with replacement), each row compared whole; the
  same statements hold for the fraction of rows holding at least one wrong entry.

Sampling cannot rule out wrong entries that are rarer than that bound: a single wrong row of a 60 000 × 60 000
Gram is 1/60 000 of the entries and is hit by 10 000 entry draws with probability 1 − (1 − 1/60 000)^{10 000}
≈ 15 % (:func:`detection_probability`); a wrong diagonal (n of the n² entries) likewise; a structured bug that
affects only rare inputs (norms of 1e-150, exactly antiparallel rows) is found by sampling only if such inputs
are in x1/x2.  Use ``ntkref.testing.check_kernel`` for the adversarial inputs, and sampling for the scale.

Host-side tooling: the candidate's sampled values and the reference are copied to NumPy explicitly for the
comparison (the reference is computed in the inputs' namespace, on their device); the results are NumPy/Python
values.  Used by ``ntkref.testing.check_gram_sample`` and ``ntkref compare --sample/--rows``; kept out of
:mod:`ntkref.testing` because that needs hypothesis and the command line must not.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np  # host-side comparison: sampled values and reports are NumPy/Python values by design

from .._lib.backend import device_of, is_array, namespace, to_numpy
from .._lib.validation import InvalidParameterError, check_int, check_option, check_real
from ._accuracy import certified_bound
from ._fc import fc, fc_diagonal

__all__ = ["GramReader", "SampledCheck", "check_sampled", "zero_failure_bound", "fraction_interval",
           "detection_probability", "CONFIDENCE"]

CONFIDENCE = 0.95
_PAIR_BLOCK = 64  # pairs per reference call: the diagonal of a 64 × 64 block (64× the work, one public call)


# ---------------------------------------------------------------------------------------------
# the statistics
# ---------------------------------------------------------------------------------------------
def zero_failure_bound(n, confidence=CONFIDENCE):
    """Upper confidence bound on a failure fraction p after ``n`` independent draws with 0 failures.

    P(0 failures) = (1 − p)^n ≤ α = 1 − confidence exactly when p ≥ 1 − α^{1/n} (one-sided Clopper–Pearson);
    1 − α^{1/n} ≤ −ln(α)/n (≈ 2.996/n at 95 %, the rule of three).  ``n`` = 0: 1 (nothing ruled out).
    """
    if n <= 0:
        return 1.0
    return -math.expm1(math.log1p(-confidence) / n)


def fraction_interval(k, n, confidence=CONFIDENCE):
    """(estimate, low, high): k/n and the two-sided Clopper–Pearson interval for a binomial fraction.

    low = Beta⁻¹(α/2; k, n − k + 1) (0 for k = 0), high = Beta⁻¹(1 − α/2; k + 1, n − k) (1 for k = n), α = 1 −
    confidence: the exact interval, P(X ≥ k | low) = P(X ≤ k | high) = α/2 for X ~ Binomial(n, p).
    """
    from scipy.stats import beta  # scipy is a core dependency

    if n <= 0:
        return float("nan"), 0.0, 1.0
    a = 1.0 - confidence
    low = 0.0 if k == 0 else float(beta.ppf(a / 2, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - a / 2, k + 1, n - k))
    return k / n, low, high


def detection_probability(fraction, n):
    """Probability that ``n`` independent uniform draws hit at least one of a ``fraction`` of wrong items:
    1 − (1 − fraction)^n."""
    if fraction <= 0:
        return 0.0
    if fraction >= 1:
        return 1.0
    return -math.expm1(n * math.log1p(-fraction))


# ---------------------------------------------------------------------------------------------
# reading the candidate
# ---------------------------------------------------------------------------------------------
class GramReader:
    """Reads sampled entries and rows of a candidate Gram of shape ``shape`` without reading it whole.

    ``candidate`` may be

    - a NumPy array or memory map (``np.load(path, mmap_mode="r")``): fancy indexing reads only the pages
      holding the sampled entries;
    - a Zarr array (anything with ``vindex`` and ``oindex``): ``vindex[i, j]`` for entries, ``oindex[rows, :]``
      for rows; each read costs the chunks it touches (random entries touch random chunks: prefer small chunks
      or ``rows``);
    - another array-API array (torch, CuPy, …): indexed in its namespace, the sampled values copied to the host;
    - a callable: ``candidate(i, j)`` with two int64 NumPy arrays of equal length returns the entries
      C[i[k], j[k]]; ``candidate(rows)`` with one returns the rows C[rows, :], shape (len(rows), n2).
    """

    def __init__(self, candidate, shape, caller, name="candidate"):
        self.shape, self.caller, self.name = tuple(shape), caller, name
        self.candidate = candidate
        if hasattr(candidate, "shape") and not callable(candidate):
            got = tuple(int(s) for s in candidate.shape)
            if got != self.shape:
                raise InvalidParameterError(
                    f"The {name!r} parameter of {caller} must have the shape of the Gram, {self.shape} "
                    f"(rows of x1, rows of x2); got {got}.")
            if isinstance(candidate, np.ndarray):
                self.kind = "numpy"
            elif hasattr(candidate, "vindex") and hasattr(candidate, "oindex"):
                self.kind = "zarr"
            elif is_array(candidate):
                self.kind = "array"
            else:
                raise InvalidParameterError(
                    f"The {name!r} parameter of {caller} must be a NumPy array or memory map, a Zarr array, an "
                    f"array-API array or a callable. Got {type(candidate).__name__} instead.")
        elif callable(candidate):
            self.kind = "callable"
        else:
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller} must be a NumPy array or memory map, a Zarr array, an "
                f"array-API array or a callable. Got {type(candidate).__name__} instead.")

    def _host(self, values, expected, what):
        v = to_numpy(values) if is_array(values) else values  # an explicit host copy of the sampled values
        v = np.asarray(v)
        if v.dtype.kind not in "biuf" or v.shape != expected:
            raise InvalidParameterError(
                f"The {self.name!r} parameter of {self.caller} returned {what} of shape {v.shape} and dtype {v.dtype}; "
                f"expected real numbers of shape {expected}.")
        return v.astype(np.float64)

    def entries(self, i, j):
        """C[i[k], j[k]] as float64, for int64 index arrays ``i`` and ``j``."""
        c = self.candidate
        if self.kind == "numpy":
            v = c[i, j]
        elif self.kind == "zarr":
            v = c.vindex[i, j]
        elif self.kind == "array":
            xp = namespace(c)
            flat = xp.reshape(c, (-1,))
            v = xp.take(flat, xp.asarray((i * self.shape[1] + j).tolist(), device=device_of(c)))
        else:
            v = c(i.copy(), j.copy())
        return self._host(v, i.shape, "entries")

    def rows(self, rows):
        """C[rows, :] as float64, for an int64 index array ``rows``."""
        c = self.candidate
        if self.kind == "numpy":
            v = c[rows, :]
        elif self.kind == "zarr":
            v = c.oindex[rows, :]
        elif self.kind == "array":
            xp = namespace(c)
            v = xp.take(c, xp.asarray(rows.tolist(), device=device_of(c)), axis=0)
        else:
            v = c(rows.copy())
        return self._host(v, (rows.shape[0], self.shape[1]), "rows")


# ---------------------------------------------------------------------------------------------
# the result
# ---------------------------------------------------------------------------------------------
@dataclass
class SampledCheck:
    """The result of a sampled check (:func:`check_sampled`).

    ``mode`` is ``"entries"`` or ``"rows"``; ``n_draws`` the number of draws (entries, or rows), ``n_failed``
    the draws holding a failing entry (a non-finite candidate value always fails; ``n_non_finite`` counts
    them), ``n_entries_compared`` the entries compared; ``max_error`` the largest finite scaled error and
    ``worst`` the entries with the largest errors (dicts: row, col, candidate, reference, scaled_error,
    tolerance); ``estimate``/``interval`` the failing fraction of the sampled units (k/N and the two-sided
    Clopper–Pearson interval at ``confidence``); ``upper_bound`` the one-sided bound 1 − α^{1/N} when nothing
    failed (else ``None``).  ``statement`` says in words what was and was not ruled out.
    """

    mode: str
    shape: tuple
    n_draws: int
    n_failed: int
    n_non_finite: int
    n_entries_compared: int
    max_error: float
    tolerance: float
    diag_tolerance: float
    bound: float
    bound_source: str
    seed: int
    confidence: float
    estimate: float
    interval: tuple
    upper_bound: float | None
    statement: str
    seconds: float
    worst: list = field(default_factory=list)
    config: dict = field(default_factory=dict)

    @property
    def passed(self):
        return self.n_failed == 0

    def __str__(self):
        return "\n".join(self.lines())

    def lines(self):
        """The human-readable summary (one line per fact)."""
        unit = "entries" if self.mode == "entries" else "rows"
        out = [f"sampled check of a {self.shape[0]} x {self.shape[1]} Gram: {self.n_draws} random {unit} "
               f"(seed {self.seed}), {self.n_entries_compared} entries compared in {self.seconds:.2f} s",
               f"  failing {unit}: {self.n_failed} of {self.n_draws} (non-finite entries: {self.n_non_finite}); "
               f"max finite scaled error {self.max_error:.3e}; tolerance {self.tolerance:g} "
               f"(diagonal {self.diag_tolerance:g}), ntkref's bound {self.bound:g}",
               f"  {self.statement}"]
        for w in self.worst[:5 if self.n_failed else 1]:  # the failing entries, or the largest error
            out.append(f"  {'outside' if w['outside'] else 'largest error'}: ({w['row']}, {w['col']}) candidate "
                       f"{w['candidate']!r} reference {w['reference']!r} scaled error {w['scaled_error']:.3e}")
        return out

    def to_dict(self):
        """JSON-ready (non-finite numbers as ``None``; the worst entries' texts in ``*_text``)."""
        def num(v):
            return v if v is None or math.isfinite(v) else None

        worst = [{**w, "candidate": num(w["candidate"]), "candidate_text": repr(w["candidate"]),
                  "scaled_error": num(w["scaled_error"]), "scaled_error_text": repr(w["scaled_error"])}
                 for w in self.worst]
        return {"schema": "ntkref.sampled/1", "mode": self.mode, "shape": list(self.shape), "passed": self.passed,
                "n_draws": self.n_draws, "n_failed": self.n_failed, "n_non_finite": self.n_non_finite,
                "n_entries_compared": self.n_entries_compared, "max_error": num(self.max_error),
                "tolerance": self.tolerance, "diag_tolerance": self.diag_tolerance, "ntkref_bound": self.bound,
                "ntkref_bound_source": self.bound_source, "seed": self.seed, "confidence": self.confidence,
                "estimate": self.estimate, "interval": list(self.interval), "upper_bound": self.upper_bound,
                "statement": self.statement, "seconds": self.seconds,
                "worst": [{k: (num(v) if isinstance(v, float) else v) for k, v in w.items()} for w in worst],
                "config": self.config}


# ---------------------------------------------------------------------------------------------
# the check
# ---------------------------------------------------------------------------------------------
def _select(x, idx):
    """Rows ``idx`` (a NumPy int64 array) of ``x``, in x's namespace and on its device."""
    xp = namespace(x)
    return xp.take(x, xp.asarray(idx.tolist(), device=device_of(x)), axis=0)


def _diag(x, which, params, dtype, name="x", caller="fc_diagonal"):
    """The reference diagonal K(x, x); fc_diagonal's refusal of the rows is re-raised naming ``name`` of
    ``caller`` (the message is fc_diagonal's, about its parameter 'x')."""
    try:
        d = fc_diagonal(x, dtype=dtype, **params)
    except InvalidParameterError as exc:
        msg = str(exc)
        for head in ("The 'x' parameter of fc_diagonal", "The 'x' parameter"):
            if msg.startswith(head):
                raise InvalidParameterError(f"The {name!r} parameter of {caller}" + msg[len(head):]) from exc
        raise
    return np.asarray(to_numpy(getattr(d, which)), dtype=np.float64)


def _scaled_errors(C, R, s):
    """|C − R| / s; where s = 0: 0 if C == R else inf; a non-finite candidate: inf (kernel_error's rules)."""
    with np.errstate(all="ignore"):
        diff = np.abs(C - R)
        err = np.where(s > 0, diff / np.where(s > 0, s, 1.0), np.where(diff == 0, 0.0, np.inf))
    err = np.where(np.isfinite(C), err, np.inf)
    return np.where(np.isnan(err), np.inf, err)


def check_sampled(candidate, x1, x2=None, *, n_entries=None, n_rows=None, seed=0, depth=1, activation="relu",
                  W_std=1.0, b_std=0.0, which="ntk", tol=1e-10, diag_tol=None, atol=0.0, dtype=None,
                  confidence=CONFIDENCE, n_worst=10, caller="check_sampled", candidate_name="candidate"):
    """Compare ``n_entries`` random entries or ``n_rows`` random rows of ``candidate`` with ``kernels.fc``.

    See the module docstring for the measure, the readers (:class:`GramReader`) and the statistics.  Exactly
    one of ``n_entries`` and ``n_rows`` is given.  The reference is ``kernels.fc(x1[I], x2[J], ...)`` on the
    sampled rows only (entries: the diagonal of blocks of 64 pairs; rows: the rows against all of x2), computed
    in ``dtype`` (default: the inputs'); each entry fails where e(i, j) > max(tol, ntkref's bound) + atol/scale
    (``diag_tol`` on the diagonal of a symmetric Gram, x2 = None).  Returns a :class:`SampledCheck`.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import kernels
    >>> from ntkref.kernels._sampled import check_sampled
    >>> x = np.random.default_rng(0).normal(size=(50, 3))
    >>> K = np.asarray(kernels.fc(x, depth=2).ntk)
    >>> r = check_sampled(K, x, n_entries=200, depth=2)
    >>> r.passed, r.n_failed, round(r.upper_bound * 200, 2)      # < 3/N of the entries wrong (95 %)
    (True, 0, 2.98)
    >>> K[:5] *= 2                                                # 10 % of the entries wrong
    >>> check_sampled(K, x, n_entries=200, depth=2).passed
    False
    """
    t0 = time.perf_counter()
    if (n_entries is None) == (n_rows is None):
        raise InvalidParameterError(f"Exactly one of the 'n_entries' and 'n_rows' parameters of {caller} must be "
                                    f"given. Got n_entries={n_entries!r}, n_rows={n_rows!r}.")
    which = check_option(which, "which", ("ntk", "nngp"), caller=caller)
    tol = check_real(tol, "tol", caller=caller, low=0.0)
    diag_tol = tol if diag_tol is None else check_real(diag_tol, "diag_tol", caller=caller, low=0.0)
    atol = check_real(atol, "atol", caller=caller, low=0.0)
    confidence = check_real(confidence, "confidence", caller=caller, low=0.5, high=1.0, closed="left")
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise InvalidParameterError(f"The 'seed' parameter of {caller} must be an integer. Got {seed!r} instead.")
    seed = int(seed)
    n_worst = check_int(n_worst, "n_worst", caller=caller, low=0)
    for name, x in (("x1", x1), ("x2", x2)):
        if x is not None and (not hasattr(x, "shape") or len(x.shape) != 2):
            raise InvalidParameterError(f"The {name!r} parameter of {caller} must be an array of shape (n, d), one "
                                        f"sample a row. Got {type(x).__name__} of shape {getattr(x, 'shape', None)}.")
    if not is_array(x1):
        x1 = np.asarray(x1, dtype=np.float64)
    if x2 is not None and not is_array(x2):
        x2 = np.asarray(x2, dtype=np.float64)
    symmetric = x2 is None
    xb = x1 if symmetric else x2
    n1, n2 = int(x1.shape[0]), int(xb.shape[0])
    reader = GramReader(candidate, (n1, n2), caller, candidate_name)
    params = dict(depth=depth, activation=activation, W_std=W_std, b_std=b_std)
    # the reference diagonal (validates x1, x2 and the parameters as kernels.fc does)
    d1 = _diag(x1, which, params, dtype, "x1", caller)
    d2 = d1 if symmetric else _diag(x2, which, params, dtype, "x2", caller)
    dtype_name = str(np.dtype(dtype).name) if dtype is not None else (
        "float32" if str(getattr(x1, "dtype", "")).endswith("float32") else "float64")
    bound, source = certified_bound("fc", depth=depth, activation=activation, dtype=dtype_name)
    rng = np.random.default_rng(seed)
    if n_entries is not None:
        mode = "entries"
        n = check_int(n_entries, "n_entries", caller=caller, low=1)
        flat = np.sort(rng.integers(0, n1 * n2, size=n, dtype=np.int64))  # sorted: local reads of a memory map
        I, J = flat // n2, flat % n2
        C = reader.entries(I, J)
        R = np.empty(n, dtype=np.float64)
        for s in range(0, n, _PAIR_BLOCK):
            e = min(s + _PAIR_BLOCK, n)
            a, b = _select(x1, I[s:e]), _select(xb, J[s:e])
            blk = np.asarray(to_numpy(getattr(fc(a, b, get=which, dtype=dtype, **params), which)), dtype=np.float64)
            R[s:e] = np.diagonal(blk)
    else:
        mode = "rows"
        n = check_int(n_rows, "n_rows", caller=caller, low=1)
        draws = rng.integers(0, n1, size=n, dtype=np.int64)
        uniq, inverse = np.unique(draws, return_inverse=True)
        Cu = reader.rows(uniq)
        Ru = np.asarray(to_numpy(getattr(fc(_select(x1, uniq), xb, get=which, dtype=dtype, **params), which)),
                        dtype=np.float64)
        I = np.repeat(uniq, n2)
        J = np.tile(np.arange(n2, dtype=np.int64), uniq.shape[0])
        C, R = Cu.reshape(-1), Ru.reshape(-1)
        unit_of = np.repeat(np.arange(uniq.shape[0]), n2)
    s = np.sqrt(np.maximum(d1[I], 0.0)) * np.sqrt(np.maximum(d2[J], 0.0))
    err = _scaled_errors(C, R, s)
    on_diag = (I == J) if symmetric else np.zeros(I.shape, dtype=bool)
    tau = np.maximum(np.where(on_diag, diag_tol, tol), bound)
    with np.errstate(all="ignore"):
        allowed = tau + np.where(s > 0, atol / np.where(s > 0, s, 1.0), np.where(atol > 0, np.inf, 0.0))
    with np.errstate(all="ignore"):  # a non-finite candidate always fails (inf <= inf must not pass it)
        bad = ~np.isfinite(C) | ~(err <= allowed)
    if mode == "entries":
        k = int(bad.sum())
    else:
        failed_rows = np.zeros(uniq.shape[0], dtype=bool)
        np.logical_or.at(failed_rows, unit_of, bad)
        k = int(failed_rows[inverse].sum())  # per draw (a row drawn twice counts twice: binomial draws)
    finite_err = err[np.isfinite(err)]
    max_error = float(finite_err.max()) if finite_err.size else 0.0
    order = np.argsort(-np.where(np.isfinite(err), err, np.inf), kind="stable")[:n_worst]
    worst = [{"row": int(I[t]), "col": int(J[t]), "candidate": float(C[t]), "reference": float(R[t]),
              "scaled_error": float(err[t]), "tolerance": float(allowed[t]), "outside": bool(bad[t])}
             for t in order]
    est, lo, hi = fraction_interval(k, n, confidence)
    unit = "entries" if mode == "entries" else "rows"
    pct = f"{100 * confidence:g} %"
    if k == 0:
        upper = zero_failure_bound(n, confidence)
        one_row = (f"one wrong row ({1 / n1:.3g} of the entries) is hit" if mode == "entries"
                   else "one wrong row is drawn")
        statement = (f"0 of {n} random {unit} fail: at {pct} confidence fewer than {upper:.3g} of the {unit} are "
                     f"wrong (1 - {1 - confidence:g}^(1/N) <= -ln({1 - confidence:g})/N = "
                     f"{-math.log1p(-confidence) / n:.3g}, the rule of three); a smaller fraction is not ruled out: "
                     f"{one_row} with probability only {detection_probability(1 / n1, n):.3g}")
    else:
        upper = None
        statement = (f"{k} of {n} random {unit} fail: estimated fraction of wrong {unit} {est:.3g}, {pct} "
                     f"Clopper-Pearson interval [{lo:.3g}, {hi:.3g}]"
                     + (f" (about {est * n1 * n2:.3g} of the {n1 * n2} entries)" if mode == "entries" else
                        f" (about {est * n1:.3g} of the {n1} rows)"))
    config = {"function": "ntkref.kernels.fc", "which": which, "depth": depth, "activation": str(activation),
              "W_std": W_std if not isinstance(W_std, (list, tuple)) else list(W_std),
              "b_std": b_std if not isinstance(b_std, (list, tuple)) else list(b_std), "dtype": dtype_name,
              "symmetric": symmetric, "reader": reader.kind}
    return SampledCheck(mode=mode, shape=(n1, n2), n_draws=n, n_failed=k, n_non_finite=int((~np.isfinite(C)).sum()),
                        n_entries_compared=int(C.shape[0]), max_error=max_error, tolerance=tol,
                        diag_tolerance=diag_tol, bound=bound, bound_source=source, seed=seed, confidence=confidence,
                        estimate=est, interval=(lo, hi), upper_bound=upper, statement=statement,
                        seconds=time.perf_counter() - t0, worst=worst, config=config)
