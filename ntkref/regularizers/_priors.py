r"""Function-space priors, the FS-MAP objectives and the generalisation bounds (seed 003 §§1.2, 2.2).

- Proposition 2.2.3, (2.42)–(2.48): the linearised Gaussian prior N(f(X; μ), σ²JJᵀ)
  (:func:`linearized_prior`), its log-density **with** the log-det term the dissertation drops
  (:func:`gaussian_logpdf`, :func:`fs_map_log_prior`), Kolmogorov-consistent marginals (2.53)
  (:func:`gaussian_marginal`);
- (2.10)/(2.11), corrected sign: the FS-MAP and continual-learning objectives (:func:`fs_map_objective`,
  :func:`continual_learning_penalty`);
- Theorem 1.2.1 (1.19)/(1.20) and Theorem 2.2.2 (2.7) with the trace of the sample Gram matrix
  (:func:`kernel_generalization_bound`, :func:`ntk_regularized_generalization_bound`).

The checked linear algebra (``check_kernel``, ``pd_eigh``, ``quad``, …) comes from ``_rkhs``.
"""
from __future__ import annotations

import math

from .._lib.backend import device_of, namespace
from .._lib.validation import InvalidParameterError, check_array, check_int, check_real
from ._rkhs import (
    check_indices,
    check_kernel,
    check_values,
    finite,
    max_abs,
    named_rkhs_norm_sq,
    pd_eigh,
    quad,
    subset_kernel,
    sum_sq,
    with_jitter,
)


# --------------------------------------------------------------------------- FS-MAP
def linearized_prior(f_mu, jac_mu, sigma):
    r"""Linearised Gaussian function prior (seed 003 Prop. 2.2.3, eqs. (2.44), (2.47)).

    For θ ~ N(μ, σ²I_P) and f̃(X; θ) = f(X; μ) + J_μ(X)(θ − μ): f̃(X) ~ N(f(X; μ), σ²J_μJ_μᵀ).
    (The dissertation then sets the mean to 0 and evaluates J at the current θ, (2.48) — an ad-hoc step.)

    ``f_mu``: (n,); ``jac_mu``: (n, P).  Returns ``(mean (n,), cov (n, n))``, cov exactly symmetric.
    """
    caller = "linearized_prior"
    xp = namespace(f_mu, jac_mu)
    J = check_array(jac_mu, "jac_mu", caller=caller, ndim=2, xp=xp)
    m = check_values(f_mu, "f_mu", caller, J.shape[0], xp, J.dtype, ndim=1, like=J)
    sigma = check_real(sigma, "sigma", caller=caller, low=0.0, closed="neither")
    cov = (sigma * sigma) * (J @ xp.matrix_transpose(J))
    finite(cov, caller, f"σ²·J Jᵀ with 'jac_mu' (max |·| = {max_abs(J, xp):.3g}) and sigma = {sigma!r} is too large")
    return m, (cov + xp.matrix_transpose(cov)) / 2


def gaussian_logpdf(f, mean, cov, *, jitter=0.0):
    r"""log N(f; mean, cov) = −½(f − m)ᵀC⁻¹(f − m) − ½ log det(2πC), C = cov + jitter·I (seed 003 Prop. 2.2.3).

    The full density, *including* the log-determinant that the dissertation drops when it writes
    log p̃ = c·fᵀΘ⁻¹f.  C must be positive definite.  Returns a 0-d array.
    """
    return _gaussian_logpdf(f, mean, cov, jitter, "gaussian_logpdf", "cov")


def _gaussian_logpdf(f, mean, cov, jitter, caller, cov_name):
    xp = namespace(f, mean, cov)
    C = with_jitter(check_kernel(cov, cov_name, caller, xp), jitter, caller, xp)
    n = C.shape[0]
    f = check_values(f, "f", caller, n, xp, C.dtype, ndim=1, like=C)
    m = check_values(mean, "mean", caller, n, xp, C.dtype, ndim=1, like=C) if mean is not None else None
    w, V = pd_eigh(C, cov_name, caller, xp)
    r = f if m is None else f - m
    proj = xp.matrix_transpose(V) @ r
    value = -0.5 * quad(proj, w, xp) - 0.5 * (n * math.log(2 * math.pi) + xp.sum(xp.log(w)))
    what = "'f'" if m is None else "'f' − 'mean'"
    return finite(value, caller, f"{what} (max |·| = {max_abs(r, xp):.3g}) is too large for the inverse of "
                                  f"{cov_name!r} (λ_min = {float(xp.min(w)):.3g})")


def fs_map_log_prior(f, kernel, sigma, *, include_logdet=True, jitter=0.0):
    r"""The FS-MAP log-prior log p̃(f(X_𝓘)) of (2.48): f ~ N(0, σ²Θ(X_𝓘, X_𝓘)) (seed 003 §2.2.2).

    = −f ᵀΘ⁻¹f/(2σ²) − ½ log det(2πσ²Θ).  ``include_logdet=False`` gives the dissertation's expression
    c·fᵀΘ⁻¹f with c = −1/(2σ²) (the θ-dependent log-det dropped).  Hence the regulariser
    fᵀΘ⁻¹f = −2σ²(log p̃ + ½ log det(2πσ²Θ)).  Returns a 0-d array.

    When is the dropped log-det a constant?  Under Prop. 2.2.3 as literally stated, J (hence Θ = JJᵀ) is
    evaluated at the prior mean μ: Θ does not depend on the current parameters and −½ log det(2πσ²Θ) is a
    constant of the objective (dropping it changes nothing).  In (2.48) and Algorithm 1, Θ̂(θ) is the
    empirical NTK at the **current** θ: then ½ log det Θ̂(θ) varies with θ and dropping it changes the
    objective (tested: it differs between parameter points, and by the amount numpy's slogdet gives).
    """
    caller = "fs_map_log_prior"
    sigma = check_real(sigma, "sigma", caller=caller, low=0.0, closed="neither")
    xp = namespace(f, kernel)
    Th = check_kernel(kernel, "kernel", caller, xp)
    if not include_logdet:
        value = -named_rkhs_norm_sq(f, Th, jitter, caller, "f", "kernel") / (2 * sigma * sigma)
        return finite(value, caller, f"'f' is too large for the inverse of σ²·'kernel' (sigma = {sigma!r})")
    return _gaussian_logpdf(f, None, (sigma * sigma) * Th, (sigma * sigma) * check_real(
        jitter, "jitter", caller=caller, low=0.0), caller, "kernel")


def gaussian_marginal(mean, cov, indices):
    """Marginal of N(mean, cov) on the coordinates ``indices``: (mean[I], cov[I, I]) (seed 003 (2.53)).

    Kolmogorov consistency: the marginal of the prior built on X_𝓘 equals the prior built on X_𝓙 ⊂ X_𝓘.
    ``mean`` (n,), ``cov`` (n, n), ``indices`` b distinct integers in [0, n): the result, ((b,), (b, b)), has
    the sub-batch's length b, not n — it is what the sub-batch penalty of (2.48)/Algorithm 1 uses.
    """
    caller = "gaussian_marginal"
    xp = namespace(mean, cov)
    C = check_kernel(cov, "cov", caller, xp)
    m = check_values(mean, "mean", caller, C.shape[0], xp, C.dtype, ndim=1, like=C)
    idx_np = check_indices(indices, C.shape[0], caller)
    idx = xp.asarray(idx_np, dtype=xp.int64, device=device_of(C))
    return xp.take(m, idx), subset_kernel(C, idx[None, :], xp)[0, ...]


def continual_learning_penalty(f_new, f_old, kernel_old, *, jitter=0.0):
    r"""Δf(C)ᵀΘ_{s−1}(C, C)⁻¹Δf(C), Δf = f_{θ_s}(C) − f_{θ_{s−1}}(C) on the coreset C (seed 003 eq. (2.11)).

    Θ_{s−1} is the tangent kernel frozen after task s − 1.  Zero when the function does not change.
    """
    caller = "continual_learning_penalty"
    xp = namespace(f_new, f_old, kernel_old)
    Th = check_kernel(kernel_old, "kernel_old", caller, xp)
    a = check_values(f_new, "f_new", caller, Th.shape[0], xp, Th.dtype, ndim=1, like=Th)
    b = check_values(f_old, "f_old", caller, Th.shape[0], xp, Th.dtype, ndim=1, like=Th)
    return named_rkhs_norm_sq(a - b, Th, jitter, caller, "f_new", "kernel_old", f_desc="'f_new' − 'f_old'")


def fs_map_objective(f, y, f_penalty, kernel, tau, *, noise_std=1.0, printed=False, jitter=0.0):
    r"""FS-MAP objective with a Gaussian likelihood (seed 003 eqs. (2.10), (2.11), to be **minimised**).

    Corrected:  −Σᵢ log p(yᵢ | f(xᵢ)) + τ·f_pᵀΘ⁻¹f_p,  −log p = (y − f)²/(2s²) + ½ log(2πs²),
    with f_p = f(X_𝓘) for (2.10) or Δf(C) for (2.11) (:func:`continual_learning_penalty`).

    Shapes: ``f`` and ``y`` are (N,) (the likelihood's points); ``f_penalty`` is (b,) and ``kernel``
    (b, b) — the penalty's points, which may be a sub-batch X_𝓘 (b < N) or a coreset C, so f_p need not
    have f's length.  With the full batch (f_p = f, Θ = K) and τ = :func:`tau_from_zeta` (ζ, N, noise_std=s),
    the objective is N/(2s²) times (2.4) plus a constant: its minimiser is K(K + ζNI)⁻¹Y (tested).

    **Seed error**: (2.10) and (2.11) are printed with +Σ log p; minimising that pushes f *away* from
    the labels (``printed=True`` evaluates it: its stationary point is Θ(Θ − 2τs²I)⁻¹Y instead of the
    KRR/MAP solution Θ(Θ + 2τs²I)⁻¹Y, and it is unbounded below when τ < λ_max(Θ)/(2s²)).
    Returns a 0-d array.
    """
    caller = "fs_map_objective"
    xp = namespace(f, y, f_penalty, kernel)
    f = check_array(f, "f", caller=caller, ndim=1, xp=xp)
    y = check_values(y, "y", caller, f.shape[0], xp, f.dtype, ndim=1, like=f)
    tau = check_real(tau, "tau", caller=caller, low=0.0)
    s = check_real(noise_std, "noise_std", caller=caller, low=0.0, closed="neither")
    nll = sum_sq(y - f, xp) / (2 * s * s) + 0.5 * f.shape[0] * math.log(2 * math.pi * s * s)
    finite(nll, caller, f"'y' − 'f' (max |·| = {max_abs(y - f, xp):.3g}) is too large for noise_std = {s!r}")
    pen = named_rkhs_norm_sq(f_penalty, kernel, jitter, caller, "f_penalty", "kernel")
    return finite((-nll if printed else nll) + tau * pen, caller,
                   "the likelihood term plus tau times the penalty of 'f_penalty'")


# --------------------------------------------------------------------------- generalisation bounds
def _trace(gram_trace, n, caller):
    if hasattr(gram_trace, "shape") and len(gram_trace.shape) == 2:
        G = check_kernel(gram_trace, "gram_trace", caller, n=n)  # the N×N sample Gram matrix, nothing else
        xp = namespace(G)
        return float(xp.sum(G * xp.eye(G.shape[0], dtype=G.dtype, device=device_of(G))))
    return check_real(gram_trace, "gram_trace", caller=caller, low=0.0)


def kernel_generalization_bound(n, delta, *, r, Lam, gram_trace=None):
    r"""Theorem 1.2.1 (Mohri et al. 2012, Thm 10.7) as printed in seed 003 eqs. (1.19), (1.20).

    (1.19): 8r²Λ²/√N · (1 + ½√(log(1/δ)/2)) (``gram_trace=None``);
    (1.20): 8r²Λ²/√N · (√(Tr K/(N r²)) + ¾√(log(2/δ)/2)), Tr K the trace of the **sample** Gram matrix
    K(X, X) (a number, or the (N, N) matrix itself; a matrix of another shape is refused).  Requires
    K(x, x) ≤ r², so Tr K ≤ N r² (checked).  The Tr K term is 8rΛ·(Λ√(Tr K)/N), 8rΛ times the bound
    Λ√(Tr K)/N on the empirical Rademacher complexity (Λ/N)·E_ε√(εᵀKε) of the ball ‖f‖_H ≤ Λ, which is
    itself ≥ Λ√(Tr K)/(N√2) (Khintchine–Kahane): it scales as N^{-1/2} (tested by Monte Carlo).
    Returns the bound on R(h) − R̂(h) (a float).
    """
    caller = "kernel_generalization_bound"
    n = check_int(n, "n", caller=caller, low=1)
    delta = check_real(delta, "delta", caller=caller, low=0.0, high=1.0, closed="neither")
    r = check_real(r, "r", caller=caller, low=0.0, closed="neither")
    Lam = check_real(Lam, "Lam", caller=caller, low=0.0)
    lead = 8.0 * r * r * Lam * Lam / math.sqrt(n)
    if gram_trace is None:
        return lead * (1.0 + 0.5 * math.sqrt(math.log(1.0 / delta) / 2.0))
    tr = _trace(gram_trace, n, caller)
    if tr > n * r * r * (1 + 1e-12):
        raise InvalidParameterError(
            f"gram_trace of {caller} = {tr:.6g} exceeds N·r² = {n * r * r:.6g}: the theorem needs K(x, x) ≤ r²."
        )
    return lead * (math.sqrt(tr / (n * r * r)) + 0.75 * math.sqrt(math.log(2.0 / delta) / 2.0))


def ntk_regularized_generalization_bound(n, delta, *, Lam, C1, gram_trace, eps=0.0, C0=0.0, kappa=1.0, c=0.0):
    r"""Theorem 2.2.2 / 2.6.4 (seed 003 eq. (2.7)) with the sample Gram trace.

    R(f_nr) − R̂(f_nr) ≤ 4(C₀κ + c)ε + 8C₁²Λ²/√N · (√(C_K/(N C₁²)) + ¾√(log(2/δ)/2)),

    where ε is Theorem 2.2.1's gap, r = C₁ and **C_K = Tr 𝒦(X, X), the trace of the N×N sample Gram
    matrix** (≈ N·E𝒦(x, x)), as in the theorem the proof invokes ((1.20), Mohri Thm 10.7).  **Seed error**:
    the dissertation takes C_K = Tr(𝒦) as an operator trace, an O(1) constant; the cited theorem does not
    support that, and it makes the complexity term √N too small.  Λ bounds ‖f‖_H; for KRR,
    Λ² ≤ ‖Y‖²/(4ζN) (:func:`krr_norm_bound`).  Returns a float.
    """
    caller = "ntk_regularized_generalization_bound"
    C1 = check_real(C1, "C1", caller=caller, low=0.0, closed="neither")  # r = C₁ of (1.20): checked by its name here
    eps = check_real(eps, "eps", caller=caller, low=0.0)
    C0 = check_real(C0, "C0", caller=caller, low=0.0)
    kappa = check_real(kappa, "kappa", caller=caller, low=0.0)
    c = check_real(c, "c", caller=caller, low=0.0)
    return 4.0 * (C0 * kappa + c) * eps + kernel_generalization_bound(n, delta, r=C1, Lam=Lam, gram_trace=gram_trace)
