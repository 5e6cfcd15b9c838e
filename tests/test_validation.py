"""The seed-000 reproduction pipeline (``python -m validation``): data, pieces, claims, report files.

The reproductions run on NumPy on the host whatever ``NTKREF_BACKEND`` says (networks are initialised in
``array_api_compat.numpy``), so these tests are the same under both CI backends.  Sizes are tiny; the real
``--quick`` run (< 3 min) is the slow test at the end.
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
from validation import figureB2, table1, table2, table3
from validation.common import HOST, Log, Settings
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
    f0 = np.asarray(net.apply(p0, x))
    g = np.asarray(net.apply(p, x)) - f0
    sign = np.sign(g)
    r = table2._code_convention_radius(net, p, f0, x, sign, iters=40)

    def margin(delta):
        lo, hi = certify.ibp_bounds(net, p, x - delta[:, None], x + delta[:, None])
        return np.where(sign > 0, np.asarray(lo) - f0, -(np.asarray(hi) - f0))

    pos = r > 0
    assert pos.any()
    assert np.all(margin(r)[pos] > 0)  # certified at r
    assert np.all(margin(r * 1.001)[pos & (r * 1.001 < 0.3)] <= 0)  # not at a slightly larger radius
    # bounding f₀ over the ball too (sound) can only shrink the certificate: f₀ᵁ ≥ f₀(x₀)
    sound = np.asarray(certify.ibp_radius(net, p, x, params0=p0))
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


def test_demo_subcommand_passes():
    assert main_mod.main(["demo", "--depth", "2"]) == 0


@pytest.mark.slow
def test_quick_mode_claims_hold(tmp_path):
    assert main_mod.main(["--quick", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "report.md").exists() and (tmp_path / "results.json").exists()
