"""``machines.kernel_gram``: an FC Gram whose PSD margin is proven from the kernel's error bound (O(n²)).

Theorem under test (ntkref/machines/_kernel_gram.py): λ_min(K̃) > −μ for the float Gram K̃ = fc(x, error_bound=True)
and μ ≈ the largest row sum of its per-entry bound (the exact kernel is PSD; Weyl).  Independent route: the
eigenvalues of K̃ itself, at 50 digits (mpmath), on near-singular Grams (duplicated, proportional, antipodal and
near-parallel rows) where Rump's Cholesky test cannot prove K ≻ 0 and erf's float Gram is genuinely indefinite.
Also: the margin is not vacuous, the solvers use it (no O(n³) test above n = 4096, the smaller margin where Rump's
test also runs), devices, and refusals naming the parameter.
"""

import math

import mpmath as mp
import numpy as np
import pytest

from ntkref import machines
from ntkref._lib.validation import InvalidParameterError
from ntkref.certify._checks import prove_psd
from ntkref.machines import _gram

CONFIGS = [dict(depth=2), dict(depth=3, b_std=0.2), dict(depth=1, activation="erf", b_std=0.3),
           dict(depth=2, W_std=[1.5, 0.8, 1.2], b_std=[0.0, 0.4, 0.1], get="nngp")]


def _near_singular(seed, n=10, d=4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X[1] = X[0]                                     # duplicated: K singular
    X[2] = 2.0 * X[3]                               # proportional: singular for the homogeneous ReLU kernel
    X[4] = -3.0 * X[5]                              # antipodal
    X[6] = X[7] + 1e-9 * rng.standard_normal(d)     # near-parallel
    return X


def _lambda_min_mp(K):
    with mp.workdps(50):
        A = mp.matrix([[mp.mpf(float(v)) for v in row] for row in K])
        return min(mp.eigsy(A, eigvals_only=True))  # error ~1e-50·‖K‖: far below the margins tested


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_the_margin_bounds_the_smallest_eigenvalue_at_50_digits(cfg):
    negative = 0
    for seed in range(6):
        G = machines.kernel_gram(_near_singular(seed), **cfg)
        K = np.asarray(G.K)
        lmin = _lambda_min_mp(K)
        assert lmin + mp.mpf(10) ** -40 > -G.psd_margin, (seed, float(lmin), G.psd_margin)
        assert 0 < G.psd_margin < 1e-11 * float(np.max(np.diag(K)))  # not vacuous: ~n·1e-14 of the diagonal
        negative += lmin < -mp.mpf(10) ** -30
    if cfg.get("activation") == "erf":
        assert negative >= 3  # erf's float Gram is indefinite at the rounding level: the margin is needed


def test_rump_cannot_prove_these_grams_but_the_margin_holds():
    G = machines.kernel_gram(_near_singular(2), depth=1, activation="erf", b_std=0.3)
    proven, _ = prove_psd(np.asarray(G.K), np)
    assert not proven  # a singular (here: indefinite) float Gram: no Cholesky proof of K ≻ 0
    assert _lambda_min_mp(np.asarray(G.K)) < 0 < G.psd_margin


def test_the_solvers_use_the_margin_without_a_cubic_test(monkeypatch):
    X = _near_singular(0, n=40, d=3)
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    G = machines.kernel_gram(X, depth=2)
    monkeypatch.setattr(_gram, "_CHOLESKY_MAX_N", 10)  # as for n > 4096: "auto" is the Lanczos test
    calls = []
    real = _gram.refuse_indefinite
    monkeypatch.setattr(_gram, "refuse_indefinite", lambda *a, **k: calls.append(k.get("method")) or real(*a, **k))
    m = machines.solve(G, y, "hinge", 0.1)
    assert m.converged and m.psd_margin == G.psd_margin and calls == []  # proven, no factorization
    plain = machines.solve(np.asarray(G.K).copy(), y, "hinge", 0.1)
    assert math.isinf(plain.psd_margin) and calls == ["lanczos"]  # the plain K: Lanczos, nothing proven


def test_rump_where_it_runs_and_the_smaller_margin_is_kept():
    X = np.random.default_rng(1).standard_normal((30, 3))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    G = machines.kernel_gram(X, depth=1)
    m = machines.solve(G, y, "squared_hinge", 0.1)  # n ≤ 4096: check_psd=True runs Rump's test too
    assert m.psd_margin == 0.0  # distinct rows: K ≻ 0 proven, smaller than the error-bound margin
    Gs = machines.kernel_gram(_near_singular(3, n=30, d=3), depth=1)
    ms = machines.solve(Gs, y, "squared_hinge", 0.1)
    assert 0 < ms.psd_margin <= Gs.psd_margin  # Rump's margin, if smaller, else the error bound's
    assert machines.checked_gram(Gs, check_psd="cholesky").psd_margin == ms.psd_margin
    assert machines.checked_gram(Gs, check_psd="lanczos") is Gs  # weaker: nothing re-run


def test_krr_takes_it():
    from ntkref import krr

    X = _near_singular(4, n=25, d=3)
    y = X[:, 0].copy()
    G = machines.kernel_gram(X, depth=2)
    r = krr.solve_cg(G, y, 0.5, check_psd=False)
    assert r.psd_margin == G.psd_margin


def test_on_every_backend(asxp, tonp):
    X = _near_singular(5)
    ref = machines.kernel_gram(X, depth=2, b_std=0.1)
    G = machines.kernel_gram(asxp(X), depth=2, b_std=0.1)
    from ntkref import kernels

    np.testing.assert_array_equal(tonp(G.K), tonp(kernels.fc(asxp(X), depth=2, b_std=0.1).ntk))  # fc's, bit for bit
    np.testing.assert_allclose(tonp(G.K), np.asarray(ref.K), rtol=1e-14)  # (torch: its own libm, ~1 ulp)
    assert G.psd_margin == pytest.approx(ref.psd_margin, rel=1e-9)  # the bound's own rounding, the sums' order
    y = asxp(np.where(X[:, 0] > 0, 1.0, -1.0))
    assert machines.solve(G, y, "hinge", 0.1, check_psd=False).psd_margin == G.psd_margin


def test_margin_from_bound_is_an_upper_bound_of_the_row_sums():
    from fractions import Fraction

    from ntkref.machines._kernel_gram import margin_from_bound

    rng = np.random.default_rng(0)
    for scale in (1.0, 1e-300, 1e300 / 1e4):
        B = np.abs(rng.standard_normal((50, 1000))) * scale
        B[3, :] = 5e-324  # subnormal row
        exact = max(sum(Fraction(v) for v in row) for row in B)
        assert Fraction(margin_from_bound(B, np)) > exact
    assert math.isinf(margin_from_bound(np.full((2, 4), 1e308), np))


def test_refusals_name_the_parameter():
    X = np.random.default_rng(0).standard_normal((5, 2))
    with pytest.raises(NotImplementedError, match="kernel_gram.*error_bound"):
        machines.kernel_gram(X, activation="tanh")
    with pytest.raises(InvalidParameterError, match="'get'"):
        machines.kernel_gram(X, get="both")
    with pytest.raises(InvalidParameterError, match="'x'"):
        machines.kernel_gram(np.array([1.0, 2.0]))
    da = pytest.importorskip("dask.array")
    with pytest.raises(InvalidParameterError, match="'x'.*Dask"):
        machines.kernel_gram(da.from_array(X, chunks=2))


def test_a_gram_that_fails_rumps_test_keeps_its_proven_margin():
    """erf with a large first-layer W_std on near-parallel and antipodal rows: λ_min(K̃) ≈ −2.8e-9 lies below
    Rump's −n·eps·‖K‖_F, so the Cholesky of K + δI fails, yet λ_min > −μ is proven; the solvers must keep μ,
    not refuse K (they raised "must be positive semidefinite" before)."""
    from ntkref import krr

    rng = np.random.default_rng(0)
    d, n = 3, 8
    for _ in range(200):  # the first draw that Rump's test fails (deterministic)
        x0 = rng.standard_normal(d)
        x = np.array([x0 * (1 + 1e-3 * i) + 1e-9 * rng.standard_normal(d) for i in range(n)])
        x[1::2] *= -1
        W = [10.0 ** rng.uniform(0, 60), 1.0, 1.0]
        try:
            G = machines.kernel_gram(x, depth=2, activation="erf", W_std=W)
        except (NotImplementedError, InvalidParameterError):
            continue
        K = np.asarray(G.K)
        if not _gram.cholesky_ok(K, n * np.finfo(float).eps * np.linalg.norm(K), np):
            break
    else:
        pytest.fail("no Gram failing Rump's test was drawn")
    lmin = _lambda_min_mp(K)
    assert -G.psd_margin < lmin < -n * np.finfo(float).eps * np.linalg.norm(K)  # μ holds; Rump's δ does not
    y = np.where(np.arange(n) % 2, 1.0, -1.0)
    for r in (machines.solve(G, y, "hinge", 0.1), machines.hard_margin_svm(G, y), krr.solve_cg(G, y, 0.1),
              machines.checked_gram(G, check_psd="cholesky")):
        assert r.psd_margin == G.psd_margin
