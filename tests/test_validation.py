"""The seed-000 reproduction pipeline (``python -m validation``): data, pieces, claims, report files.

The reproductions draw their data and initial weights on the host and run the heavy work on the backend of
``NTKREF_BACKEND``/``NTKREF_DEVICE`` (``validation.common.on_backend``), reading results back with ``host``; so these
tests run the pipeline on the backend under test (CI: NumPy, array_api_strict, array_api_strict on device1).  Sizes are
tiny; the real ``--quick`` run (< 3 min) is the slow test at the end.
"""
import gzip
import json
import os
import struct

import numpy as np
import pytest

from ntkref import certify, nets
from ntkref.data import N_DIGITS01, load_digits01

from validation import __main__ as main_mod
from validation import figureA1, figureB2, table1, table2, table3
from validation.common import HOST, Log, Settings, backend_description, host, on_backend
from validation.data import EMBEDDED_N_TRAIN, load_task

_QUICK = Settings.quick  # the real preset (tests below monkeypatch Settings.quick with tiny sizes)
SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "mnist-subset")


def tiny_settings(**kw):
    s = _QUICK()
    s.n_train, s.n_test = 120, 40
    s.t3_lams = (0.0, 1.0, 1000.0)
    s.f1_n, s.f1_n_test, s.f1_runs, s.f1_steps = 16, 8, ((0.1, 300), (0.1, 3000)), 4
    s.t2_widths, s.t2_seeds, s.t2_n_train, s.t2_steps = (100, 1000), (0,), 64, 8
    s.b2_n, s.b2_width, s.b2_steps, s.b2_chunk = 40, 20, 6, 3
    s.t1_n, s.t1_width, s.t1_steps = 12, 200, 6
    for k, v in kw.items():
        setattr(s, k, v)
    return s


# --------------------------------------------------------------------------- data
def test_embedded_digits_counts_and_types():
    images, labels, index = load_digits01(return_index=True)
    assert images.shape == (N_DIGITS01, 784) and images.dtype == np.uint8
    assert labels.dtype == np.uint8 and set(np.unique(labels)) == {0, 1}
    assert (int((labels == 0).sum()), int((labels == 1).sum())) == (1001, 1127)  # the subset's README counts
    assert np.all(np.diff(index) > 0)  # the subset's order is kept
    assert images.max() == 255 and images.min() == 0


@pytest.mark.skipif(not os.path.isdir(SHARED), reason="the source IDX subset is not on this machine")
def test_embedded_digits_round_trip_against_the_source_idx_files():
    # independent route: the IDX reader on the original gzip files, filtered to 0/1
    from ntkref.datasets import load_mnist

    src_images, src_labels = load_mnist(SHARED)
    images, labels, index = load_digits01(return_index=True)
    keep = np.nonzero((src_labels == 0) | (src_labels == 1))[0]
    np.testing.assert_array_equal(index, keep)
    np.testing.assert_array_equal(images, src_images[keep].reshape(-1, 784))
    np.testing.assert_array_equal(labels, src_labels[keep])


def test_task_split_is_deterministic_and_as_documented():
    t = load_task()
    assert (t.n_train, t.n_test) == (EMBEDDED_N_TRAIN, N_DIGITS01 - EMBEDDED_N_TRAIN) == (1700, 428)
    assert set(np.unique(t.y_train)) == {-1.0, 1.0} and set(np.unique(t.y_test)) == {-1.0, 1.0}
    assert t.x_train.dtype == np.float64 and 0.0 <= t.x_train.min() and t.x_train.max() <= 1.0
    images, labels = load_digits01()
    np.testing.assert_array_equal(t.x_test[0] * 255.0, images[1700].astype(float))
    np.testing.assert_array_equal(t.y_train, np.where(labels[:1700] == 1, 1.0, -1.0))
    s = t.subset(10, 5)
    assert (s.n_train, s.n_test) == (10, 5)
    np.testing.assert_array_equal(s.x_train, t.x_train[:10])


def _write_idx(path, array):
    codes = {np.dtype(np.uint8): 0x08}
    header = bytes([0, 0, codes[array.dtype], array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(header + array.tobytes())


def test_mnist_dir_option_reads_standard_names(tmp_path):
    rng = np.random.default_rng(0)
    for prefix, n in (("train-", 30), ("t10k-", 12)):
        labels = rng.integers(0, 10, size=n).astype(np.uint8)
        _write_idx(tmp_path / f"{prefix}images-idx3-ubyte.gz", rng.integers(0, 256, size=(n, 28, 28)).astype(np.uint8))
        _write_idx(tmp_path / f"{prefix}labels-idx1-ubyte.gz", labels)
        if prefix == "train-":
            train_labels = labels
    t = load_task(str(tmp_path))
    assert t.n_train == int(np.isin(train_labels, [0, 1]).sum())
    np.testing.assert_array_equal(t.y_train, np.where(train_labels[np.isin(train_labels, [0, 1])] == 1, 1.0, -1.0))


# --------------------------------------------------------------------------- pieces
def test_table3_claims_and_tight_never_below_paper_method():
    s = tiny_settings()
    task = load_task(n_train=s.n_train, n_test=s.n_test)
    sec = table3.run(task, s, Log(quiet=True))
    assert all(c.holds for c in sec.claims), [c.detail for c in sec.claims if not c.holds]
    rows = sec.results["rows"]
    assert [r["lam"] for r in rows] == [0.0, 1.0, 1000.0, s.t3_svm_lam, s.t3_svm_lam]
    for r in sec.extra["svm_row"], :
        # the tight interval method is provably never looser (certify module docstring): pointwise
        assert np.all(r["tight_radii"] >= r["paper_radii"])


def test_code_convention_ibp_radius_is_a_bisection_root_and_above_the_sound_one():
    rng = np.random.default_rng(1)
    net = nets.FullyConnected(6, 30)
    p0 = net.init(0, xp=HOST)
    p = [(W + 0.3 * rng.standard_normal(W.shape), b) for W, b in p0]
    x = rng.uniform(0, 1, size=(10, 6))
    # the section's route: parameters and inputs on the backend, the bisection on the host
    p0_d, p_d, x_d = on_backend(p0), on_backend(p), on_backend(x)
    f0 = host(net.apply(p0_d, x_d))
    g = host(net.apply(p_d, x_d)) - f0
    sign = np.sign(g)
    r = table2._code_convention_radius(net, p_d, f0, x_d, sign, iters=40)
    assert isinstance(r, np.ndarray)

    def margin(delta):  # an independent host evaluation (NumPy parameters and inputs)
        lo, hi = certify.ibp_bounds(net, p, x - delta[:, None], x + delta[:, None])
        return np.where(sign > 0, np.asarray(lo) - f0, -(np.asarray(hi) - f0))

    pos = r > 0
    assert pos.any()
    assert np.all(margin(r)[pos] > 0)  # certified at r
    assert np.all(margin(r * 1.001)[pos & (r * 1.001 < 0.3)] <= 0)  # not at a slightly larger radius
    # bounding f₀ over the ball too (sound) can only shrink the certificate: f₀ᵁ ≥ f₀(x₀)
    sound = host(certify.ibp_radius(net, p_d, x_d, params0=p0_d))
    assert np.all(sound <= r * (1 + 1e-3) + 1e-12)


def test_figureB2_chunked_theorem41_kernel_equals_one_chunk_and_matches_the_net():
    s1 = tiny_settings(b2_chunk=3)
    s2 = tiny_settings(b2_chunk=6)
    task = load_task(n_train=40, n_test=10)
    a = figureB2.run(task, s1, Log(quiet=True))
    b = figureB2.run(task, s2, Log(quiet=True))
    ra, rb = a.results["records"], b.results["records"]
    # K_T = (1 − ηλ)^{T₂} K_{T₁} + chunk sum: the same final KM whichever the chunking
    np.testing.assert_allclose(ra["km_train_hinge"][-1], rb["km_train_hinge"][-1], rtol=1e-12)
    np.testing.assert_allclose(ra["bound"][-1], rb["bound"][-1], rtol=1e-10)
    # Theorem 4.1 up to the second-order remainder: tiny against the outputs' scale
    assert max(ra["gap_train_max"]) < 1e-3
    assert all(c.holds for c in a.claims)


# --------------------------------------------------------------------------- the command
def test_report_pipeline_writes_files_and_exit_code(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(Settings, "quick", classmethod(lambda cls: tiny_settings()))
    rc = main_mod.main(["--quick", "--out", str(tmp_path), "--only", "table3", "figure1"])
    assert rc == 0
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    for title in ("Table 3", "Figure 1", "## Claims", "holds", "8.0540e-03"):  # the paper's SVM δ is quoted
        assert title in report
    data = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert data["settings"]["name"] == "quick" and all(c["holds"] for c in data["claims"])
    assert len(data["claims"]) == 6
    # the report and results.json say which backend and device ran
    assert data["backend"] == backend_description() and f"backend: **{backend_description()}**" in report
    for fn in ("table3.png", "figure1.png"):
        assert (tmp_path / fn).stat().st_size > 1000


def test_table2_and_table1_claims_hold_on_tiny_sizes():
    s = tiny_settings()
    task = load_task(n_train=s.n_train, n_test=s.n_test)
    svm = table3.run(task, s, Log(quiet=True)).extra
    sec = table2.run(task, s, Log(quiet=True), svm=svm)
    assert all(c.holds for c in sec.claims), [c.detail for c in sec.claims]
    nn = sec.results["nn"]
    for w in ("100", "1000"):  # sound IBP (f₀ bounded over the ball) never exceeds the official-code convention
        assert nn[w]["sound_full"][0] <= nn[w]["code_full"][0]
    sec1 = table1.run(task, s, Log(quiet=True))
    assert set(sec1.results["rows"]) == {"hinge", "squared_hinge", "epsilon_insensitive", "squared", "logistic"}
    assert all(c.holds for c in sec1.claims), [c.detail for c in sec1.claims]


def test_figureA1_runs_on_tiny_sizes():
    # a full-run section (not in --quick): its NN and SVM are trained on the backend, the curves read back on the host
    s = tiny_settings(a1_width=300, a1_n_train=100, a1_steps=10)
    sec = figureA1.run(load_task(n_train=100, n_test=30), s, Log(quiet=True))
    assert len(sec.claims) == 1 and not sec.claims[0].checked_in_quick
    assert "NN (width 300)" in sec.markdown and "SVM (NTK, batch-only decay)" in sec.markdown


def test_failed_claim_gives_nonzero_exit(tmp_path, monkeypatch):
    from validation.common import Claim

    real = table3.run

    def broken(*args, **kw):
        sec = real(*args, **kw)
        sec.claims.append(Claim("Table 3", "a claim that fails", False, "forced"))
        return sec

    monkeypatch.setattr(Settings, "quick", classmethod(lambda cls: tiny_settings()))
    monkeypatch.setattr(table3, "run", broken)
    assert main_mod.main(["--quick", "--no-figures", "--out", str(tmp_path), "--only", "table3"]) == 1


def test_documented_difference_is_reported_but_does_not_fail_the_run(tmp_path, monkeypatch):
    from validation.common import Claim

    real = table3.run

    def with_known(*args, **kw):
        sec = real(*args, **kw)
        sec.claims.append(Claim("Table 3", "a paper statement not reproduced", False, "documented", known_difference=True))
        return sec

    monkeypatch.setattr(Settings, "quick", classmethod(lambda cls: tiny_settings()))
    monkeypatch.setattr(table3, "run", with_known)
    assert main_mod.main(["--quick", "--no-figures", "--out", str(tmp_path), "--only", "table3"]) == 0
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "differs (documented)" in report
    data = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert [c["known_difference"] for c in data["claims"]].count(True) == 1


# --------------------------------------------------------------------------- where the work runs (issue 16)
def _strict_device1(monkeypatch):
    strict = pytest.importorskip("array_api_strict")
    monkeypatch.setenv("NTKREF_BACKEND", "array_api_strict")
    monkeypatch.setenv("NTKREF_DEVICE", "device1")
    return strict.Device("device1")


def test_on_backend_and_host_move_data_explicitly(monkeypatch):
    import array_api_compat

    dev = _strict_device1(monkeypatch)
    W, b, x = np.arange(6.0).reshape(2, 3), np.ones(3), np.eye(2)
    params = on_backend([(W, None), (W.T, b)])  # network parameters: a list of (W, b), b possibly None
    assert isinstance(params, list) and params[0][1] is None
    moved = [params[0][0], params[1][0], params[1][1], on_backend(x), on_backend(x, dtype=on_backend(x).dtype)]
    for a in moved:
        assert type(a).__module__.startswith("array_api_strict") and array_api_compat.device(a) == dev
    with pytest.raises((TypeError, ValueError, RuntimeError)):
        np.asarray(moved[0])  # device1 refuses the implicit conversion: only host() may bring it back
    back = host([params[1], 2.5, None])
    assert isinstance(back, list) and back[1] == 2.5 and back[2] is None
    np.testing.assert_array_equal(back[0][0], W.T)
    np.testing.assert_array_equal(back[0][1], b)
    assert isinstance(back[0][0], np.ndarray) and host(x) is x  # NumPy stays as it is
    assert backend_description() == "array_api_strict on array_api_strict.Device('device1')"
    monkeypatch.delenv("NTKREF_BACKEND")
    monkeypatch.delenv("NTKREF_DEVICE")
    assert on_backend(x) is x or np.shares_memory(on_backend(x), x)  # NumPy: nothing is copied


def test_sections_run_on_the_env_device_with_the_numpy_numbers(monkeypatch):
    """Table 3 and Figure B.2 (tiny) under NTKREF_BACKEND=array_api_strict NTKREF_DEVICE=device1: the heavy calls
    receive their arrays on device1 (the CPU stand-in for a GPU, where an implicit NumPy conversion fails), and the
    numbers equal the NumPy run's (the strict namespace computes with NumPy underneath; 1e-12 relative allows for a
    different summation order in a library routine)."""
    import array_api_compat

    from ntkref import bounds, certify as C, kernels, machines, nets as N

    s = tiny_settings(t3_lams=(0.0, 1.0))
    task = load_task(n_train=40, n_test=12)
    monkeypatch.delenv("NTKREF_DEVICE", raising=False)
    monkeypatch.setenv("NTKREF_BACKEND", "numpy")
    ref3, refb2 = table3.run(task, s, Log(quiet=True)), figureB2.run(task, s, Log(quiet=True))
    dev = _strict_device1(monkeypatch)
    seen = []
    for module, name in ((kernels, "two_layer_relu_ntk"), (machines, "fit"), (C, "certified_radius"),
                         (N, "train"), (bounds, "rademacher_bound")):
        real = getattr(module, name)

        def wrapper(*args, _real=real, _name=name, **kw):
            seen.append((_name, [(type(a).__module__.split(".")[0], array_api_compat.device(a))
                                 for a in list(args) + list(kw.values()) if array_api_compat.is_array_api_obj(a)]))
            return _real(*args, **kw)

        monkeypatch.setattr(module, name, wrapper)
    got3, gotb2 = table3.run(task, s, Log(quiet=True)), figureB2.run(task, s, Log(quiet=True))
    assert {n for n, _ in seen} == {"two_layer_relu_ntk", "fit", "certified_radius", "train", "rademacher_bound"}
    for name, arrays in seen:
        assert arrays and all(a == ("array_api_strict", dev) for a in arrays), (name, arrays)
    for a, b in zip(ref3.results["rows"], got3.results["rows"]):
        assert a["accuracy"] == b["accuracy"]
        for method in ("paper", "tight"):
            np.testing.assert_allclose(b[method]["mean"], a[method]["mean"], rtol=1e-12)
    for key in ("nn_train_hinge", "km_train_hinge", "bound", "gap_train_max"):
        np.testing.assert_allclose(gotb2.results["records"][key], refb2.results["records"][key], rtol=1e-12,
                                   atol=1e-15)
    assert [c.holds for c in got3.claims + gotb2.claims] == [c.holds for c in ref3.claims + refb2.claims]


def test_demo_subcommand_passes():
    assert main_mod.main(["demo", "--depth", "2"]) == 0


@pytest.mark.slow
def test_quick_mode_claims_hold(tmp_path):
    assert main_mod.main(["--quick", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "report.md").exists() and (tmp_path / "results.json").exists()
