"""Dask scale-out (ntkref._dask, ntkref.krr on Dask) on a dask.distributed LocalCluster.

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

from ntkref import _dask, certify, kernels, krr, machines, nets  # noqa: E402
from ntkref._validation import InvalidParameterError  # noqa: E402


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
    {"depth": 2, "activation": "erf", "b_std": 0.1}, {"depth": 1, "activation": "tanh", "get": "nngp",
                                                      "quadrature_points": 12},
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
    got = _dask.cntk(da.from_array(imgs, chunks=(3, 2, 5, 5)), depth=1, readout="flatten")
    scale = np.sqrt(np.outer(np.diag(ref.ntk), np.diag(ref.ntk)))
    assert np.max(np.abs(got.ntk.compute() - ref.ntk) / scale) <= 1e-12
    assert np.max(np.abs(got.nngp.compute() - ref.nngp) / scale) <= 1e-12

    X = _data(n=90)
    net = nets.FullyConnected(X.shape[1], 32, depth=2)
    params = net.init(0, xp=array_api_compat.numpy)  # the chunks are NumPy, whatever NTKREF_BACKEND says
    ref = nets.empirical_ntk(net, params, X)
    got = _dask.empirical_ntk(net, params, da.from_array(X, chunks=25)).compute()
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
    assert np.all(np.abs(_dask.symmetric_matvec(Kd, v) - K @ v) <= tol + 2e-13 * np.abs(K).max())
    np.testing.assert_allclose(_dask.symmetric_matvec(Kd, v[:, 0]), (K @ v)[:, 0], rtol=1e-12)
    # a lower triangle that disagrees with the upper one is never read
    lower_poison = da.from_array(np.triu(K) + np.tril(np.full_like(K, np.nan), -1), chunks=70)
    assert np.all(np.abs(_dask.symmetric_matvec(lower_poison, v) - K @ v) <= tol + 2e-13 * np.abs(K).max())
    np.testing.assert_array_equal(_dask.diagonal(Kd), np.diag(K))


def test_krr_on_dask_equals_numpy_fit(client, problem):
    X, y, _, K = problem
    Kd = kernels.fc(da.from_array(X, chunks=70), depth=1, get="ntk").ntk.persist()
    for lam in (0.1,):  # one λ: every CG step is a round trip to the scheduler (~0.05 s here)
        ref = machines.fit(K, y, "squared", lam)
        m = _dask.solve(Kd, y, "squared", lam, preconditioner="nystrom", rank=40)
        assert _dask.is_dask(m.alpha_) and m.alpha_.chunks == (Kd.chunks[0],)
        alpha = m.alpha_.compute()
        assert m.converged and m.residual <= 1e-8
        assert np.linalg.norm(alpha - ref) <= m.alpha_error_bound
        # the same CG on the NumPy Gram takes the same steps
        m_np = krr.solve_cg(K, y, lam, preconditioner="nystrom", rank=40)
        assert m_np.n_iter == m.n_iter
        np.testing.assert_allclose(alpha, m_np.alpha_, rtol=0, atol=4 * m.alpha_error_bound)
    for loss in ("hinge", "logistic"):
        with pytest.raises(InvalidParameterError, match="krr.solve_cg") as exc:
            _dask.solve(Kd, y, loss, 0.1)
        assert "K.compute()" in str(exc.value)


def test_predictions_and_certificates_over_test_chunks_equal_numpy(client, problem):
    X, y, Xt, K = problem
    alpha = machines.fit(K, y, "squared", 0.1)
    Xtd = da.from_array(Xt, chunks=20)
    Kt_ref = kernels.fc(Xt, X, depth=1, get="ntk").ntk
    with dask.config.set(scheduler=_no_compute):
        Kt = kernels.fc(Xtd, da.from_array(X, chunks=70), depth=1, get="ntk").ntk
        g = _dask.predict(alpha, Kt)
        labels = np.sign(Kt_ref @ alpha)
        labels[:6] *= -1  # some misclassified points: radius 0
        radii = _dask.certified_radius(alpha, X, Xtd, y=labels, domain=(0.0, np.inf))
        radii_l2 = _dask.certified_radius(alpha, X, Xtd, norm="l2", method="paper")
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
    stored = _dask.store_gram(Kd, os.fspath(tmp_path / ("K" + ext)))
    assert stored.chunks == Kd.chunks
    direct = Kd.compute()
    assert np.array_equal(stored.compute(), direct)
    m_mem = krr.solve_cg(Kd.persist(), y, 1.0, rank=40, tol=1e-6)
    m_disk = krr.solve_cg(stored, y, 1.0, rank=40, tol=1e-6)
    assert np.array_equal(m_mem.alpha_.compute(), m_disk.alpha_.compute())
    with pytest.raises(InvalidParameterError, match="path"):
        _dask.store_gram(Kd, os.fspath(tmp_path / "K.csv"))


@pytest.mark.slow
def test_two_worker_processes_with_a_memory_limit(problem):
    """The same graph on two worker processes (pickled tasks, data moved between workers)."""
    X, y, Xt, K = problem
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="1GB",
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        Kd = kernels.fc(da.from_array(X, chunks=70), depth=1, get="ntk").ntk.persist()
        assert np.array_equal(Kd.compute(), Kd.compute().T)
        m = _dask.solve(Kd, y, "squared", 0.1, rank=40)
        ref = machines.fit(K, y, "squared", 0.1)
        assert np.linalg.norm(m.alpha_.compute() - ref) <= m.alpha_error_bound
        r = _dask.certified_radius(ref, X, da.from_array(Xt, chunks=35)).compute()
        assert np.array_equal(r, certify.certified_radius(ref, X, Xt))


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
            _dask.store_gram(da.from_array(Kb, chunks=2), path)
        assert not os.path.exists(path)
    with pytest.raises(InvalidParameterError, match="'K'.*real"):
        _dask.store_gram(da.from_array(K + 0j, chunks=2), os.fspath(tmp_path / ("C" + ext)))
    assert not os.path.exists(tmp_path / ("C" + ext))
    # finite, also at the extremes of float64: stored exactly
    Kx = np.outer([1e300, -1e-300, 1.0, 2.0, 0.0], [1.0, 1.0, -1.0, 0.5, 1.0])
    out = _dask.store_gram(da.from_array(Kx, chunks=2), os.fspath(tmp_path / ("X" + ext)))
    assert np.array_equal(out.compute(), Kx)


@pytest.mark.parametrize("ext", [".zarr", ".npy"])
def test_open_gram_reads_any_valid_blocking_and_refuses_invalid_chunks(tmp_path, ext):
    if ext == ".zarr":
        pytest.importorskip("zarr")
    K = np.arange(20.0).reshape(5, 4)
    path = os.fspath(tmp_path / ("K" + ext))
    _dask.store_gram(da.from_array(K, chunks=2), path)
    for chunks, want in ((((1, 4), (3, 1)), ((1, 4), (3, 1))), (3, ((3, 2), (3, 1))), (10, ((5,), (4,)))):
        G = _dask.open_gram(path, chunks=chunks)
        assert G.chunks == want
        assert np.array_equal(G.compute(), K)  # the same numbers whatever the blocking
    for bad in (0, -1, 1.5, float("nan"), True, "2", ((5,), (3,)), ((2, 3), (2, -2, 4)), ((5,),)):
        with pytest.raises(InvalidParameterError, match="'chunks'"):
            _dask.open_gram(path, chunks=bad)
