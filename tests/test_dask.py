"""Dask scale-out (the Dask engine, ntkref/_engines/dask, through the public functions; ntkref.krr on Dask) on a dask.distributed LocalCluster.

Every result on Dask inputs is compared with the NumPy result of the same call: kernels within the
documented accuracy of both (each entry is within 1e-13·√(K(x,x)K(x',x')) of the exact value, so the two
differ by at most twice that), predictions within the rounding of the sums, certificates and stored Grams
exactly.  "No compute before .compute()" is checked with a scheduler that raises.
"""
import os

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
import array_api_compat  # noqa: E402
import dask  # noqa: E402

from ntkref import certify, dynamics, kernels, krr, losses, machines, nets  # noqa: E402
from ntkref._engines.dask import _graphs as dask_graphs  # noqa: E402
from ntkref._engines.dask import _machines as dask_machines  # noqa: E402
from ntkref._lib.validation import InvalidParameterError  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _no_compute(*args, **kwargs):
    raise AssertionError("a Dask graph was computed before .compute()")


def _data(n=230, d=16, seed=0):
    rng = np.random.default_rng(seed)
    X = np.abs(rng.standard_normal((n, d)))
    X[7] = 3.0 * X[n // 2]  # parallel rows in different chunks: the near-parallel refinement across blocks
    X[8] = X[9] * (1 + 1e-9)  # and within one
    return X


def _scaled_gap(a, b, diag1, diag2):
    return np.max(np.abs(a - b) / np.sqrt(np.outer(diag1, diag2)))


@pytest.mark.parametrize("kw", [
    {"depth": 2}, {"depth": 1, "get": "ntk"}, {"depth": 3, "W_std": [1.0, 1.5, 0.5, 2.0], "b_std": 0.3},
    {"depth": 2, "activation": "erf", "b_std": 0.1},
    # tanh by quadrature: a first-layer scale (here ≤ 0.63) its 64-point rule resolves (fc refuses what it cannot)
    {"depth": 1, "activation": "tanh", "get": "nngp", "quadrature_points": 64, "W_std": 0.2},
])
def test_fc_on_dask_equals_numpy(client, kw):
    X = _data()
    Y = _data(n=75, seed=1)
    Xd = da.from_array(X, chunks=60)
    ref_sym, ref_cross = kernels.fc(X, **kw), kernels.fc(X, Y, **kw)
    got_sym = kernels.fc(Xd, **kw)
    got_cross = kernels.fc(Xd, da.from_array(Y, chunks=40), **kw)
    dg, dgy = kernels.fc_diagonal(X, **{k: v for k, v in kw.items() if k != "get"}), \
        kernels.fc_diagonal(Y, **{k: v for k, v in kw.items() if k != "get"})
    for g in ("nngp", "ntk"):
        if getattr(ref_sym, g) is None:
            assert getattr(got_sym, g) is None
            continue
        s, c = getattr(got_sym, g), getattr(got_cross, g)
        assert s.chunks == (Xd.chunks[0], Xd.chunks[0]) and c.chunks == (Xd.chunks[0], (40, 35))
        s, c = s.compute(), c.compute()
        assert np.array_equal(s, s.T)  # exactly symmetric
        assert _scaled_gap(s, getattr(ref_sym, g), getattr(dg, g), getattr(dg, g)) <= 2e-13
        assert _scaled_gap(c, getattr(ref_cross, g), getattr(dg, g), getattr(dgy, g)) <= 2e-13


def test_fc_builds_one_task_per_upper_block_and_computes_nothing(client):
    X = _data(n=500)
    Xd = da.from_array(X, chunks=100)
    with dask.config.set(scheduler=_no_compute):
        k = kernels.fc(Xd, depth=2)
        k_cross = kernels.fc(Xd, Xd[:250], depth=2, get="ntk")
        cg = kernels.chen_ntk(Xd, depth=1)
    graph = dict(k.ntk.__dask_graph__())
    blocks = [key for key in graph if isinstance(key, tuple) and key[0].startswith("fc-blocks")]
    assert len(blocks) == 5 * 6 // 2  # the upper triangle of 5 × 5 blocks, each once
    cross = [key for key in dict(k_cross.ntk.__dask_graph__()) if isinstance(key, tuple)
             and key[0].startswith("fc-blocks")]
    assert len(cross) == 5 * 3
    ref = kernels.fc(X[:120], depth=2).ntk
    np.testing.assert_allclose(k.ntk[:120, :120].compute(), ref, rtol=1e-13)
    assert cg.shape == (500, 500)


def test_unknown_chunks_and_bad_parameters_are_refused_without_computing():
    X = da.from_array(_data(), chunks=50)
    masked = X[X[:, 0] > 0.5]
    with dask.config.set(scheduler=_no_compute):
        with pytest.raises(InvalidParameterError, match="compute_chunk_sizes"):
            kernels.fc(masked)
        with pytest.raises(InvalidParameterError, match="depth"):
            kernels.fc(X, depth=-1)
        with pytest.raises(InvalidParameterError, match="W_std"):
            kernels.fc(X, W_std=[1.0, 2.0, 3.0])
        with pytest.raises(InvalidParameterError, match="same shape"):
            kernels.fc(X, X[:, :3])


def test_data_errors_surface_at_compute():
    X = _data()
    X[150, 2] = np.inf
    k = kernels.fc(da.from_array(X, chunks=60))
    with pytest.raises(InvalidParameterError, match="NaN or infinite"):
        k.ntk.compute()


def test_cntk_and_empirical_ntk_on_dask_equal_numpy(client):
    rng = np.random.default_rng(2)
    imgs = rng.standard_normal((7, 2, 5, 5))
    ref = kernels.cntk(imgs, depth=1, readout="flatten")
    with dask.config.set(scheduler=_no_compute):  # the public path builds the graph only (it crashed before)
        got = kernels.cntk(da.from_array(imgs, chunks=(3, 2, 5, 5)), depth=1, readout="flatten")
    scale = np.sqrt(np.outer(np.diag(ref.ntk), np.diag(ref.ntk)))
    assert np.max(np.abs(got.ntk.compute() - ref.ntk) / scale) <= 1e-12
    assert np.max(np.abs(got.nngp.compute() - ref.nngp) / scale) <= 1e-12
    # the reproduction: 3 channels chunked whole, GAP readout, depth 2, a cross Gram
    imgs = rng.standard_normal((6, 3, 8, 8))
    with dask.config.set(scheduler=_no_compute):
        got = kernels.cntk(da.from_array(imgs, chunks=(2, 3, 8, 8)), depth=2)
        cross = kernels.cntk(da.from_array(imgs, chunks=(2, 3, 8, 8)), da.from_array(imgs[:3], chunks=(2, 3, 8, 8)),
                             depth=2)
    ref = kernels.cntk(imgs, depth=2)
    scale = np.sqrt(np.outer(np.diag(ref.ntk), np.diag(ref.ntk)))
    assert np.max(np.abs(got.ntk.compute() - ref.ntk) / scale) <= 1e-12
    assert np.max(np.abs(cross.ntk.compute() - ref.ntk[:, :3]) / scale[:, :3]) <= 1e-12

    X = _data(n=90)
    net = nets.FullyConnected(X.shape[1], 32, depth=2)
    params = net.init(0, xp=array_api_compat.numpy)  # the chunks are NumPy, whatever NTKREF_BACKEND says
    ref = nets.empirical_ntk(net, params, X)
    got = nets.empirical_ntk(net, params, da.from_array(X, chunks=25)).compute()
    assert np.array_equal(got, got.T)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())


@pytest.fixture(scope="module")
def problem():
    X = _data(n=260)
    rng = np.random.default_rng(4)
    y = np.sign(X[:, 0] - X[:, 1] + 0.3 * rng.standard_normal(X.shape[0]))
    Xt = np.abs(rng.standard_normal((70, X.shape[1])))
    K = kernels.fc(X, depth=1, get="ntk").ntk
    return X, y, Xt, K


def test_symmetric_matvec_reads_upper_blocks_and_equals_dense(client, problem):
    X, _, _, K = problem
    Kd = kernels.fc(da.from_array(X, chunks=70), depth=1, get="ntk").ntk
    v = np.random.default_rng(0).standard_normal((X.shape[0], 3))
    tol = 4 * X.shape[0] * np.finfo(float).eps * (np.abs(K) @ np.abs(v))
    assert np.all(np.abs(dask_graphs.symmetric_matvec(Kd, v) - K @ v) <= tol + 2e-13 * np.abs(K).max())
    np.testing.assert_allclose(dask_graphs.symmetric_matvec(Kd, v[:, 0]), (K @ v)[:, 0], rtol=1e-12)
    # a lower triangle that disagrees with the upper one is never read
    lower_poison = da.from_array(np.triu(K) + np.tril(np.full_like(K, np.nan), -1), chunks=70)
    assert np.all(np.abs(dask_graphs.symmetric_matvec(lower_poison, v) - K @ v) <= tol + 2e-13 * np.abs(K).max())
    np.testing.assert_array_equal(dask_graphs.diagonal(Kd), np.diag(K))


def test_krr_on_dask_equals_numpy_fit(client, problem):
    X, y, _, K = problem
    Kd = kernels.fc(da.from_array(X, chunks=70), depth=1, get="ntk").ntk.persist()
    for lam in (0.1,):  # one λ: every CG step is a round trip to the scheduler (~0.05 s here)
        ref = machines.fit(K, y, "squared", lam)
        m = dask_machines.solve(Kd, y, "squared", lam, preconditioner="nystrom", rank=40)
        assert dask_graphs.is_dask(m.alpha_) and m.alpha_.chunks == (Kd.chunks[0],)
        alpha = m.alpha_.compute()
        assert m.converged and m.residual <= 1e-8
        assert np.linalg.norm(alpha - ref) <= m.alpha_error_bound
        # the same CG on the NumPy Gram takes the same steps
        m_np = krr.solve_cg(K, y, lam, preconditioner="nystrom", rank=40)
        assert m_np.n_iter == m.n_iter
        np.testing.assert_allclose(alpha, m_np.alpha_, rtol=0, atol=4 * m.alpha_error_bound)


def test_predictions_and_certificates_over_test_chunks_equal_numpy(client, problem):
    X, y, Xt, K = problem
    alpha = machines.fit(K, y, "squared", 0.1)
    Xtd = da.from_array(Xt, chunks=20)
    Kt_ref = kernels.fc(Xt, X, depth=1, get="ntk").ntk
    with dask.config.set(scheduler=_no_compute):
        Kt = kernels.fc(Xtd, da.from_array(X, chunks=70), depth=1, get="ntk").ntk
        g = machines.predict(alpha, Kt)
        labels = np.sign(Kt_ref @ alpha)
        labels[:6] *= -1  # some misclassified points: radius 0
        radii = certify.certified_radius(alpha, X, Xtd, y=labels, domain=(0.0, np.inf))
        radii_l2 = certify.certified_radius(alpha, X, Xtd, norm="l2", method="paper")
    g_ref = machines.predict(alpha, Kt_ref)
    bound = 4 * X.shape[0] * np.finfo(float).eps * (np.abs(Kt_ref) @ np.abs(alpha)) + 1e-13 * np.abs(g_ref).max()
    assert np.all(np.abs(g.compute() - g_ref) <= bound)
    r = radii.compute()
    assert np.array_equal(r, certify.certified_radius(alpha, X, Xt, y=labels, domain=(0.0, np.inf)))
    assert np.all(r[:6] == 0) and np.all(r[6:] > 0)
    assert np.array_equal(radii_l2.compute(), certify.certified_radius(alpha, X, Xt, norm="l2", method="paper"))


@pytest.mark.parametrize("ext", [".zarr", ".npy"])
def test_gram_written_block_by_block_reads_back_exactly(client, problem, tmp_path, ext):
    if ext == ".zarr":
        pytest.importorskip("zarr")
    X, y, _, K = problem
    Kd = kernels.fc(da.from_array(X, chunks=70), depth=1, get="ntk").ntk
    stored = kernels.store_gram(Kd, os.fspath(tmp_path / ("K" + ext)))
    assert stored.chunks == Kd.chunks
    direct = Kd.compute()
    assert np.array_equal(stored.compute(), direct)
    m_mem = krr.solve_cg(Kd.persist(), y, 1.0, rank=40, tol=1e-6)
    m_disk = krr.solve_cg(stored, y, 1.0, rank=40, tol=1e-6)
    assert np.array_equal(m_mem.alpha_.compute(), m_disk.alpha_.compute())
    with pytest.raises(InvalidParameterError, match="path"):
        kernels.store_gram(Kd, os.fspath(tmp_path / "K.csv"))


@pytest.mark.slow
def test_two_worker_processes_with_a_memory_limit(problem):
    """The same graph on two worker processes (pickled tasks, data moved between workers)."""
    X, y, Xt, K = problem
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="1GB",
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        Kd = kernels.fc(da.from_array(X, chunks=70), depth=1, get="ntk").ntk.persist()
        assert np.array_equal(Kd.compute(), Kd.compute().T)
        m = dask_machines.solve(Kd, y, "squared", 0.1, rank=40)
        ref = machines.fit(K, y, "squared", 0.1)
        assert np.linalg.norm(m.alpha_.compute() - ref) <= m.alpha_error_bound
        r = certify.certified_radius(ref, X, da.from_array(Xt, chunks=35)).compute()
        assert np.array_equal(r, certify.certified_radius(ref, X, Xt))
        # the SVM's gathers and validation tasks are pickled to the worker processes too
        svm = machines.solve(Kd, y, "hinge", 0.1, check_psd=False)
        ref_svm = machines.solve(K, y, "hinge", 0.1)
        assert svm.converged and np.max(np.abs(svm.alpha_.compute() - ref_svm.alpha_)) <= 1e-10 * np.abs(
            ref_svm.alpha_).max()


@pytest.mark.parametrize("ext", [".zarr", ".npy"])
def test_store_gram_refuses_non_finite_or_complex_and_leaves_no_file(tmp_path, ext):
    """A NaN or inf anywhere (here in the last block only) is found by that block's task: an error naming K, and
    the partly written store is removed; a complex Gram is refused before anything is written."""
    if ext == ".zarr":
        pytest.importorskip("zarr")
    K = np.eye(5) + 0.5
    for bad in (np.nan, np.inf, -np.inf):
        Kb = K.copy()
        Kb[4, 4] = bad
        path = os.fspath(tmp_path / ("K" + ext))
        with pytest.raises(InvalidParameterError, match="'K'.*finite"):
            kernels.store_gram(da.from_array(Kb, chunks=2), path)
        assert not os.path.exists(path)
    with pytest.raises(InvalidParameterError, match="'K'.*real"):
        kernels.store_gram(da.from_array(K + 0j, chunks=2), os.fspath(tmp_path / ("C" + ext)))
    assert not os.path.exists(tmp_path / ("C" + ext))
    # finite, also at the extremes of float64: stored exactly
    Kx = np.outer([1e300, -1e-300, 1.0, 2.0, 0.0], [1.0, 1.0, -1.0, 0.5, 1.0])
    out = kernels.store_gram(da.from_array(Kx, chunks=2), os.fspath(tmp_path / ("X" + ext)))
    assert np.array_equal(out.compute(), Kx)


@pytest.mark.parametrize("ext", [".zarr", ".npy"])
def test_open_gram_reads_any_valid_blocking_and_refuses_invalid_chunks(tmp_path, ext):
    if ext == ".zarr":
        pytest.importorskip("zarr")
    K = np.arange(20.0).reshape(5, 4)
    path = os.fspath(tmp_path / ("K" + ext))
    kernels.store_gram(da.from_array(K, chunks=2), path)
    for chunks, want in ((((1, 4), (3, 1)), ((1, 4), (3, 1))), (3, ((3, 2), (3, 1))), (10, ((5,), (4,)))):
        G = kernels.open_gram(path, chunks=chunks)
        assert G.chunks == want
        assert np.array_equal(G.compute(), K)  # the same numbers whatever the blocking
    for bad in (0, -1, 1.5, float("nan"), True, "2", ((5,), (3,)), ((2, 3), (2, -2, 4)), ((5,),)):
        with pytest.raises(InvalidParameterError, match="'chunks'"):
            kernels.open_gram(path, chunks=bad)


# ------------------------------------------------------------------------ SVM / logistic on a Dask Gram
# machines.solve on a Dask K (ntkref/_engines/dask/_machines.py) against machines.solve on the same NumPy K: the dense solver
# holds K in one process, the Dask one sees it only through gathered columns (QP losses) or block products
# (logistic).  Both are exact to rounding, so α agrees to ~1e-10 relative where the minimiser is unique (K ≻ 0).


_UNEVEN = ((100, 60, 100), (100, 60, 100))


def _dual_kkt_violation(alpha, g, y, lam_sum, loss):
    """Largest violation of the optimality conditions of the dual box QP, written from Table 1's duals (not from
    the solvers' code): with G = g + shift·α − y (∇ of ½αᵀQα − yᵀα, Q = K + shift·I), a coordinate strictly inside
    its box has |G + ε·sign α| = 0, at the lower bound G ≥ 0, at the upper bound G ≤ 0 (ε-insensitive: at 0,
    |G| ≤ ε).  Returned relative to the scale of G's terms."""
    C = 1.0 / lam_sum
    shift = lam_sum / 2 if loss.name == "squared_hinge" else 0.0
    eps = loss.epsilon if loss.name == "epsilon_insensitive" else 0.0
    G = g + shift * alpha - y
    tol_in = 1e-9 * C
    if loss.name == "epsilon_insensitive":
        lo, hi = -C * np.ones_like(y), C * np.ones_like(y)
    else:
        lo = np.where(y > 0, 0.0, -C if loss.name == "hinge" else -np.inf)
        hi = np.where(y > 0, C if loss.name == "hinge" else np.inf, 0.0)
    at_lo, at_hi = alpha <= lo + tol_in, alpha >= hi - tol_in
    at_zero = np.abs(alpha) <= tol_in
    viol = np.zeros_like(y)
    if eps:
        inside = ~(at_lo | at_hi | at_zero)
        viol = np.where(inside, np.abs(G + eps * np.sign(alpha)), 0.0)
        viol = np.where(at_zero, np.maximum(np.abs(G) - eps, 0.0), viol)
        viol = np.where(at_lo & ~at_zero, np.maximum(-(G - eps), 0.0), viol)
        viol = np.where(at_hi & ~at_zero, np.maximum(G + eps, 0.0), viol)
    else:
        inside = ~(at_lo | at_hi)
        viol = np.where(inside, np.abs(G), 0.0)
        viol = np.where(at_lo, np.maximum(-G, 0.0), viol)
        viol = np.where(at_hi & ~at_lo, np.maximum(G, 0.0), viol)
    return float(np.max(viol)) / (1.0 + float(np.max(np.abs(y))) + float(np.max(np.abs(g))))


@pytest.mark.parametrize("loss_name,lam,reduction", [("hinge", 0.1, "sum"), ("hinge", 0.01, "mean"),
                                                      ("squared_hinge", 0.1, "sum"),
                                                      ("epsilon_insensitive", 0.05, "sum")])
@pytest.mark.parametrize("chunks", [70, _UNEVEN, 260])
def test_qp_losses_on_dask_equal_numpy(client, problem, loss_name, lam, reduction, chunks):
    X, y, _, K = problem
    loss = losses.get(loss_name, **({"epsilon": 0.2} if loss_name == "epsilon_insensitive" else {}))
    target = X[:, 0] - X[:, 1] if loss_name == "epsilon_insensitive" else y
    Kd = da.from_array(K, chunks=chunks).persist()
    ref = machines.solve(K, target, loss, lam, reduction=reduction)
    m = dask_machines.solve(Kd, target, loss, lam, reduction=reduction, check_psd=False, chunk=64)
    assert isinstance(m, machines.KernelMachine) and m.converged
    alpha, g = m.alpha_.compute(), m.train_output_.compute()
    assert m.alpha_.chunks == (Kd.chunks[0],)
    scale = np.abs(ref.alpha_).max()
    assert np.max(np.abs(alpha - ref.alpha_)) <= 1e-10 * scale
    assert abs(m.primal_objective - ref.primal_objective) <= 1e-10 * abs(ref.primal_objective)
    assert -1e-13 * max(1.0, m.primal_objective) <= m.duality_gap <= 1e-10 * max(1.0, m.primal_objective)  # ≥ 0 up to rounding
    # the reported numbers are those of the returned α, recomputed with the dense K
    assert abs(machines.objective(alpha, K, target, loss, lam, reduction=reduction) - m.primal_objective) \
        <= 1e-12 * abs(m.primal_objective)
    np.testing.assert_allclose(g, K @ alpha, rtol=0, atol=1e-12 * np.abs(K).max() * np.abs(alpha).sum())
    lam_sum = lam * K.shape[0] if reduction == "mean" else lam
    assert _dual_kkt_violation(alpha, K @ alpha, target, lam_sum, loss) <= 1e-9
    assert m.kkt_residual <= 1e-9 * (1 + np.abs(alpha).max())
    assert m.max_working_set <= K.shape[0] and m.n_matvec == 0


def test_float32_dask_gram_is_solved_in_float64_on_its_entries(client, problem):
    """A float32 Gram: the Dask solvers gather its entries and compute in float64 (default tol 1e-10), so they
    equal machines.solve on the float64 copy of the same numbers (not the float32 solve, whose tol is 1e-4)."""
    X, y, _, K = problem
    K32 = K.astype(np.float32)
    ref = machines.solve(K32.astype(np.float64), y, "hinge", 0.1)
    m = machines.solve(da.from_array(K32, chunks=70), y, "hinge", 0.1, check_psd=False)
    assert m.converged and m.duality_gap <= 1e-10 * max(1.0, m.primal_objective)
    alpha = m.alpha_.compute()
    assert alpha.dtype == np.float64 and np.max(np.abs(alpha - ref.alpha_)) <= 1e-10 * np.abs(ref.alpha_).max()


def test_dask_working_sets_refine_with_the_tight_threshold(client):
    """The dense solver's refinement case (tests/test_machines.py, _refinement_case: the coarse rounding threshold
    left violations, converged=False before the tight second pass): the Dask solve converges and equals it."""
    rng = np.random.default_rng([5, 500, 20])
    X = rng.standard_normal((500, 20))
    y = np.sign(X[:, 0] + 0.3 * rng.standard_normal(500))
    K, lam, loss = X @ X.T, 1e-3, losses.get("epsilon_insensitive", epsilon=0.1)
    ref = machines.solve(K, y, loss, lam)
    m = dask_machines.solve(da.from_array(K, chunks=130).persist(), y, loss, lam, check_psd=False, chunk=64)
    assert ref.converged and m.converged
    assert m.duality_gap <= 1e-10 * m.primal_objective
    assert abs(m.primal_objective - ref.primal_objective) <= 1e-10 * ref.primal_objective
    g = m.train_output_.compute()
    # |g − g*| ≤ √Kᵢᵢ·√(2·gap/λ) for each (strong convexity), so the two differ by at most twice that
    bound = np.sqrt(np.diag(K)) * (np.sqrt(2 * m.duality_gap / lam) + np.sqrt(2 * ref.duality_gap / lam))
    assert np.all(np.abs(g - ref.train_output_) <= bound + 1e-12 * np.abs(K).max() * np.abs(ref.alpha_).sum())


def _two_clusters(n, d, sep, seed):
    """Alternating labels ±1, Gaussian clusters (σ = 0.5) at ±sep on the first axis, and their depth-1 NTK Gram."""
    rng = np.random.default_rng(seed)
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    X = 0.5 * rng.standard_normal((n, d))
    X[:, 0] += sep * y
    return X, y, kernels.fc(X, depth=1, get="ntk").ntk


def test_working_set_gathers_only_part_of_K_when_few_points_are_support_vectors(client):
    """Two separated clusters: 12 of 600 points are support vectors; the solver gathers < n columns of K (the
    client never held the whole Gram) and still equals the dense solve."""
    n = 600
    X, y, K = _two_clusters(n, 8, 2.0, seed=5)
    Kd = da.from_array(K, chunks=150).persist()
    ref = machines.solve(K, y, "hinge", 0.01)
    n_sv = int(np.sum(ref.alpha_ != 0))
    for chunk, most in ((32, n // 4), (None, n - 1)):
        m = dask_machines.solve(Kd, y, "hinge", 0.01, check_psd=False, chunk=chunk)
        assert m.converged and m.duality_gap <= 1e-10 * max(1.0, m.primal_objective)
        assert n_sv <= m.max_working_set <= m.distinct_columns <= min(most, m.columns_gathered)
        assert np.max(np.abs(m.alpha_.compute() - ref.alpha_)) <= 1e-10 * np.abs(ref.alpha_).max()


def test_hard_margin_svm_on_dask(client):
    """Separable clusters: machines.hard_margin_svm on the Dask Gram equals the dense one, satisfies the
    hard-margin KKT conditions written out here (yᵢgᵢ ≥ 1, yᵢαᵢ ≥ 0, αᵢ(yᵢgᵢ − 1) = 0) and primal = dual
    (½‖β‖² = yᵀα − ½αᵀKα); a point repeated with both labels (not separable) is refused, naming C_max."""
    X, y, K = _two_clusters(160, 6, 1.5, seed=7)
    Kd = da.from_array(K, chunks=(50, 50)).persist()
    ref = machines.hard_margin_svm(K, y)
    m = machines.hard_margin_svm(Kd, y)
    assert isinstance(m, machines.KernelMachine) and m.converged and m.lam == 0.0
    assert 0 < m.gap_rounding <= 1e-10 * m.primal_objective  # the rounding of g = Kα is small here, and counted
    alpha, g = m.alpha_.compute(), m.train_output_.compute()
    np.testing.assert_allclose(alpha, ref.alpha_, rtol=0, atol=1e-9 * np.abs(ref.alpha_).max())
    np.testing.assert_allclose(g, K @ alpha, rtol=0, atol=1e-12 * np.abs(K).max() * np.abs(alpha).sum())
    scale = np.abs(alpha).max()
    assert np.all(y * g >= 1 - 1e-9) and np.all(y * alpha >= 0)
    assert np.max(np.abs(alpha * (y * g - 1))) <= 1e-9 * scale
    assert abs(0.5 * alpha @ K @ alpha - (y @ alpha - 0.5 * alpha @ K @ alpha)) <= 1e-9 * (y @ alpha)
    X[1] = X[0]  # a point repeated with the other label: no margin at all
    K_bad = kernels.fc(X, depth=1, get="ntk").ntk
    with pytest.raises(InvalidParameterError, match="C_max"):
        machines.hard_margin_svm(da.from_array(K_bad, chunks=(50, 50)).persist(), y, C_max=1e3, check_psd=False)


@pytest.mark.parametrize("lam,reduction", [(0.1, "sum"), (1e-3, "sum"),
                                            pytest.param(1e-5, "mean", marks=pytest.mark.slow)])
def test_logistic_on_dask_equals_numpy_newton(client, lam, reduction):
    X = _data(n=150, seed=3)
    rng = np.random.default_rng(6)
    y = np.sign(X[:, 0] - X[:, 1] + 0.3 * rng.standard_normal(X.shape[0]))
    K = kernels.fc(X, depth=1, get="ntk").ntk
    Kd = da.from_array(K, chunks=((60, 60, 30), (60, 60, 30))).persist()
    ref = machines.solve(K, y, "logistic", lam, reduction=reduction)
    m = machines.solve(Kd, y, "logistic", lam, reduction=reduction, check_psd=False)
    assert m.converged and -1e-13 * max(1.0, m.primal_objective) <= m.duality_gap <= 1e-10 * max(1.0, m.primal_objective)
    alpha, g = m.alpha_.compute(), m.train_output_.compute()
    assert abs(m.primal_objective - ref.primal_objective) <= 1e-12 * ref.primal_objective
    # the certificate: |g(x) − g*(x)| ≤ √K(x,x)·√(2 gap/λ) for both solutions, so they differ by at most the sum;
    # each computed gap is exact up to the rounding of P − D (sums of n terms: ≤ 1e-13·max(1, P) here)
    lam_sum = lam * K.shape[0] if reduction == "mean" else lam
    div = K.shape[0] if reduction == "mean" else 1
    radius = sum(np.sqrt(2 * div * (max(s.duality_gap, 0.0) + 1e-13 * max(1.0, s.primal_objective)) / lam_sum)
                 for s in (m, ref))
    g_bound = np.sqrt(np.diag(K)) * radius
    assert np.all(np.abs(g - ref.train_output_) <= g_bound)
    # stationarity α = −l′(Kα)/λ (the representer form), checked with the dense K
    dl = losses.get("logistic").derivative
    assert np.max(np.abs(alpha + dl(K @ alpha, y) / lam_sum)) <= 1e-9 * np.abs(alpha).max()
    # hence α itself: with e = α + l′(Kα)/λ (each solution's stationarity residual, measured) and l′ 1/4-Lipschitz,
    # |α − α*| ≤ |Kα − Kα*|/(4λ) + |e| + |e*|, and |Kα − Kα*| ≤ |Kα − g| + |g − g*| + |g* − Kα*| (the certificate
    # above bounds the middle term). A fixed 1e-10 relative α tolerance, used before, follows from no certificate:
    # the Dask Newton-CG and the dense Newton stop at different points of the tolerance ball (1.4e-9 apart here, the
    # dense α stationary to 5e-8 relative).
    ref_a = np.asarray(ref.alpha_)
    e, e_ref = alpha + dl(K @ alpha, y) / lam_sum, ref_a + dl(K @ ref_a, y) / lam_sum
    dK = np.abs(K @ alpha - g) + g_bound + np.abs(K @ ref_a - np.asarray(ref.train_output_))
    assert np.all(np.abs(alpha - ref_a) <= dK / (4 * lam_sum) + np.abs(e) + np.abs(e_ref) + 1e-15 * np.abs(ref_a).max())
    assert m.n_matvec > 0 and m.columns_gathered == 0


@pytest.mark.parametrize("lam", [1e-4, 1e-2])
def test_logistic_on_a_singular_dask_gram_returns_a_certified_alpha(client, lam):
    """A rank-5 linear kernel (n = 200): Newton-CG in the K inner product controls λα + l′(Kα) only in the K-norm,
    so the representer form −l′(g)/λ can be far from optimal although the iterate is certified.  Whatever α is
    returned with converged=True must be optimal to tol: its objective, recomputed on the dense K, is within
    tol·max(1, P) of the dense Newton optimum P*, and machines.duality_gap (recomputed densely) is within tol."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 5))
    K = X @ X.T
    y = np.sign(X[:, 0] + rng.standard_normal(200))
    ref = machines.solve(K, y, "logistic", lam)
    m = machines.solve(da.from_array(K, chunks=100).persist(), y, "logistic", lam, check_psd=False)
    alpha = m.alpha_.compute()
    tol = 1e-10 * max(1.0, ref.primal_objective)
    assert m.converged and m.duality_gap <= tol
    assert machines.objective(alpha, K, y, "logistic", lam) - ref.primal_objective <= tol + 1e-13 * ref.primal_objective
    assert machines.duality_gap(alpha, K, y, "logistic", lam) <= tol + 1e-13 * ref.primal_objective


def test_dask_lanczos_psd_test(client, problem):
    """check_psd on a Dask Gram: a PSD K (full rank, or of rank 5 with rounding around its zero eigenvalues) is
    accepted; a K with one negative eigenvalue is refused with a vector u, uᵀKu < 0; 'cholesky' is refused."""
    X, y, _, K = problem
    m = machines.solve(da.from_array(K, chunks=70).persist(), y, "hinge", 0.1)  # default check_psd=True: Lanczos
    assert m.converged
    Z = np.random.default_rng(1).standard_normal((K.shape[0], 5))
    Kl = Z @ Z.T
    assert machines.solve(da.from_array(Kl, chunks=70), y, "hinge", 0.1, check_psd="lanczos").converged
    w, V = np.linalg.eigh(K)
    w[0] = -1e-3 * w[-1]
    Kb = (V * w) @ V.T
    Kb = (Kb + Kb.T) / 2
    for loss in ("hinge", "squared"):  # (KRR too: its CG alone sees only pᵀ(K + λ/2)p ≤ 0)
        with pytest.raises(InvalidParameterError, match="'K'.*positive semidefinite"):
            machines.solve(da.from_array(Kb, chunks=70), y, loss, 0.1)
    with pytest.raises(InvalidParameterError, match="'check_psd'"):
        machines.solve(da.from_array(K, chunks=70), y, "hinge", 0.1, check_psd="cholesky")


def test_dask_solve_finite_or_error(client, problem):
    X, y, _, K = problem
    n = K.shape[0]

    def dk(M):
        return da.from_array(M, chunks=70)

    Kn = K.copy()
    Kn[200, 3] = np.nan  # in a lower block only: its mirror K[3, 200] is finite
    for loss in ("hinge", "logistic", "squared"):
        with pytest.raises(InvalidParameterError, match="'K'.*NaN or infinite"):
            machines.solve(dk(Kn), y, loss, 0.1, check_psd=False)
    Ka = K.copy()
    Ka[3, 200] += 1e-3 * np.abs(K).max()
    with pytest.raises(InvalidParameterError, match="'K'.*symmetric"):
        machines.solve(dk(Ka), y, "hinge", 0.1, check_psd=False)
    # asymmetric within √eps·max|K|: symmetrised as machines.solve does, the same solution
    Ks = K.copy()
    Ks[3, 200] += 1e-10 * np.abs(K).max()
    ref = machines.solve(Ks, y, "hinge", 0.1)
    got = machines.solve(dk(Ks), y, "hinge", 0.1, check_psd=False).alpha_.compute()
    assert np.max(np.abs(got - ref.alpha_)) <= 1e-10 * np.abs(ref.alpha_).max()
    bad_y = y.copy()
    bad_y[4] = 0.0
    for loss in ("hinge", "squared_hinge", "logistic"):
        with pytest.raises(InvalidParameterError, match="'y'"):
            machines.solve(dk(K), bad_y, loss, 0.1, check_psd=False)
    nan_y = y.copy()
    nan_y[5] = np.nan
    with pytest.raises(InvalidParameterError, match="'y'"):
        machines.solve(dk(K), nan_y, "epsilon_insensitive", 0.1, check_psd=False)
    with pytest.raises(InvalidParameterError, match="'y'"):
        machines.solve(dk(K), y[:-1], "hinge", 0.1, check_psd=False)
    for lam in (0.0, -1.0, np.nan):
        with pytest.raises(InvalidParameterError, match="'lam'"):
            machines.solve(dk(K), y, "hinge", lam, check_psd=False)
    with pytest.raises(InvalidParameterError, match="'loss'"):
        machines.solve(dk(K), y, "nope", 0.1)
    with pytest.raises(InvalidParameterError, match="'chunk'"):
        dask_machines.solve(dk(K), y, "hinge", 0.1, check_psd=False, chunk=0)
    with pytest.raises(InvalidParameterError, match="squared loss only"):
        dask_machines.solve(dk(K), y, "hinge", 0.1, check_psd=False, rank=10)
    with pytest.raises(InvalidParameterError, match="'tol'"):
        machines.solve(dk(K), y, "logistic", 0.1, check_psd=False, tol=-1.0)
    # finite inputs whose solution overflows: an error naming the input at fault, as machines.solve
    huge = 1e307 * (X[:, 0] - X[:, 1])
    with pytest.raises(InvalidParameterError, match="'y'"):
        machines.solve(K, huge, "epsilon_insensitive", 0.1)
    with pytest.raises(InvalidParameterError, match="'y'"):
        machines.solve(dk(K), huge, "epsilon_insensitive", 0.1, check_psd=False)
    assert n == 260


# ---------------------------------------------------------------------------- dynamics on a Dask Gram


@pytest.mark.parametrize("loss_name,kw", [
    ("hinge", {"reduction": "mean"}),
    ("logistic", {"alpha0": "random", "record_every": 3}),
    ("squared", {"g0": "random"}),
    ("hinge", {"batch_size": 40, "seed": 3, "decay": "batch", "record_subgradients": True}),
    ("squared_hinge", {"batch_size": 50, "seed": 4, "decay": "all", "record_subgradients": True}),
])
def test_subgradient_descent_on_dask_equals_numpy(client, problem, loss_name, kw):
    """dynamics.subgradient_descent with a Dask K (one block product per step) against the same call on the NumPy
    K; and the recorded Dask trajectory satisfies the variation-of-constants identity (38) evaluated on the dense K
    (discrete_closed_form: an independent route to g_T)."""
    X, y, Xt, K = problem
    n = K.shape[0]
    rng = np.random.default_rng(8)
    kw = dict(kw)
    for name in ("alpha0", "g0"):
        if kw.get(name) == "random":
            kw[name] = 0.05 * rng.standard_normal(n)
    Kt = kernels.fc(Xt, X, depth=1, get="ntk").ntk
    if "g0" in kw:
        kw["g0_test"] = 0.05 * rng.standard_normal(Kt.shape[0])
    target = X[:, 0] - X[:, 1] if loss_name == "squared" else y
    lam, lr, steps = 0.5, 0.01 if loss_name != "squared" else 0.002, 12
    ref = dynamics.subgradient_descent(K, target, loss_name, lam, lr, steps, K_test=Kt, **kw)
    Kd = da.from_array(K, chunks=_UNEVEN).persist()
    Ktd = da.from_array(Kt, chunks=(30, 70))
    got = dynamics.subgradient_descent(Kd, target, loss_name, lam, lr, steps, K_test=Ktd, check_psd=False, **kw)
    assert got.method == ref.method
    np.testing.assert_array_equal(got.steps, ref.steps)
    for field in ("alpha", "g_train", "g_test", "g0_weight", "times", "subgradients"):
        a, b = getattr(got, field), getattr(ref, field)
        if b is None:
            assert a is None
            continue
        assert a.shape == b.shape
        assert np.max(np.abs(a - b)) <= 1e-12 * max(1.0, np.abs(b).max()), field
    if kw.get("batch_masks") is not None or ref.batch_masks is not None:
        np.testing.assert_array_equal(got.batch_masks, ref.batch_masks)
    if kw.get("record_subgradients"):
        a_T, g_T, g_T_test = dynamics.discrete_closed_form(K, got.subgradients, lam, lr, K_test=Kt,
                                                           batch_masks=got.batch_masks)
        scale = np.abs(got.g_train).max()
        assert np.max(np.abs(g_T - got.g_train[-1])) <= 1e-12 * scale
        assert np.max(np.abs(g_T_test - got.g_test[-1])) <= 1e-12 * scale
    # a NumPy K_test with the Dask K: the same test outputs
    got_np = dynamics.subgradient_descent(Kd, target, loss_name, lam, lr, steps, K_test=Kt, check_psd=False, **kw)
    assert np.max(np.abs(got_np.g_test - ref.g_test)) <= 1e-12 * max(1.0, np.abs(ref.g_test).max())


def test_subgradient_descent_on_dask_finite_or_error(client, problem):
    X, y, _, K = problem
    Kn = K.copy()
    Kn[200, 3] = np.inf
    with pytest.raises(InvalidParameterError, match="'K'.*NaN or infinite"):
        dynamics.subgradient_descent(da.from_array(Kn, chunks=70), y, "hinge", 0.5, 0.01, 3, check_psd=False)
    Kd = da.from_array(K, chunks=70)
    Ka = K.copy()
    Ka[3, 200] *= 1 + 1e-9  # symmetric to √eps (machines would accept it), not to 100·eps (dynamics' test)
    with pytest.raises(InvalidParameterError, match="'K'.*symmetric"):
        dynamics.subgradient_descent(da.from_array(Ka, chunks=70), y, "hinge", 0.5, 0.01, 3, check_psd=False)
    bad = y.copy()
    bad[0] = 2.0
    with pytest.raises(InvalidParameterError, match="'y'"):
        dynamics.subgradient_descent(Kd, bad, "hinge", 0.5, 0.01, 3, check_psd=False)
    for lr in (0.0, 2.0, np.nan):  # lr in (0, 1/λ)
        with pytest.raises(InvalidParameterError, match="'lr'"):
            dynamics.subgradient_descent(Kd, y, "hinge", 0.5, lr, 3, check_psd=False)
    with pytest.raises(InvalidParameterError, match="'K_test'"):
        dynamics.subgradient_descent(Kd, y, "hinge", 0.5, 0.01, 3, K_test=da.ones((4, 7)), check_psd=False)
    # divergence of a smooth loss beyond its stability limit: an error naming lr, never a NaN trajectory
    with pytest.raises(InvalidParameterError, match="'lr'"):
        dynamics.subgradient_descent(Kd * 1e150, X[:, 0], "squared", 0.0, 1.0, 8, check_psd=False)


def test_gradient_flow_on_dask_is_refused_with_the_ways_out():
    K = np.eye(4) * 2.0
    y = np.array([1.0, -1.0, 1.0, -1.0])
    with pytest.raises(InvalidParameterError, match="gradient_flow on a Dask Gram.*subgradient_descent"):
        dynamics.gradient_flow(da.from_array(K, chunks=2), y, "hinge", 0.1, np.array([0.0, 1.0]))
    with pytest.raises(InvalidParameterError, match="gradient_flow on a Dask Gram"):
        dynamics.gradient_flow(K, y, "hinge", 0.1, np.array([0.0, 1.0]), K_test=da.from_array(K[:2], chunks=2))


def test_checked_gram_on_dask_is_refused_naming_the_way_out():
    """machines.checked_gram through its public path: the Dask engine answers (a refusal naming machines.solve)."""
    K = da.from_array(np.eye(4) * 2.0, chunks=2)
    with dask.config.set(scheduler=_no_compute):
        with pytest.raises(InvalidParameterError, match="machines.checked_gram is a Dask array.*machines.solve"):
            machines.checked_gram(K)


# ------------------------------------------------------------------- issue 26: K ⪰ 0 tested on Dask too
def _indefinite_above_minus_mu(n=50, nu=0.3, seed=0):
    """One eigenvalue −ν ∈ (−λ/2, 0) for λ = 1: K + μI ≻ 0, CG converges to a saddle of (7)."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    ev = np.linspace(0.5, 10.0, n)
    ev[0] = -nu
    K = (Q * ev) @ Q.T
    return (K + K.T) / 2, rng.standard_normal(n)


def test_krr_solve_cg_on_dask_runs_the_lanczos_psd_test(client):
    """Issue 26 item 4 on the Dask route of krr.solve_cg: the indefinite K that CG alone certified (converged=True)
    is refused by the Lanczos test (default, True, 'auto', 'lanczos'); 'cholesky' and undocumented values are
    refused naming check_psd, before any product; check_psd=False is the documented opt-out."""
    K, y = _indefinite_above_minus_mu()
    assert -0.5 < np.linalg.eigvalsh(K)[0] < 0
    Kd = da.from_array(K, chunks=20)
    for kw in ({}, {"check_psd": True}, {"check_psd": "auto"}, {"check_psd": "lanczos"}):
        with pytest.raises(InvalidParameterError, match="'K' parameter of krr.solve_cg must be positive "
                                                        "semidefinite: Lanczos found"):
            krr.solve_cg(Kd, y, 1.0, **kw)
    with dask.config.set(scheduler=_no_compute):
        for bad in ("cholesky", None, "yes", 1.5, 1):
            with pytest.raises(InvalidParameterError, match="'check_psd'"):
                krr.solve_cg(Kd, y, 1.0, check_psd=bad)
    assert krr.solve_cg(Kd, y, 1.0, check_psd=False).converged
    # a PSD K on Dask: the default test accepts it, and the result equals the NumPy route's
    Kp = K + 0.6 * np.eye(K.shape[0])
    m, m_np = krr.solve_cg(da.from_array(Kp, chunks=20), y, 1.0), krr.solve_cg(Kp, y, 1.0)
    assert m.converged and m.n_iter == m_np.n_iter
    assert np.linalg.norm(m.alpha_.compute() - m_np.alpha_) <= m.alpha_error_bound + m_np.alpha_error_bound


def test_check_psd_none_is_refused_on_dask_not_read_as_no_test(client):
    """Issue 26 item 5 on Dask: machines.solve (every loss), hard_margin_svm and subgradient_descent took
    check_psd=None (or 0) as "no test" (converged=True on an indefinite Gram); each now refuses it, before computing."""
    K, y = _indefinite_above_minus_mu()
    y = np.sign(y)
    Kd = da.from_array(K, chunks=20)
    with dask.config.set(scheduler=_no_compute):
        for bad in (None, 0, "yes"):
            for loss in ("hinge", "squared", "logistic"):
                with pytest.raises(InvalidParameterError, match="'check_psd' parameter of machines.solve"):
                    machines.solve(Kd, y, loss, 1.0, check_psd=bad)
            with pytest.raises(InvalidParameterError, match="'check_psd' parameter of machines.hard_margin_svm"):
                machines.hard_margin_svm(Kd, y, check_psd=bad)
        for bad in (None, 0, "auto"):  # documented as a bool
            with pytest.raises(InvalidParameterError, match="'check_psd' parameter of subgradient_descent"):
                dynamics.subgradient_descent(Kd, y, "hinge", 0.1, 0.1, 3, check_psd=bad)
    with pytest.raises(InvalidParameterError, match="'K'.*positive semidefinite"):
        machines.solve(Kd, y, "logistic", 1.0)


def test_squared_hinge_psd_rounding_level_with_tiny_lam_is_refused_on_dask(client):
    """Issue 26 item 9 on Dask: a rounding-level negative eigenvalue below −λ/2 (eigenvector y/√n, along which the
    dual box is unbounded) gave "internal error: unbounded direction"; now an error naming 'lam', as machines'."""
    rng = np.random.default_rng(1)
    n = 60
    y = np.sign(rng.standard_normal(n))
    v = y / np.sqrt(n)
    P = np.eye(n) - np.outer(v, v)
    X = P @ rng.standard_normal((n, 10))
    K = P @ (X @ X.T) @ P
    K = K - 4 * np.finfo(float).eps * np.linalg.norm(K, 2) * np.outer(v, v)
    K = (K + K.T) / 2
    assert np.linalg.eigvalsh(K)[0] < -1e-14 / 2
    with pytest.raises(InvalidParameterError, match="'lam' parameter of machines.solve is too small for the "
                                                    "squared_hinge loss.*lambda_min\\(K\\) <= -"):
        machines.solve(da.from_array(K, chunks=20), y, "squared_hinge", 1e-14)
