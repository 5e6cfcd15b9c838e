r"""``check_gram_sample``: N random entries or K random rows of a Gram too large to check whole.

The check itself — the readers (``.npy`` memory maps, Zarr arrays, array-API arrays, callables), the reference
``kernels.fc`` on the sampled pairs only, the scaled measure |C − K| / (√K(x,x)·√K(x′,x′)) and the exact
binomial statistics (0 failures in N draws: fewer than 1 − α^{1/N} ≤ −ln(α)/N ≈ 3/N of the entries are wrong at
95 %; k failures: k/N with its Clopper–Pearson interval) — is :func:`ntkref.kernels._sampled.check_sampled`,
shared with ``ntkref compare --sample/--rows`` (which must not need hypothesis).  This module adds the oracle's
verdict: :class:`~ntkref.testing.OracleMismatch` on failure.
"""
from __future__ import annotations

from ..kernels._sampled import CONFIDENCE, SampledCheck, check_sampled
from ._engine import OracleMismatch

__all__ = ["check_gram_sample", "SampledCheck"]


def check_gram_sample(candidate_gram, x1, x2=None, *, n_entries=None, n_rows=None, seed=0, depth=1,
                      activation="relu", W_std=1.0, b_std=0.0, which="ntk", tol=1e-10, diag_tol=None, atol=0.0,
                      dtype=None, confidence=CONFIDENCE, raise_on_failure=True):
    r"""Check ``n_entries`` random entries (or ``n_rows`` random rows) of a Gram too large for memory.

    ``candidate_gram`` is the Gram your code computed for ``kernels.fc(x1, x2, depth=..., activation=...,
    W_std=..., b_std=...)`` (``which``: ``"ntk"`` or ``"nngp"``), shape (n1, n2), given as

    - a NumPy array or a memory map — ``np.load("K.npy", mmap_mode="r")``: only the pages of the sampled
      entries are read;
    - a Zarr array (``zarr.open_array("K.zarr", mode="r")``): ``vindex``/``oindex`` reads, each costing the
      chunks it touches;
    - another array-API array, or a callable: ``candidate_gram(i, j)`` (two int64 NumPy arrays of equal length)
      returns the entries C[i[k], j[k]], and ``candidate_gram(rows)`` returns the rows C[rows, :].

    Exactly one of ``n_entries`` (uniform draws over the n1·n2 entries, with replacement) and ``n_rows``
    (uniform draws of a row, each compared whole against all of x2) is given.  The reference is computed only
    for the sampled pairs.  An entry fails where |C − K| > τ·√K(x,x)·√K(x′,x′) + ``atol``, τ = max(``tol``,
    ntkref's certified bound) (``diag_tol`` on the diagonal of a symmetric Gram, x2 = None); a non-finite
    value always fails.

    What the result can and cannot rule out is in its ``statement``: with 0 failing draws of N, at
    ``confidence`` (95 %) fewer than 1 − 0.05^{1/N} ≈ 3/N of the entries (rows) are wrong — the exact binomial
    bound, since the draws are independent; with k > 0 failures, the fraction is about k/N, with its exact
    two-sided Clopper–Pearson interval.  A rarer defect — one wrong row of a 60 000-row Gram (1/60 000 of the
    entries) is hit by 10 000 entry draws with probability ≈ 15 % — is not ruled out: sample rows
    (``n_rows``) for row defects, and use :func:`check_kernel` for the adversarial inputs (sampling finds
    input-specific bugs only where such inputs are among x1, x2).

    Returns the :class:`SampledCheck` (``passed``, ``n_failed``, ``max_error``, ``worst``, ``estimate``,
    ``interval``, ``upper_bound``, ``statement``, ``to_dict()``); on failure, with ``raise_on_failure``
    (default), raises :class:`OracleMismatch` (an ``AssertionError``) carrying it as ``.report``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import kernels
    >>> from ntkref.testing import check_gram_sample
    >>> x = np.random.default_rng(0).normal(size=(300, 4))
    >>> K = np.asarray(kernels.fc(x, depth=2, b_std=0.1).ntk)      # stands for a Gram on disk
    >>> r = check_gram_sample(K, x, n_entries=1000, depth=2, b_std=0.1)
    >>> r.passed, f"{r.upper_bound:.2e}"                            # < 3/1000 of the entries wrong, at 95 %
    (True, '2.99e-03')
    >>> K[100:130, :] = 0.5 * K[100:130, :]                         # 10 % of the rows wrong
    >>> r = check_gram_sample(K, x, n_rows=50, depth=2, b_std=0.1, raise_on_failure=False)
    >>> r.passed, 0 < r.interval[0] < 0.1 < r.interval[1]           # the interval covers the truth
    (False, True)
    """
    result = check_sampled(candidate_gram, x1, x2, n_entries=n_entries, n_rows=n_rows, seed=seed, depth=depth,
                           activation=activation, W_std=W_std, b_std=b_std, which=which, tol=tol, diag_tol=diag_tol,
                           atol=atol, dtype=dtype, confidence=confidence, caller="check_gram_sample",
                           candidate_name="candidate_gram")
    if raise_on_failure and not result.passed:
        raise OracleMismatch(result)
    return result
