"""Helpers of ``validation/seed002_teacher.py`` (seed 002 App. F.3): the teacher, its rejection sampler, the ridge path.

The validation run itself is too slow for the suite (``python -m validation`` runs it); these check the data it is
built on.  Everything is host NumPy (the validation code ignores NTKREF_BACKEND), so both CI backends run the same.
"""
import numpy as np
import pytest
from scipy import stats

from ntkref import InvalidParameterError
from ntkref.distributions import fit_kernel_predictor
from validation import seed002_teacher as T
from validation.common import HOST


def _teacher_by_hand(teacher, x):
    """f*(x) = Σⱼ aⱼ[uⱼᵀx]₊ written out from the parameters (independent of HomogeneousNet.apply)."""
    U, a = (np.asarray(p) for p in teacher[1])
    return np.array([sum(a[j, 0] * max(0.0, float(xi @ U[:, j])) for j in range(U.shape[1])) for xi in x])


def test_teacher_shape_signs_homogeneity():
    teacher = T.make_teacher(3)
    U, a = (np.asarray(p) for p in teacher[1])
    assert U.shape == (20, 6) and a.shape == (6, 1)
    assert np.array_equal(a[:, 0], np.array(T.TEACHER_SIGNS))  # balanced: 3 plus, 3 minus
    x = np.random.default_rng(0).standard_normal((50, 20))
    f = T.teacher_output(teacher, x)
    np.testing.assert_allclose(f, _teacher_by_hand(teacher, x), rtol=1e-12, atol=1e-12)
    # positively 1-homogeneous in x (bias-free ReLU net), not odd
    np.testing.assert_allclose(T.teacher_output(teacher, 2.5 * x), 2.5 * f, rtol=1e-12, atol=1e-12)
    assert np.max(np.abs(T.teacher_output(teacher, -x) + f)) > 1e-3
    # reproducible, and a different seed is a different teacher
    assert np.array_equal(np.asarray(T.make_teacher(3)[1][0]), U)
    assert not np.allclose(np.asarray(T.make_teacher(4)[1][0]), U)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_classification_sample_respects_margin_and_labels(seed):
    teacher = T.make_teacher(seed)
    x, y, f = T.sample_teacher_data(teacher, 400, seed=(seed, 7), task="classification", margin=0.1)
    assert x.shape == (400, 20) and y.shape == (400,) and f.shape == (400,)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, rtol=0, atol=1e-14)  # on S^{d−1}
    np.testing.assert_allclose(f, _teacher_by_hand(teacher, x), rtol=1e-12, atol=1e-12)
    assert np.min(np.abs(f)) >= 0.1
    assert np.array_equal(y, np.sign(f))
    assert set(np.unique(y)) == {-1.0, 1.0}  # balanced teacher: both classes occur
    x2, y2, _ = T.sample_teacher_data(teacher, 400, seed=(seed, 7), task="classification", margin=0.1)
    assert np.array_equal(x, x2) and np.array_equal(y, y2)


def test_rejection_sampling_is_the_exact_conditional_law():
    """The accepted |f*| must follow the law of |f*| under the uniform sphere, conditioned on |f*| ≥ margin.

    Reference: an independent unconditioned (regression-mode) sample filtered by hand.  Two-sample KS test on
    seeded draws (deterministic); a sampler that, e.g., clipped or rescaled rejected points, or dropped 20% of
    one class, fails it (checked by mutation).
    Also the margin threshold: a mass of points at |f*| = margin would be an atom the KS test sees.
    """
    teacher = T.make_teacher(11)
    margin = 0.3
    _, _, f_acc = T.sample_teacher_data(teacher, 3000, seed=1, task="classification", margin=margin)
    _, _, f_all = T.sample_teacher_data(teacher, 20000, seed=2, task="regression")
    ref = f_all[np.abs(f_all) >= margin]
    assert ref.size > 3000  # the reference is big enough
    res = stats.ks_2samp(f_acc, ref)  # signed values: sees both the |f*| law and the sign balance
    assert res.pvalue > 1e-3, res
    # sign balance against the conditional law: two independent binomial proportions, 4.5 combined s.d.
    p_ref = np.mean(ref > 0)
    sd = np.sqrt(p_ref * (1 - p_ref) * (1 / 3000 + 1 / ref.size))
    assert abs(np.mean(f_acc > 0) - p_ref) < 4.5 * sd
    # the margin really removes mass: unconditioned sample has points below it
    assert np.mean(np.abs(f_all) < margin) > 0.01


def test_regression_inputs_are_uniform_on_the_sphere():
    teacher = T.make_teacher(5)
    n, d = 20000, 20
    x, y, f = T.sample_teacher_data(teacher, n, seed=9, task="regression")
    assert np.array_equal(y, f)
    # E x = 0 and E x xᵀ = I/d for the uniform law on S^{d−1}; entries of the empirical means have
    # standard deviations ≤ 1/√(n d) (mean) and ≤ ~1.4/(d√n) (second moments): 6 s.d. tolerances
    assert np.max(np.abs(x.mean(axis=0))) < 6 / np.sqrt(n * d)
    assert np.max(np.abs(x.T @ x / n - np.eye(d) / d)) < 6 * 1.5 / (d * np.sqrt(n))


def test_bad_inputs_raise():
    teacher = T.make_teacher(0)
    with pytest.raises(InvalidParameterError, match="'n'"):
        T.sample_teacher_data(teacher, 0, seed=0)
    with pytest.raises(InvalidParameterError, match="'margin'"):
        T.sample_teacher_data(teacher, 5, seed=0, margin=-0.1)
    with pytest.raises(InvalidParameterError, match="'task'"):
        T.sample_teacher_data(teacher, 5, seed=0, task="ranking")
    with pytest.raises(InvalidParameterError, match="too rarely"):
        T.sample_teacher_data(teacher, 5, seed=0, margin=1e6)
    with pytest.raises(InvalidParameterError, match="'width'"):
        T.make_teacher(0, width=1)


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_kernel_predictions_match_the_library_solvers(task):
    """The eigendecomposition ridge path equals ``fit_kernel_predictor(method="ridge")`` at the chosen λ, and the
    λ → 0 predictor equals the library's hard-margin SVM / min-norm interpolant (same K, independent solves)."""
    teacher = T.make_teacher(2)
    x, y, _ = T.sample_teacher_data(teacher, 60, seed=3, task=task)
    xt, yt, _ = T.sample_teacher_data(teacher, 300, seed=4, task=task)
    f_lim, f_ridge, rel = T.kernel_predictions(x, y, xt, yt, task=task)
    K = np.asarray(T.wei_kernel(HOST.asarray(x), r_w=0.0, r_u=1.0))
    lam = rel * float(np.mean(np.diag(K)))
    ridge = fit_kernel_predictor(HOST.asarray(x), HOST.asarray(y), method="ridge", lam=lam, r_w=0.0, r_u=1.0)
    f_ref = np.asarray(ridge.decision_function(HOST.asarray(xt)))
    # cond(K + (λ/2)I) ≤ 1 + λ_max/(λ/2) ≤ 1 + 2n·max Kᵢᵢ/(rel·mean Kᵢᵢ) ≈ 1e8 at n = 60, rel = 1e-6: two solves
    # then agree to ~1e8·eps ≈ 1e-8 relative; 1e-6 leaves margin
    np.testing.assert_allclose(f_ridge, f_ref, rtol=0, atol=1e-6 * max(1.0, np.max(np.abs(f_ref))))
    # the chosen λ is the best of the grid on the test set
    for r in T.RIDGE_GRID:
        other = fit_kernel_predictor(HOST.asarray(x), HOST.asarray(y), method="ridge",
                                     lam=r * float(np.mean(np.diag(K))), r_w=0.0, r_u=1.0)
        assert T._error(f_ridge, yt, task) <= T._error(np.asarray(other.decision_function(HOST.asarray(xt))), yt,
                                                        task) + 1e-9
    if task == "classification":
        # hard-margin SVM: every training point has y·f ≥ 1 − tol on the training set
        ref = fit_kernel_predictor(HOST.asarray(x), HOST.asarray(y), method="hard_margin_svm", r_w=0.0, r_u=1.0)
        assert np.min(y * np.asarray(ref.decision_function(HOST.asarray(x)))) >= 1 - 1e-6
    else:
        ref = fit_kernel_predictor(HOST.asarray(x), HOST.asarray(y), method="min_norm", r_w=0.0, r_u=1.0)
    np.testing.assert_allclose(f_lim, np.asarray(ref.decision_function(HOST.asarray(xt))), rtol=1e-9, atol=1e-9)


def test_teacher_network_runs_on_the_parameters_device():
    """The teacher is a HomogeneousNet: with its parameters and inputs moved explicitly to array_api_strict's
    device1 (the CPU stand-in for a GPU), apply and the kernel the predictors use return device1 arrays equal to
    the host values."""
    import array_api_compat

    from ntkref import to_numpy

    strict = pytest.importorskip("array_api_strict")
    dev = strict.Device("device1")
    net, params = T.make_teacher(3)
    x = np.random.default_rng(0).standard_normal((7, 20))
    on = [strict.asarray(to_numpy(p), device=dev) for p in params]
    f = net.apply(on, strict.asarray(x, device=dev))
    K = T.wei_kernel(strict.asarray(x, device=dev), r_w=0.0, r_u=1.0)
    for a in (f, K):
        assert array_api_compat.array_namespace(a) is strict and array_api_compat.device(a) == dev
    np.testing.assert_allclose(to_numpy(f), T.teacher_output((net, params), x), rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(to_numpy(K), np.asarray(T.wei_kernel(HOST.asarray(x), r_w=0.0, r_u=1.0)),
                               rtol=1e-14, atol=1e-14)
