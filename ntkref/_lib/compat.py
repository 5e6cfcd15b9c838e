"""The few numerical needs the array API standard does not cover.

Everything in ntkref's core uses only the array API standard; this module is
the one documented exception.  Each function takes arrays of any namespace and
returns arrays of the same namespace, dispatching to the native routine where
the library has one and otherwise computing on the host with NumPy/SciPy
(correct, but it copies; that only happens for namespaces without a native
routine, e.g. ``array_api_strict``).

- :func:`erf` — the error function (SciPy/CuPy/PyTorch/JAX natives).
- :func:`gauss_hermite` — nodes and weights of Gauss–Hermite quadrature for
  the standard normal (probabilists' weight e^{-z^2/2}/sqrt(2 pi)).
- :func:`scatter_flat` — write values at flat positions of a 2-D array
  (fancy-index assignment is not in the standard; the standard-only route
  through a cumulative sum is the fallback).
- :func:`eigh` — symmetric eigendecomposition (``xp.linalg.eigh`` where the
  namespace has the linalg extension).
- :func:`exactly_symmetric_and_finite` — a fast sufficient test that a Gram matrix needs no
  tolerance checks (NumPy: tile comparisons into a reused buffer, which the standard's
  functions cannot write to; other namespaces answer "unknown").
- :func:`submatrix` — A[idx][:, idx] (CuPy and PyTorch index both axes in one kernel).
- :func:`lu_solve_small` — LAPACK's ``gesv`` for NumPy without the wrappers' cost.
- :func:`cholesky_succeeds` — whether a Cholesky factorization of K + sI succeeds, by LAPACK's
  ``potrf`` in place on one copy (NumPy; ~1.6× faster than ``numpy.linalg.cholesky``, which also
  writes L).
- :func:`frobenius_norm` — ‖K‖_F by one BLAS dot product for NumPy (``vector_norm`` allocates).
- :func:`read_only` — mark a NumPy array read-only (the standard has no such flag).
- :func:`single_threaded_blas` — a context in which NumPy's BLAS uses one
  thread, for code that runs its own worker threads (nested BLAS threads
  oversubscribe the cores: measured 5.0 s vs 3.7 s for an n = 8000 NTK on 2 cores).
- :func:`overflow_checked` — NumPy's overflow/invalid warnings off where the caller checks the results for
  non-finite values itself (the standard has no floating-point environment).
"""
from __future__ import annotations

import functools

import array_api_compat

from .backend import device_of, to_numpy


def _from_numpy(a, like, xp):
    return xp.asarray(a, device=device_of(like))


def erf(x, xp):
    """Error function erf(x) = 2/sqrt(pi) int_0^x e^{-t^2} dt, elementwise."""
    if array_api_compat.is_numpy_namespace(xp):
        from scipy.special import erf as _erf

        return xp.asarray(_erf(x))
    if array_api_compat.is_cupy_namespace(xp):
        from cupyx.scipy.special import erf as _erf

        return _erf(x)
    if array_api_compat.is_torch_namespace(xp):
        import torch

        return torch.special.erf(x)
    if array_api_compat.is_jax_namespace(xp):
        import jax.scipy.special

        return jax.scipy.special.erf(x)
    from scipy.special import erf as _erf

    return xp.astype(_from_numpy(_erf(to_numpy(x)), x, xp), x.dtype)


@functools.lru_cache(maxsize=32)
def _hermite_nodes(n):
    import numpy as np

    z, w = np.polynomial.hermite_e.hermegauss(n)
    return z, w / np.sqrt(2.0 * np.pi)


def gauss_hermite(n, xp, dtype, device=None):
    """``n``-point Gauss–Hermite rule for E[f(Z)], Z ~ N(0, 1).

    Returns nodes ``z`` and weights ``w`` (summing to 1) with
    sum_k w_k f(z_k) exact for polynomials f of degree <= 2n - 1.
    """
    z, w = _hermite_nodes(int(n))
    return xp.asarray(z, dtype=dtype, device=device), xp.asarray(w, dtype=dtype, device=device)


def eigh(a, xp):
    """Eigenvalues (ascending) and orthonormal eigenvectors of a symmetric matrix."""
    linalg = getattr(xp, "linalg", None)
    if linalg is not None and hasattr(linalg, "eigh"):
        res = linalg.eigh(a)
        return res[0], res[1]
    import numpy as np

    w, v = np.linalg.eigh(to_numpy(a))
    return _from_numpy(w, a, xp), _from_numpy(v, a, xp)


def scatter_flat(x, mask_flat, idx, values, xp):
    """Return ``x`` (2-D, owned by the caller) with ``x.flat[idx] = values``.

    ``mask_flat`` is the flattened boolean mask whose nonzero positions, in
    row-major order, are ``idx``.  NumPy/CuPy/PyTorch assign in place; other
    namespaces go through the standard: the j-th flagged entry receives
    ``values[j]`` via ``take`` at its rank (a cumulative sum of the mask).
    """
    if array_api_compat.is_numpy_namespace(xp) or array_api_compat.is_cupy_namespace(xp) or array_api_compat.is_torch_namespace(xp):
        flat = xp.reshape(x, (-1,))
        flat[idx] = values
        return xp.reshape(flat, x.shape)
    k = idx.shape[0]
    rank = xp.cumulative_sum(xp.astype(mask_flat, xp.int64)) - 1
    rank = xp.clip(rank, 0, k - 1)
    full = xp.take(values, rank)
    return xp.reshape(xp.where(mask_flat, full, xp.reshape(x, (-1,))), x.shape)


def overflow_checked(xp):
    """Context manager: no NumPy RuntimeWarning for overflow or invalid operations inside, for a computation whose
    results the caller checks for non-finite values and refuses by name (finite or an error: the named error, not
    a warning first — which ``-W error`` would turn into the exception).  NumPy-backed namespaces (NumPy,
    array_api_strict) are affected; others raise no such warnings.  Thread-local (NumPy's errstate)."""
    import numpy as np

    del xp  # (the state is NumPy's, whatever the namespace)
    return np.errstate(over="ignore", invalid="ignore")


def single_threaded_blas(xp):
    """Context manager: BLAS calls of the NumPy namespace use one thread inside it.

    For the blocked kernels, which run one block per worker thread: each block's matmul
    would otherwise start as many BLAS threads as there are cores.  A no-op for other
    namespaces (their parallelism is not BLAS threads on the host).
    """
    import contextlib

    if not array_api_compat.is_numpy_namespace(xp):
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


_SYM_TILE = 256


def exactly_symmetric_and_finite(K, xp):
    """True if the square matrix K is certainly finite and exactly symmetric (K == Kᵀ entrywise).

    A sufficient test, never a false True: False means "not shown" (the caller then runs its full
    checks with tolerances and messages).  NumPy only (other namespaces: False).  Cost: the upper
    triangle compared with the lower in 256×256 tiles into one reused boolean buffer (the transposed
    reads stay in cache; measured 2.3 ms against 3.5 ms for the tile differences at n = 1 700),
    and one mat-vec K·1 for finiteness: a NaN or ±inf entry makes its row sum NaN or ±inf (IEEE
    arithmetic propagates them; there are no zeros in the vector to skip), so a finite K·1 proves K
    finite; a finite K whose row sums overflow answers False.  Early exit at the first unequal tile.
    """
    if not array_api_compat.is_numpy_namespace(xp):
        return False
    import numpy as np

    n = K.shape[0]
    if n == 0 or K.shape != (n, n) or K.dtype.kind != "f":
        return False
    with np.errstate(all="ignore"):  # an overflow or NaN here only means "not shown"
        if not bool(np.all(np.isfinite(K @ np.ones(n, dtype=K.dtype)))):
            return False
    t = _SYM_TILE
    buf = np.empty((min(t, n), min(t, n)), dtype=bool)
    for i in range(0, n, t):
        for j in range(i, n, t):
            a, b = K[i:i + t, j:j + t], K[j:j + t, i:i + t].T
            out = buf[:a.shape[0], :a.shape[1]]
            np.not_equal(a, b, out=out)
            if out.any():
                return False
    return True


def submatrix(A, idx, xp):
    """A[idx][:, idx] for a 1-D integer index array ``idx`` (the principal submatrix when idx has no repeats).

    CuPy and PyTorch gather both axes in one kernel (broadcast advanced indexing); NumPy and the
    others use ``take`` twice (for NumPy the faster route: 5 µs vs 12 µs at 60 of 260, row copies first).
    """
    if array_api_compat.is_cupy_namespace(xp) or array_api_compat.is_torch_namespace(xp):
        return A[idx[:, None], idx[None, :]]
    return xp.take(xp.take(A, idx, axis=0), idx, axis=1)


def lu_solve_small(A, b, xp):
    """x with A x = b by LAPACK's LU (``gesv``) for NumPy float32/64 A (square) and b (vector); None otherwise.

    The same factorisation as ``numpy.linalg.solve`` without its wrappers (17 µs vs 25 µs at 60×60; the
    active-set solvers make ~40 such solves per fit).  A singular A raises ``numpy.linalg.LinAlgError``,
    as ``numpy.linalg.solve`` does.
    """
    if not array_api_compat.is_numpy_namespace(xp):
        return None
    import numpy as np
    from scipy.linalg import lapack

    gesv = {np.dtype(np.float64): lapack.dgesv, np.dtype(np.float32): lapack.sgesv}.get(A.dtype)
    if gesv is None or b.dtype != A.dtype or b.ndim != 1:
        return None
    _, _, x, info = gesv(A, b)
    if info > 0:
        raise np.linalg.LinAlgError("Singular matrix")
    return x


def read_only(a, xp):
    """``a`` marked read-only where the library has the flag (NumPy); other arrays are returned as they are."""
    if array_api_compat.is_numpy_namespace(xp):
        a.flags.writeable = False
    return a


def cholesky_succeeds(K, shift, xp):
    """Whether LAPACK's Cholesky factorization of the symmetric K + shift·I succeeds, for a NumPy float32/64 K;
    None for other namespaces and dtypes (the caller then uses ``xp.linalg.cholesky``).

    ``potrf`` runs in place on one Fortran-ordered copy (the transpose of a C-ordered copy of a symmetric
    matrix) and only its ``info`` is read: the factor is not cleaned or returned.  Same arithmetic as
    ``numpy.linalg.cholesky`` (LAPACK's blocked potrf), measured 48 ms vs 79 ms at n = 1 700 on one thread.
    """
    if not array_api_compat.is_numpy_namespace(xp):
        return None
    import numpy as np
    from scipy.linalg import lapack

    potrf = {np.dtype(np.float64): lapack.dpotrf, np.dtype(np.float32): lapack.spotrf}.get(K.dtype)
    if potrf is None:
        return None
    n = K.shape[0]
    A = np.array(K, order="C", copy=True)
    A.flat[::n + 1] += shift
    with np.errstate(all="ignore"):
        c, info = potrf(A.T, lower=1, clean=0, overwrite_a=1)
        return info == 0 and bool(np.all(np.isfinite(np.diagonal(c))))


def frobenius_norm(K, xp):
    """‖K‖_F of a 2-D array as a Python float (inf when the sum of squares overflows, as a plain sum would).

    NumPy: one BLAS dot product of the flat array with itself (C- or Fortran-ordered K: no copy); others: the norm of
    256-row block norms (``vector_norm``; no n×n temporary).
    """
    import numpy as np

    with np.errstate(all="ignore"):  # an overflow is the documented inf (array_api_strict computes with NumPy)
        if array_api_compat.is_numpy_namespace(xp):
            flat = K.ravel(order="K")  # no copy for C- or Fortran-ordered K
            return float(np.sqrt(np.dot(flat, flat)))
        n = K.shape[0]
        blocks = xp.stack([xp.linalg.vector_norm(K[i:min(i + 256, n), :]) for i in range(0, n, 256)])
        return float(to_numpy(xp.linalg.vector_norm(blocks)))
