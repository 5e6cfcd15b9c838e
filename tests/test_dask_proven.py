"""The Dask engine's certificates are proven too (issue 25, item 4): the blockwise compensated g = Kα is within its
bound of the exact product, and on the rank-2 integer Gram (chunked so that every product crosses blocks)
max(duality_gap, 0) + gap_rounding bounds the exact P(α) − D(α′) (Python ``fractions``; mpmath for the logistic
logarithms), with converged=True only when that is ≤ tol·max(1, P).  The exact routes are those of
tests/test_machines_proven.py."""
from __future__ import annotations

import warnings
from fractions import Fraction as F

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

from ntkref import losses, machines  # noqa: E402
from ntkref._engines.dask import _machines as dask_machines  # noqa: E402

from .test_machines_proven import _X2, _Y2, _adversarial, _exact_certificate, _exact_matvec  # noqa: E402


@pytest.mark.parametrize("case", ["cancelling", "mixed", "tiny", "exact_sum"])
def test_blockwise_compensated_matvec_within_its_bound(case):
    """Blocks of 7 (4 column blocks per row: the TwoSum combination of block sums is exercised)."""
    K, a = _adversarial(case, np.random.default_rng([1, 25]))
    g, bound = dask_machines.compensated_matvec(da.from_array(K, chunks=7), a)
    for i, e in enumerate(_exact_matvec(K, a)):
        assert abs(F(float(g[i])) - e) <= F(float(bound[i])), (case, i)
    if case == "cancelling":  # still twice the working precision, not u·|K||α|
        assert np.all(bound <= 4 * 2.0 ** -53 * np.abs(g) + 1e-28 * (np.abs(K) @ np.abs(a)))


@pytest.mark.parametrize("name,lam", [("hinge", 1e-12), ("hinge", 1e-8), ("hinge", 1e-5), ("squared_hinge", 1e-8),
                                      ("epsilon_insensitive", 1e-5), ("logistic", 1e-6), ("logistic", 1e-2)])
def test_dask_converged_is_a_theorem_on_the_rank2_integer_gram(name, lam):
    loss = losses.get(name, epsilon=0.5) if name == "epsilon_insensitive" else losses.get(name)
    K = _X2 @ _X2.T
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", machines.ConvergenceWarning)
        km = machines.solve(da.from_array(K, chunks=5), _Y2, loss, lam, check_psd=False)
    alpha = np.asarray(km.alpha_.compute(), dtype=np.float64)
    dual_alpha = None
    if name == "logistic":  # the engine's dual point: −l′(Kα)/λ
        dual_alpha = -loss.derivative(K @ alpha, _Y2) / lam
    P, D = _exact_certificate(K, _Y2, alpha, loss, lam, dual_alpha=dual_alpha)
    bound = max(km.duality_gap, 0.0) + km.gap_rounding
    assert P - D >= 0
    assert P - D <= (F(bound) if isinstance(P, F) else bound)
    if km.converged:
        assert P - D <= 1e-10 * max(1, P)
    assert float(P) == pytest.approx(km.primal_objective, rel=1e-9, abs=1e-9)


def test_dask_hard_margin_certificate_is_proven():
    """Hard margin on a separable integer Gram: the exact gap αᵀKα − yᵀα (dual point α) is within the bound."""
    X = np.array([[2, 1], [3, 0], [1, 3], [-2, -1], [-1, -3], [-3, 1], [2, 2], [-2, 0]], float)
    y = np.array([1, 1, 1, -1, -1, -1, 1, -1], float)
    K = X @ X.T
    km = machines.hard_margin_svm(da.from_array(K, chunks=3), y, check_psd=False)
    a = [F(float(v)) for v in np.asarray(km.alpha_.compute())]
    Ka = _exact_matvec(K, np.asarray(km.alpha_.compute()))
    exact = sum(ai * gi for ai, gi in zip(a, Ka)) - sum(F(float(yi)) * ai for yi, ai in zip(y, a))
    assert exact <= F(max(km.duality_gap, 0.0) + km.gap_rounding)
    assert km.converged and km.gap_rounding <= 1e-12 * km.primal_objective
