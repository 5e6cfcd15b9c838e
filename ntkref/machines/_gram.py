"""Gram matrices for the kernel machines: checks (finite, square, symmetric, positive semidefinite) and
:class:`CheckedGram`, a Gram checked once for many fits.

Symmetric to max|K − Kᵀ| ≤ √eps·max|K| (then symmetrised); positive semidefinite to λ_min(K) ≥ −δ,
δ = n·eps·‖K‖_F, by a Cholesky certificate of K + δI or a one-sided Lanczos test (:func:`refuse_indefinite`, with
the bounds).  :mod:`ntkref.machines` documents the conventions and re-exports ``checked_gram`` and ``CheckedGram``.
Also the small array helpers of the solvers: :func:`read` (device scalars in one host copy), :func:`machine_eps`,
:func:`eye`, :func:`cholesky_ok`.

:func:`check_gram` is also used by :mod:`ntkref.krr` and :mod:`ntkref.bounds`; ``PSD_METHODS``,
:func:`lanczos_test` (it takes a mat-vec operator) and ``LANCZOS_STEPS`` are also used by the Dask engine
(ntkref/_engines/dask/_machines.py), whose solvers share the Lanczos test.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .._lib import dispatch
from .._lib import compat as _compat
from .._lib.backend import device_of, is_array, is_numpy_namespace, namespace, to_numpy
from .._lib.validation import InvalidParameterError, check_array, check_square
from ..certify import _checks

__all__ = ["CheckedGram", "checked_gram"]

def read(xp, *values):
    """Device scalars (0-d arrays, bools or numbers) as Python floats, in ONE host copy.

    The solvers' decisions (a ratio, a count, a test) are host reads; on a GPU each is a
    synchronisation, so every iteration stacks what it needs and reads it once.
    """
    if is_numpy_namespace(xp):  # already on the host: no copy to batch
        return [float(v) for v in values]
    arrays = [v for v in values if is_array(v)]
    if not arrays:
        return [float(v) for v in values]
    ref = arrays[0]
    dt = xp.float64 if ref.dtype == xp.float64 else xp.float32
    dev = device_of(ref)
    parts = [xp.astype(v, dt) if is_array(v) else xp.asarray(float(v), dtype=dt, device=dev) for v in values]
    return to_numpy(xp.stack([xp.reshape(p, ()) for p in parts])).tolist()



def machine_eps(dtype, xp):
    return float(xp.finfo(dtype).eps)


def check_gram(K, caller, *, psd=True, xp=None, name="K"):
    """Square, finite, symmetric (then symmetrised) and, if ``psd``, PSD Gram matrix (``name`` in messages).

    ``psd``: False, True (the certified Cholesky test), or a method of :func:`refuse_indefinite`; anything else
    is refused, naming ``check_psd`` (the public parameter it comes from), before K is read.
    A :class:`CheckedGram` is not checked again (only a stronger PSD test than the one it passed runs).
    """
    check_psd_option(psd, caller)
    if isinstance(K, CheckedGram):
        upgrade_psd(K, "cholesky" if psd is True else psd_method(psd, K.shape[0], caller), caller, name)
        return K.K
    K = check_array(K, name, caller=caller, ndim=2, xp=xp, finite=False)
    xp = namespace(K)
    n = check_square(K, name, caller)
    if _compat.exactly_symmetric_and_finite(K, xp):  # the common case (NumPy), in ~half the time
        if psd:
            refuse_indefinite(K, caller, name, method="cholesky" if psd is True else psd_method(psd, n, caller))
        return K
    eps = machine_eps(K.dtype, xp)
    # max|K − Kᵀ| over 256×256 tiles of the upper triangle: a whole transposed copy reads
    # memory with stride n and is ~4× slower at n = 2000.  The tile maxima stay on the device and
    # are read with max|K| in one host copy (one synchronisation, not two per tile).  Finiteness
    # comes with them: a NaN or ±inf entry makes max K, −min K or a tile difference NaN or inf.
    parts = [xp.max(K), -xp.min(K)]
    for i in range(0, n, _TILE):
        for j in range(i, n, _TILE):
            ie, je = min(i + _TILE, n), min(j + _TILE, n)  # in-bounds stops (array API)
            tile = K[i:ie, j:je] - xp.matrix_transpose(K[j:je, i:ie])
            parts += [xp.max(tile), -xp.min(tile)]
    host = to_numpy(xp.stack(parts)).tolist()
    if not all(math.isfinite(v) for v in host):
        raise InvalidParameterError(f"The {name!r} parameter of {caller} contains NaN or infinite values.")
    scale = max(host[0], host[1])
    asym = max(0.0, *host[2:])
    if asym > math.sqrt(eps) * scale:
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} must be symmetric: max|K - K^T| = {asym:.3g} exceeds "
            f"sqrt(eps)*max|K| = {math.sqrt(eps) * scale:.3g}."
        )
    if asym > 0:
        K = (K + xp.matrix_transpose(K)) / 2
    if psd:
        refuse_indefinite(K, caller, name, method="cholesky" if psd is True else psd_method(psd, n, caller))
    return K


_TILE = 256
PSD_METHODS = ("auto", "cholesky", "lanczos")
_CHOLESKY_MAX_N = 4096  # "auto": the Cholesky certificate up to this n, the Lanczos test above
LANCZOS_STEPS = 40


def check_psd_option(check_psd, caller, options=(True, False) + PSD_METHODS):
    """Refuse a ``check_psd`` that is not one of its documented values ``options`` (the bools True and False
    themselves — not None, 0, 1 or 1.5, which ``==`` would match or which would silently mean "no test" — and the
    method names), with the one message template naming ``check_psd``; returns it."""
    if not any(check_psd is o if isinstance(o, bool) else (isinstance(check_psd, str) and check_psd == o)
               for o in options):
        raise InvalidParameterError(
            f"The 'check_psd' parameter of {caller} must be one of {', '.join(repr(o) for o in options)}. "
            f"Got {check_psd!r} instead.")
    return check_psd


def psd_method(check_psd, n, caller):
    """The PSD test ``check_psd`` selects for an n×n K: None (no test), 'cholesky' or 'lanczos'; any value but
    True, False, "auto", "cholesky", "lanczos" is refused (:func:`check_psd_option`)."""
    check_psd_option(check_psd, caller)
    if check_psd is False:
        return None
    if check_psd is True or check_psd == "auto":
        return "cholesky" if n <= _CHOLESKY_MAX_N else "lanczos"
    return check_psd


def refuse_indefinite(K, caller, name="K", method="cholesky", refuse=True):
    r"""Refuse an indefinite K: λ_min(K) below −δ, δ = n·eps·‖K‖_F.

    ``method="cholesky"`` (a certificate, O(n³/3)): first Rump's test (:func:`ntkref.certify._checks.prove_psd`):
    if the Cholesky factorization of K − cI succeeds (c the a-priori bound γ_{n+2}/(1 − 2γ_{n+2})·tr K + underflow),
    K ≻ 0 is proven and the return value is 0.0 (also for K = 0 exactly, tested entry by entry: K ⪰ 0; ‖K‖_F is
    recomputed on K scaled by a power of two where the squares of its entries underflow, so a tiny nonzero K is
    never mistaken for 0).  Otherwise K is accepted iff the Cholesky factorization of
    K + δI succeeds (it accepts every K with λ_min(K) ≥ −δ + O(n·eps·‖K‖) and refuses every K with
    λ_min(K) < −δ − O(n·eps·‖K‖)), and the return value is the proven margin μ: λ_min(K) > −μ (μ ≈ δ; an exactly
    singular Gram cannot be proven PSD by floating-point Cholesky).  Returns math.inf for the Lanczos test (no
    proof).

    ``method="lanczos"`` (a one-sided test, ``LANCZOS_STEPS`` = 40 mat-vecs, O(40·n²)): k Lanczos
    steps with full reorthogonalisation from a fixed pseudo-random start give the smallest Ritz value
    θ ≥ λ_min(K) and its Ritz vector u; K is refused iff the Rayleigh quotient uᵀKu/uᵀu, recomputed
    with one more mat-vec, is below −δ.  A refusal is a proof (|fl(uᵀKu) − uᵀKu| ≤ n·eps·‖K‖_F·‖u‖²
    = δ‖u‖², so uᵀKu < 0: K is indefinite); a PSD K is never refused.  Acceptance is not a proof: an
    indefinite K with λ_min(K) = −μ, μ > δ, passes with probability at most
    1.648·√n·exp(−(2k − 1)·√((μ − δ)/(λ_max(K) + μ))) over a start vector uniform on the sphere
    (Kuczyński & Woźniakowski 1992, Thm. 4.2(a), applied to λ_max(K)·I − K), e.g. ≤ 1e-6 for n = 20 000
    when μ ≥ 0.064·(λ_max + μ); in practice the extreme Ritz values converge far faster than this
    worst case (isolated negative eigenvalues are found in a few steps).  The start is fixed (seed 0),
    so the bound holds for K chosen independently of it.

    A K whose Frobenius norm overflows (entries near the float maximum) is refused as such, not
    reported as indefinite.  ``refuse=False`` (a K whose margin is already proven otherwise,
    :func:`~ntkref.machines.kernel_gram`): Rump's margin, or inf where the tests fail, instead of an error.
    """
    xp = namespace(K)
    n = K.shape[0]
    eps = machine_eps(K.dtype, xp)
    fro = _checks.frobenius_norm(K, xp)  # no n×n temporary (but where the squares underflow: then scaled)
    if not math.isfinite(fro):
        if not refuse:
            return math.inf
        kmax, = read(xp, xp.max(xp.abs(K)))  # (an n×n temporary: only for the message)
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} is too large: its Frobenius norm cannot be computed in {K.dtype} "
            "(the squares of its entries overflow) "
            f"(max|K| = {kmax:.3g}); rescale it."
        )
    if fro == 0.0:  # K = 0 exactly (the norm is recomputed scaled where the squares underflow): K ⪰ 0, proven
        return 0.0
    delta = n * eps * fro
    if method == "cholesky":
        proven, margin = _checks.prove_psd(K, xp, validate_shift=delta)  # Rump's test first: K ≻ 0 proven
        if not math.isfinite(margin) and refuse:
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller} must be positive semidefinite: its smallest eigenvalue is below "
                f"-n*eps*||K||_F = {-delta:.3g} (Cholesky of K + {delta:.3g} I failed). A kernel machine's "
                "objective is not convex for an indefinite K."
            )
        return margin
    lanczos_test(lambda v: K @ v, K, min(n, LANCZOS_STEPS), delta, xp, name, caller)
    return math.inf


def lanczos_test(matvec, like, k, delta, xp, name, caller):
    """Refuse K (an error naming ``name``) if k Lanczos steps of ``matvec`` find uᵀKu/uᵀu < −δ (see
    :func:`refuse_indefinite`); ``like`` gives the vectors' namespace, dtype and device (K itself for a dense K, a host
    float64 array for the Dask operator)."""
    rho = _lanczos_min(matvec, like, k, delta, xp)
    if rho < -delta:
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} must be positive semidefinite: Lanczos found a vector u with "
            f"u^T K u / u^T u = {rho:.3g} < -n*eps*||K||_F = {-delta:.3g}, so K has a negative eigenvalue. A kernel "
            "machine's objective is not convex for an indefinite K."
        )


def _lanczos_min(matvec, like, k, delta, xp):
    """Rayleigh quotient uᵀKu/uᵀu of the smallest Ritz vector u after ≤ k Lanczos steps of the symmetric operator
    ``matvec`` (see :func:`refuse_indefinite`); vectors of ``like``'s length, dtype and device, in namespace ``xp``.

    The Krylov basis and the mat-vecs stay on that device; the host holds the k×k tridiagonal matrix
    (O(k²)) and reads two scalars a step.  Stops early once a Ritz value is below −δ or the Krylov space
    is invariant.
    """
    import numpy as np

    n = like.shape[0]
    dev = device_of(like)
    v = np.random.default_rng(0).standard_normal(n)
    v = xp.asarray(v / np.linalg.norm(v), dtype=like.dtype, device=dev)
    V = xp.reshape(v, (1, n))
    diag, off = [], []
    theta, s = None, None
    for j in range(k):
        w = matvec(v)
        c = V @ w  # full reorthogonalisation, twice (classical Gram–Schmidt is stable when repeated)
        w = w - c @ V
        c2 = V @ w
        w = w - c2 @ V
        a_j, b_j, wn = read(xp, c[j] + c2[j], xp.linalg.vector_norm(w), xp.max(xp.abs(w)))
        diag.append(a_j)
        T = np.diag(diag) + np.diag(off, 1) + np.diag(off, -1)
        evals, evecs = np.linalg.eigh(T)
        theta, s = evals[0], evecs[:, 0]
        if theta < -delta or j == k - 1 or not b_j > 1e-12 * max(abs(x) for x in diag) or not wn > 0:
            break
        off.append(b_j)
        v = w / b_j
        V = xp.concat([V, xp.reshape(v, (1, n))], axis=0)
    u = xp.asarray(s, dtype=like.dtype, device=dev) @ V
    num, den = read(xp, u @ matvec(u), u @ u)
    return num / den


def eye(n, like, xp):
    return xp.eye(n, dtype=like.dtype, device=device_of(like))


def cholesky_ok(K, shift, xp):
    """Whether K + shift·I is numerically positive definite (Cholesky succeeds)."""
    ok = _compat.cholesky_succeeds(K, shift, xp)
    if ok is not None:
        return ok
    try:
        L = xp.linalg.cholesky(K + shift * eye(K.shape[0], K, xp))
    except Exception:  # numpy/array_api_strict raise LinAlgError, torch its own error
        return False
    # CuPy returns NaN instead of raising; any backend: a factor is only a success with a finite L and a
    # positive diagonal (cheap, and backend-agnostic)
    return bool(xp.all(xp.isfinite(L))) and bool(xp.all(xp.linalg.diagonal(L) > 0))


_PSD_STRENGTH = {None: 0, "lanczos": 1, "error_bound": 2, "cholesky": 3}  # error_bound: machines.kernel_gram


_CHECKED = object()  # the private token of checked_gram: a CheckedGram exists only as its result


@dataclass(frozen=True, repr=False, eq=False)
class CheckedGram:
    """A Gram matrix validated once, for many fits (a λ sweep): made by :func:`checked_gram`.

    The machines (:func:`~ntkref.machines.solve`, :func:`~ntkref.machines.fit`, :func:`~ntkref.machines.hard_margin_svm`, the
    objectives, :func:`~ntkref.machines.rkhs_norm`)
    and :mod:`ntkref.kkt` accept it wherever they take ``K`` and do not check it again; they run a PSD test
    only when they ask for a stronger one than ``psd_test`` (None < "lanczos" < "cholesky").

    Attributes
    ----------
    K : array, shape (n, n)
        ntkref's own copy of the validated Gram (finite, symmetric: symmetrised if it was within the
        tolerance), on the input's device; read-only for NumPy.  Do not modify it: the checks would no
        longer describe it.
    psd_test : {"cholesky", "error_bound", "lanczos"} or None
        The PSD test it passed (``check_psd`` of :func:`checked_gram`, "auto" resolved by n; "error_bound": the
        margin proven from the kernel's error bound by :func:`~ntkref.machines.kernel_gram`).
    psd_margin : float
        What is proven about λ_min(K) (:func:`refuse_indefinite`, or :func:`~ntkref.machines.kernel_gram`): 0.0 =
        K ⪰ 0 proven (K ≻ 0 by Rump's test, or K = 0 exactly), μ > 0 = λ_min(K) > −μ proven (the machines'
        certificates account for it), inf = nothing proven (the Lanczos test, or none; the certificates then
        assume K ⪰ 0).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import kernels, machines
    >>> K = kernels.fc(np.random.default_rng(0).standard_normal((20, 3))).ntk
    >>> G = machines.checked_gram(K)                  # n ≤ 4096: the Cholesky certificate
    >>> G
    CheckedGram(shape=(20, 20), dtype=float64, psd_test='cholesky')
    >>> G.K is K, bool(np.array_equal(G.K, K))        # its own copy of K
    (False, True)
    """

    K: object
    psd_test: object
    _token: object = field(default=None, repr=False)
    psd_margin: float = math.inf
    _ntkref_checked_gram = True  # (class attribute) lets array validation name it

    def __post_init__(self):
        if self._token is not _CHECKED:
            raise TypeError("A CheckedGram is made by machines.checked_gram(K), which runs the checks it vouches for.")

    @property
    def shape(self):
        return tuple(self.K.shape)

    @property
    def dtype(self):
        return self.K.dtype

    def __repr__(self):
        return f"CheckedGram(shape={self.shape}, dtype={self.dtype}, psd_test={self.psd_test!r})"


def checked_gram(K, *, check_psd=True):
    """Validate a Gram matrix once (finite, square, symmetric, PSD test) for repeated fits.

    The checks of :func:`~ntkref.machines.solve` cost more than an SVM solve on a few thousand points (at n = 1 700:
    ~3 ms for finiteness and symmetry, 40–80 ms for the Cholesky certificate, against ~5 ms for the
    solve), so a λ sweep or a comparison of losses on one Gram pays them once::

        G = machines.checked_gram(K)            # the default checks, once
        fits = [machines.fit(G, y, "hinge", lam) for lam in (1.0, 0.1, 0.01)]

    Parameters
    ----------
    K : array, shape (n, n)
        The Gram matrix (the module docstring gives the tolerances).
    check_psd : bool or {"auto", "cholesky", "lanczos"}
        The PSD test, as in :func:`~ntkref.machines.solve` (default True = "auto": the Cholesky certificate for
        n ≤ 4096, the Lanczos test above; False: none).  Any other value (None included) is refused.

    Returns
    -------
    CheckedGram
        Holding a private copy of the validated K (n² more memory, once), so later changes to the
        caller's array do not invalidate the checks.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import kernels, machines
    >>> X = np.random.default_rng(0).standard_normal((20, 3))
    >>> y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> G = machines.checked_gram(kernels.fc(X).ntk)  # the checks run once, for three fits
    >>> norms = [machines.rkhs_norm(machines.fit(G, y, "hinge", lam), G) for lam in (1.0, 0.1, 0.01)]
    >>> print(" ".join(f"{v:.4f}" for v in norms))   # ‖β*‖ grows as λ shrinks
    2.5178 5.2308 5.5050
    """
    caller = "machines.checked_gram"
    check_psd_option(check_psd, caller)  # first: a Dask K's refusal below must not hide a bad check_psd
    if isinstance(K, CheckedGram):
        method = psd_method(check_psd, K.shape[0], caller)
        margin = upgrade_psd(K, method, caller, "K")
        return K if _PSD_STRENGTH[method] <= _PSD_STRENGTH[K.psd_test] else CheckedGram(K.K, method, _CHECKED,
                                                                                          psd_margin=margin)
    engine = dispatch.checked_gram.lookup(K)
    if engine is not None:  # a Dask K: the engine answers (it refuses: its solvers validate block by block)
        return engine(K, check_psd=check_psd)
    K_in = K
    K = check_gram(K, caller, psd=False)
    method = psd_method(check_psd, K.shape[0], caller)
    margin = refuse_indefinite(K, caller, method=method) if method else math.inf
    xp = namespace(K)
    if K is K_in or not is_numpy_namespace(xp) or getattr(K, "base", None) is not None:
        K = xp.asarray(K, copy=True)  # ntkref's own copy
    return CheckedGram(_compat.read_only(K, xp), method, _CHECKED, psd_margin=margin)


def upgrade_psd(G, method, caller, name):
    """Run the PSD test ``method`` on a CheckedGram if it is stronger than the one it passed; returns the proven
    margin of :func:`refuse_indefinite` (the CheckedGram's own when no test runs)."""
    if _PSD_STRENGTH[method] > _PSD_STRENGTH[G.psd_test]:
        if G.psd_test == "error_bound":
            # λ_min(K) > −μ is already proven (machines.kernel_gram): Rump's test may only improve it, never refuse
            # K (a float Gram within its proven margin of PSD can fail the Cholesky of K + n·eps·‖K‖_F·I)
            return min(refuse_indefinite(G.K, caller, name, method=method, refuse=False), G.psd_margin)
        return refuse_indefinite(G.K, caller, name, method=method)
    return G.psd_margin
