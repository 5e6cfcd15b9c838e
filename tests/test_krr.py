"""Kernel ridge regression by preconditioned conjugate gradients (ntkref.krr), array-API path.

The reference is the dense solve of ``machines.fit(K, y, "squared", lam)`` — an independent route to
α* = (K + (λ/2)I)⁻¹y.  The CG certificates are checked as inequalities against it: ‖α − α*‖ ≤ ‖r‖/μ and
‖β − β*‖_H ≤ beta_error_bound; the reported duality gap against machines' own P − D; the Nyström
preconditioner through its defining property (rank = n makes the preconditioned operator have at most
two distinct eigenvalues, so CG stops in ≤ 2 steps).
"""
import numpy as np
import pytest

from ntkref import kernels, krr, machines
from ntkref._validation import InvalidParameterError


def _gram(n=120, d=12, seed=0, depth=2, duplicates=0):
    rng = np.random.default_rng(seed)
    X = np.abs(rng.standard_normal((n, d)))
    if duplicates:  # repeated rows: a singular Gram
        X[-duplicates:] = X[:duplicates]
    K = kernels.fc(X, depth=depth).ntk
    y = np.sign(rng.standard_normal(n))
    return K, y


def _rkhs_dist(a, b, K):
    e = a - b
    return float(np.sqrt(max(e @ K @ e, 0.0)))


@pytest.mark.parametrize("preconditioner", ["nystrom", "jacobi", None])
@pytest.mark.parametrize("lam,reduction", [(1.0, "sum"), (1e-3, "sum"), (1e-4, "mean")])
def test_cg_matches_dense_solve_within_its_certificate(asxp, tonp, on_device, preconditioner, lam, reduction):
    K, y = _gram(duplicates=10)
    ref = machines.fit(K, y, "squared", lam, reduction=reduction)
    m = krr.solve_cg(asxp(K), asxp(y), lam, reduction=reduction, preconditioner=preconditioner, rank=40)
    on_device(m.alpha_, m.train_output_)
    assert m.converged and m.residual <= 1e-8
    alpha = tonp(m.alpha_)
    # the certificates are upper bounds on the true errors (computed from the dense solve)
    assert np.linalg.norm(alpha - ref) <= m.alpha_error_bound
    assert _rkhs_dist(alpha, ref, K) <= m.beta_error_bound * (1 + 1e-6)
    # the residual is what it says: recompute it independently on the host
    mu = (lam * (K.shape[0] if reduction == "mean" else 1)) / 2
    r = y - (K @ alpha + mu * alpha)
    # both are rounded evaluations of the same residual: each within n·eps·‖|K||α| + μ|α| + |y|‖ of it
    rounding = K.shape[0] * np.finfo(float).eps * np.linalg.norm(np.abs(K) @ np.abs(alpha) + mu * np.abs(alpha) +
                                                                np.abs(y))
    assert abs(np.linalg.norm(r) - m.residual * np.linalg.norm(y)) <= 2 * rounding
    # Kα is returned
    np.testing.assert_allclose(tonp(m.train_output_), K @ alpha, rtol=0, atol=1e-12 * np.abs(K).sum(1).max() *
                               np.abs(alpha).max())


def test_duality_gap_is_squared_residual(asxp, tonp):
    """P − D = ‖g − y + μα‖² (module docstring), checked against machines' P and D."""
    K, y = _gram(seed=3)
    lam = 0.05
    m = krr.solve_cg(asxp(K), asxp(y), lam, tol=1e-3, preconditioner=None)
    alpha = tonp(m.alpha_)
    gap = machines.objective(alpha, K, y, "squared", lam) - machines.dual_objective(alpha, K, y, "squared", lam)
    r2 = (m.residual * np.linalg.norm(y)) ** 2
    assert m.residual > 1e-5  # a loose tol, so the gap is far above rounding
    np.testing.assert_allclose(gap, r2, rtol=1e-6)
    np.testing.assert_allclose(m.duality_gap, r2, rtol=1e-12)


@pytest.mark.parametrize("duplicates", [0, 40])
def test_full_rank_nystrom_solves_in_two_steps(asxp, duplicates):
    """rank = n: K̂ = K, so M(K + μI) has eigenvalues λ_min(K̂)+μ (on range K) and μ (its complement)."""
    K, y = _gram(n=80, duplicates=duplicates, seed=5)
    m = krr.solve_cg(asxp(K), asxp(y), 1e-2, preconditioner="nystrom", rank=80, tol=1e-8)
    assert m.converged and m.n_iter <= 2
    plain = krr.solve_cg(asxp(K), asxp(y), 1e-2, preconditioner=None, tol=1e-8)
    assert plain.n_iter > 5  # the preconditioner is doing the work


def test_zero_targets_give_zero_coefficients(asxp, tonp):
    K, _ = _gram(n=30)
    m = krr.solve_cg(asxp(K), asxp(np.zeros(30)), 0.1)
    assert m.converged and m.n_iter == 0 and m.residual == 0.0
    assert np.array_equal(tonp(m.alpha_), np.zeros(30))


def test_unreachable_tolerance_warns_and_is_not_converged(asxp):
    K, y = _gram(n=60)
    with pytest.warns(machines.ConvergenceWarning):
        m = krr.solve_cg(asxp(K), asxp(y), 1e-6, preconditioner=None, max_iter=3)
    assert not m.converged and m.residual > m.tol and np.isfinite(m.residual)


def test_float32_gram(asxp, tonp):
    K, y = _gram(n=60)
    m = krr.solve_cg(asxp(K.astype(np.float32)), asxp(y.astype(np.float32)), 0.1)
    assert m.converged and m.residual <= 1e-4 and tonp(m.alpha_).dtype == np.float32
    ref = machines.fit(K, y, "squared", 0.1)
    # α for the float32-rounded K: its own certificate plus the perturbation ‖δK‖‖α‖/μ of the rounding
    perturb = np.linalg.norm(K.astype(np.float32).astype(np.float64) - K, 2) * np.linalg.norm(ref) / 0.05
    assert np.linalg.norm(tonp(m.alpha_) - ref) <= m.alpha_error_bound * 1.01 + perturb + 1e-5 * np.linalg.norm(ref)


def test_indefinite_gram_is_refused(asxp):
    n = 20
    K = -np.eye(n)
    with pytest.raises(InvalidParameterError, match="positive semidefinite"):
        krr.solve_cg(asxp(K), asxp(np.ones(n)), 0.1, preconditioner=None)


@pytest.mark.parametrize("kwargs,match", [
    ({"lam": 0.0}, "lam"), ({"lam": -1.0}, "lam"), ({"tol": 0.0}, "tol"), ({"tol": 1.5}, "tol"),
    ({"max_iter": 0}, "max_iter"), ({"rank": 0}, "rank"), ({"rank": 10**6}, "rank"),
    ({"preconditioner": "ilu"}, "preconditioner"), ({"reduction": "avg"}, "reduction"),
])
def test_bad_parameters_name_themselves(asxp, kwargs, match):
    K, y = _gram(n=20)
    args = {"lam": 0.1, **kwargs}
    lam = args.pop("lam")
    with pytest.raises(InvalidParameterError, match=match):
        krr.solve_cg(asxp(K), asxp(y), lam, **args)


def test_bad_arrays_are_refused(asxp):
    K, y = _gram(n=20)
    bad = K.copy()
    bad[0, 1] = bad[1, 0] = np.inf
    with pytest.raises(InvalidParameterError, match="'K'"):
        krr.solve_cg(asxp(bad), asxp(y), 0.1)
    with pytest.raises(InvalidParameterError, match="'y'"):
        krr.solve_cg(asxp(K), asxp(y[:-1]), 0.1)
    yn = y.copy()
    yn[0] = np.nan
    with pytest.raises(InvalidParameterError, match="'y'"):
        krr.solve_cg(asxp(K), asxp(yn), 0.1)
