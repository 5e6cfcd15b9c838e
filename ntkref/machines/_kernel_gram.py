r"""An FC NNGP/NTK Gram with a PSD margin proven from the kernel's own error bound: :func:`kernel_gram`.

The certificates of :mod:`ntkref.machines` are theorems about the float K they are given when its PSD property is
proven (``psd_margin`` finite: λ_min(K) > −μ).  Rump's test proves it by a Cholesky factorization, O(n³/3), which
``check_psd=True`` runs only up to n = 4096 (above, the Lanczos test proves nothing and the certificate assumes
K ⪰ 0).  For a Gram of ntkref's own FC kernels a proof costs O(n²):

**Theorem.**  Let K̃ = ``kernels.fc(x, error_bound=True)`` (x2 omitted: a Gram of one set of rows, exactly
symmetric — its upper blocks are mirrored) with the proven per-entry bound |K̃ᵢⱼ − Kᵢⱼ| ≤ Bᵢⱼ, K the exact
kernel of the exact float rows.  The exact NNGP is a covariance, E[f(x)f(x′)], and the exact NTK a sum of
Hadamard products of covariances (seed 004 eqs. (6)–(8): Θ_L = Σ_L + Σ̇_L ⊙ Θ_{L−1}), so K ⪰ 0 (Schur product
theorem) for every depth, W_std, b_std and activation.  E = K̃ − K is symmetric, so by Weyl's inequality

.. math::  λ_{\min}(K̃) ≥ λ_{\min}(K) − ‖E‖_2 ≥ −‖E‖_∞ ≥ −\max_i \sum_j B_{ij} ≥ −μ ,

(‖E‖₂ ≤ √(‖E‖₁‖E‖∞) = ‖E‖∞ for a symmetric E), with μ the row sums of B computed in float64 in any order and
rounded up: a float sum of n non-negative terms is within γ_{n−1} = (n−1)u/(1 − (n−1)u) of the exact one
(Higham, *Accuracy and Stability*, §4.2; additions never underflow), so μ = max fl(Σⱼ Bᵢⱼ)/(1 − γ_{n−1}), times
(1 + 4u) for the two roundings of that expression, plus the smallest subnormal to make the inequality strict.

Assumptions: those of B (``kernels/_rounding.py``: IEEE-754 round-to-nearest, library atan/atan2/sin/cos/hypot
within 4 ulp, no TF32) and that K̃ is not modified — :func:`kernel_gram` computes it itself and keeps it in the
returned :class:`~ntkref.machines.CheckedGram` (read-only for NumPy).  μ is of the size n·max Bᵢⱼ, about
n·1e-16…1e-13 of the diagonal: the certificate's term (λμ/2)‖α̂ − α′‖² is then negligible where it matters.
"""
from __future__ import annotations

import math

from .._lib import compat as _compat
from .._lib import dispatch
from .._lib.backend import is_numpy_namespace, namespace
from .._lib.validation import InvalidParameterError, check_array, check_option
from .. import kernels
from ._gram import _CHECKED, CheckedGram

__all__ = ["kernel_gram", "margin_from_bound"]

_U64 = 2.0 ** -53
_TINY = 5e-324


def margin_from_bound(B, xp):
    """μ ≥ max_i Σ_j Bᵢⱼ (a proven upper bound of the largest row sum of the non-negative bound array ``B``;
    module docstring), a Python float; inf where the sum overflows."""
    n = B.shape[1]
    if B.shape[0] * n == 0:
        return _TINY
    B64 = B if B.dtype == xp.float64 else xp.astype(B, xp.float64)  # exact
    if not math.isfinite(float(xp.max(B64)) * n * 1.01):  # a row sum could overflow: no margin (no NaN/warning)
        return math.inf
    top = float(xp.max(xp.sum(B64, axis=1)))
    g = (n - 1) * _U64 / (1 - (n - 1) * _U64) if n > 1 else 0.0
    return top / (1 - g) * (1 + 4 * _U64) + _TINY


def kernel_gram(x, *, get="ntk", depth=1, activation="relu", W_std=1.0, b_std=0.0, dtype=None, block_size=None,
                n_jobs=None):
    r"""The FC NNGP or NTK Gram of the rows ``x`` as a :class:`~ntkref.machines.CheckedGram` whose PSD margin is
    proven from the kernel's own error bound, in O(n²) (module docstring: λ_min(K̃) > −μ, μ ≈ max row sum of the
    per-entry bound), for any n — where ``check_psd=True`` proves nothing above n = 4096.

    The machines (``solve``, ``fit``, ``hard_margin_svm``, ``krr.solve_cg``) take it as ``K``: their certificate then
    accounts for μ (``KernelMachine.psd_margin``), so ``converged=True`` is a theorem about this K without an
    O(n³) factorization.  For n ≤ 4096 the default ``check_psd=True`` of a solver still runs Rump's Cholesky test
    on it (which can prove K ≻ 0, margin 0); the smaller of the two proven margins is kept.

    Parameters
    ----------
    x : array, shape (n, d)
        The rows (NumPy, CuPy, PyTorch or another array-API array; not Dask: the machines hold a Dask Gram block
        by block, which a CheckedGram cannot).
    get : {"ntk", "nngp"}
        Which Gram.
    depth, activation, W_std, b_std, dtype, block_size, n_jobs
        As in :func:`ntkref.kernels.fc`; the activation must be one with a proven bound (``"relu"``, ``"erf"``).

    Returns
    -------
    CheckedGram
        ``K`` the Gram (on ``x``'s device), ``psd_test = "error_bound"``, ``psd_margin`` = μ.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import machines
    >>> X = np.random.default_rng(0).standard_normal((50, 3))
    >>> X[1] = X[0]                                     # a duplicated row: K is singular
    >>> G = machines.kernel_gram(X, depth=2)
    >>> G.psd_test, bool(0 < G.psd_margin < 1e-11 * float(np.max(G.K)))
    ('error_bound', True)
    >>> y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> m = machines.solve(G, y, "hinge", 0.1, check_psd=False)  # no Cholesky: the margin is already proven
    >>> m.converged, m.psd_margin == G.psd_margin
    (True, True)
    """
    caller = "machines.kernel_gram"
    get = check_option(get, "get", ("ntk", "nngp"), caller=caller)
    if dispatch.fc.lookup(x, None) is None:  # (a Dask x is refused below, before it is read)
        x = check_array(x, "x", caller=caller, ndim=2, xp=namespace(x))
    else:
        raise InvalidParameterError(
            f"The 'x' parameter of {caller} is a Dask array: the machines hold a Dask Gram block by block, which a "
            "CheckedGram cannot; compute kernels.fc(x, error_bound=True) and pass its Gram to the solvers (their "
            "Lanczos test proves nothing), or use x.compute() when the Gram fits in memory.")
    try:
        k = kernels.fc(x, depth=depth, activation=activation, W_std=W_std, b_std=b_std, get=get, dtype=dtype,
                       block_size=block_size, n_jobs=n_jobs, error_bound=True)
    except NotImplementedError as e:
        raise NotImplementedError(f"{caller}: the PSD margin rests on kernels.fc's proven error bound, which is not "
                                  f"available here: {e}") from None
    K, B = getattr(k, get), getattr(k, f"{get}_bound")
    xp = namespace(K)
    if not _compat.exactly_symmetric_and_finite(K, xp) and not bool(xp.all(K == xp.matrix_transpose(K))):
        raise RuntimeError(f"{caller}: kernels.fc returned a Gram that is not exactly symmetric (its upper blocks "
                           "are mirrored): the margin's proof needs it; please report this.")
    mu = margin_from_bound(B, xp)
    if not math.isfinite(mu):
        raise InvalidParameterError(
            f"The 'x' parameter of {caller}: the row sums of the kernel's error bound overflow float64 (entries "
            "near the float maximum); rescale the inputs or W_std/b_std.")
    if is_numpy_namespace(xp):
        K = _compat.read_only(K, xp)  # ntkref's own array (fc made it): nobody else holds it
    return CheckedGram(K, "error_bound", _CHECKED, psd_margin=mu)
