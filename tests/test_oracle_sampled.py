"""Sampled checks of Grams too large to read whole (ntkref.kernels._sampled, ntkref.testing.check_gram_sample,
``ntkref compare --sample N / --rows K``).

The theorems checked: the zero-failure bound p_u = 1 − α^{1/N} is exactly the p at which (1 − p)^N = α and lies
below −ln(α)/N ≈ 3/N (rule of three); the Clopper–Pearson ends solve the binomial tail equations (checked with
an exact sum over math.comb, not with scipy); over many seeds the interval covers a planted fraction at least at
its nominal rate, and 0 failures at a fraction ≥ p_u happen at most at rate α.  The verdicts: a planted block of
wrong entries is found and located, a correct Gram passes, non-finite entries fail, the four readers (NumPy
memory map, Zarr, array-API array, callable) give the same numbers, and the scale is √K(x,x)·√K(x′,x′) (a row of
norm 1e-100 would make the product form 0).  The must-show: ``compare --sample 10000`` on a 60 000 × 60 000
float32 ``.npy`` (14.4 GB, ``-m slow``) with a planted 1 % block; the default suite runs the same on 3 000 × 3 000.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from ntkref import InvalidParameterError, cli, kernels
from ntkref.kernels._sampled import (check_sampled, detection_probability, fraction_interval, zero_failure_bound)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _binom_cdf(k, n, p):
    """P(X ≤ k), X ~ Binomial(n, p), by the exact sum (independent of scipy's Beta quantiles)."""
    return math.fsum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))


# ---------------------------------------------------------------------------------------------
# the statistics
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 3, 10, 300, 10_000, 10 ** 7])
def test_zero_failure_bound_is_the_exact_binomial_bound_and_below_the_rule_of_three(n):
    p = zero_failure_bound(n)
    assert math.isclose((1 - p) ** n, 0.05, rel_tol=1e-9)            # P(0 failures | p_u) = α exactly
    assert p <= -math.log(0.05) / n <= 3 / n                          # ≤ −ln α / N ≤ 3/N (rule of three)
    assert -math.log(0.05) / n - p <= (math.log(0.05) ** 2) / (2 * n * n) * 1.0001  # and close to it for large N
    assert zero_failure_bound(n, 0.99) > p                            # higher confidence, wider bound
    assert zero_failure_bound(0) == 1.0


@pytest.mark.parametrize("k, n", [(0, 20), (1, 20), (5, 20), (20, 20), (3, 200), (100, 10_000)])
def test_clopper_pearson_ends_solve_the_binomial_tail_equations(k, n):
    est, lo, hi = fraction_interval(k, n)
    assert est == k / n and 0 <= lo <= est <= hi <= 1
    if k > 0:   # P(X ≥ k | lo) = α/2
        assert math.isclose(1 - _binom_cdf(k - 1, n, lo), 0.025, rel_tol=1e-6)
    else:
        assert lo == 0
    if k < n:   # P(X ≤ k | hi) = α/2
        assert math.isclose(_binom_cdf(k, n, hi), 0.025, rel_tol=1e-6)
    else:
        assert hi == 1


def test_detection_probability_is_one_minus_the_miss_probability():
    assert math.isclose(detection_probability(1 / 60_000, 10_000), 1 - (1 - 1 / 60_000) ** 10_000, rel_tol=1e-12)
    assert 0.15 < detection_probability(1 / 60_000, 10_000) < 0.16    # the docstrings' "≈ 15 %"
    assert detection_probability(0.0, 10) == 0.0 and detection_probability(1.0, 10) == 1.0


@pytest.fixture(scope="module")
def gram100():
    x = np.random.default_rng(11).normal(size=(100, 4))
    return x, np.asarray(kernels.fc(x, depth=2, b_std=0.2).ntk)


def test_interval_covers_a_planted_fraction_at_its_nominal_rate(gram100):
    """100 of the 10 000 entries wrong (p = 0.01): over 200 seeds the 95 % Clopper–Pearson interval of 300 draws
    covers p in at least 90 % of the runs, and the count of failing draws averages N·p."""
    x, K = gram100
    bad = K.copy()
    flat = np.random.default_rng(0).choice(K.size, 100, replace=False)
    bad.flat[flat] *= 1.5
    covered, ks, zero = 0, [], 0
    for seed in range(200):
        r = check_sampled(bad, x, n_entries=300, seed=seed, depth=2, b_std=0.2, n_worst=0)
        covered += r.interval[0] <= 0.01 <= r.interval[1]
        ks.append(r.n_failed)
        zero += r.n_failed == 0
    assert covered >= 180, covered
    assert abs(np.mean(ks) - 3.0) < 0.5, np.mean(ks)
    # p = 0.01 ≥ p_u(300) = 0.00994: "0 failures" may happen with probability ≤ 0.05 only (0.99^300 = 0.049)
    assert zero_failure_bound(300) <= 0.01 and zero <= 20, zero


# ---------------------------------------------------------------------------------------------
# verdicts and readers
# ---------------------------------------------------------------------------------------------
def test_correct_gram_passes_and_planted_block_is_found_and_located(gram100):
    x, K = gram100
    ok = check_sampled(K, x, n_entries=2000, depth=2, b_std=0.2)
    assert ok.passed and ok.max_error <= 1e-13 and ok.upper_bound == zero_failure_bound(2000)
    assert "rule of three" in ok.statement and "not ruled out" in ok.statement
    bad = K.copy()
    bad[10:20, 40:60] += 1e-6                                  # 2 % of the entries, a tiny error
    r = check_sampled(bad, x, n_entries=2000, depth=2, b_std=0.2)
    assert not r.passed and r.upper_bound is None
    assert all(10 <= w["row"] < 20 and 40 <= w["col"] < 60 for w in r.worst if w["outside"])
    assert r.interval[0] <= 0.02 <= r.interval[1] and "Clopper-Pearson" in r.statement
    rows = check_sampled(bad, x, n_rows=30, depth=2, b_std=0.2)
    assert not rows.passed and rows.n_entries_compared == 100 * len(set(
        np.random.default_rng(0).integers(0, 100, size=30).tolist()))


def test_non_finite_entries_and_the_diagonal_tolerance(gram100):
    x, K = gram100
    bad = K.copy()
    bad[:, 7] = np.nan
    r = check_sampled(bad, x, n_rows=5, depth=2, b_std=0.2)
    assert not r.passed and r.n_non_finite == 5 and r.to_dict()["worst"][0]["scaled_error"] is None
    json.dumps(r.to_dict(), allow_nan=False)
    diag = K.copy()
    diag[np.diag_indices(100)] *= 1 + 1e-8
    assert not check_sampled(diag, x, n_rows=5, depth=2, b_std=0.2).passed
    assert check_sampled(diag, x, n_rows=5, depth=2, b_std=0.2, diag_tol=1e-7).passed
    assert check_sampled(diag, x, x, n_rows=5, depth=2, b_std=0.2, tol=1e-7).passed  # x2 given: no diagonal


def test_scale_is_the_product_of_square_roots_at_norm_1e_minus_100():
    """K(x,x)·K(x',x') underflows to 0 for a row of norm 1e-100; √K(x,x)·√K(x',x') does not, so a correct value
    perturbed by one part in 1e14 passes (the product form would demand exact equality and fail)."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(6, 3))
    x[2] *= 1e-100
    K = np.asarray(kernels.fc(x, depth=1).ntk)
    d = np.diag(K)
    assert d[2] * d[2] == 0.0 and math.sqrt(d[2]) * math.sqrt(d[2]) > 0
    C = K * (1 + 1e-14)
    assert check_sampled(C, x, n_rows=200, depth=1).passed
    scale_product = np.sqrt(d[2] * d[2])                     # the old form: 0, so any difference fails
    assert scale_product == 0 and C[2, 2] != K[2, 2]


def test_the_four_readers_agree(gram100, tmp_path, asxp):
    zarr = pytest.importorskip("zarr")
    x, K = gram100
    bad = K.copy()
    bad[30:50] *= 2
    np.save(tmp_path / "K.npy", bad)
    mm = np.load(tmp_path / "K.npy", mmap_mode="r")
    z = zarr.create_array(str(tmp_path / "K.zarr"), shape=bad.shape, chunks=(16, 16), dtype="f8")
    z[:] = bad
    calls = []

    def fn(*idx):
        calls.append(tuple(len(i) for i in idx))
        return bad[idx[0], idx[1]] if len(idx) == 2 else bad[idx[0], :]

    for kw in ({"n_entries": 500}, {"n_rows": 12}):
        results = [check_sampled(c, x, seed=3, depth=2, b_std=0.2, **kw).to_dict() for c in (bad, mm, z, fn,
                                                                                               asxp(bad))]
        readers = [r["config"].pop("reader") for r in results]
        assert readers == ["numpy", "numpy", "zarr", "callable", "numpy" if isinstance(asxp(bad), np.ndarray)
                           else "array"]
        for r in results:
            r.pop("seconds")
        assert all(r == results[0] for r in results[1:])
    # the callable was asked for the sampled entries and the distinct sampled rows only, never the whole Gram
    assert calls[0] == (500, 500) and calls[1][0] <= 12


def test_inputs_on_the_device_give_the_same_verdict(gram100, asxp):
    x, K = gram100
    a = check_sampled(K * (1 + 1e-9), x, n_entries=300, depth=2, b_std=0.2).to_dict()
    b = check_sampled(K * (1 + 1e-9), asxp(x), n_entries=300, depth=2, b_std=0.2).to_dict()
    for r in (a, b):
        r.pop("seconds")
    assert a["n_failed"] == b["n_failed"] == 300 and math.isclose(a["max_error"], b["max_error"], rel_tol=1e-6)


def test_errors_name_the_parameter(gram100):
    x, K = gram100
    for kw, name in (({}, "n_entries"), ({"n_entries": 5, "n_rows": 5}, "n_entries"), ({"n_entries": 0}, "n_entries"),
                     ({"n_rows": 3, "which": "both"}, "which"), ({"n_rows": 3, "tol": -1.0}, "tol"),
                     ({"n_rows": 3, "seed": 1.5}, "seed"), ({"n_rows": 3, "confidence": 1.0}, "confidence")):
        with pytest.raises(InvalidParameterError, match=f"'{name}'"):
            check_sampled(K, x, **kw)
    with pytest.raises(InvalidParameterError, match="'candidate'.*shape"):
        check_sampled(K[:50], x, n_rows=3)
    with pytest.raises(InvalidParameterError, match="'candidate'.*returned"):
        check_sampled(lambda *idx: np.zeros(3), x, n_entries=10)
    with pytest.raises(InvalidParameterError, match="'candidate'"):
        check_sampled("K.npy", x, n_rows=3)


def test_check_gram_sample_raises_oracle_mismatch(gram100):
    pytest.importorskip("hypothesis")
    from ntkref.testing import OracleMismatch, check_gram_sample

    x, K = gram100
    assert check_gram_sample(K, x, n_entries=200, depth=2, b_std=0.2).passed
    with pytest.raises(OracleMismatch, match="fail") as info:
        check_gram_sample(2 * K, x, n_entries=200, depth=2, b_std=0.2)
    assert info.value.report.n_failed == 200


# ---------------------------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------------------------
def _block_constant_gram(path, x_groups, group_size, depth, b_std, block, factor=1.001, rows_per_chunk=500):
    """Write the float32 Gram of x = each row of ``x_groups`` repeated ``group_size`` times (contiguous groups),
    as a .npy memory map, chunk by chunk; then multiply ``block`` (row slice, column slice) by ``factor``.
    The Gram is block-constant: K[i, j] = K_g[i // group_size, j // group_size]."""
    G = x_groups.shape[0]
    n = G * group_size
    Kg = np.asarray(kernels.fc(x_groups, depth=depth, b_std=b_std).ntk)
    mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, n))
    for r0 in range(0, n, rows_per_chunk):
        g = r0 // group_size
        assert (r0 + rows_per_chunk - 1) // group_size == g
        mm[r0:r0 + rows_per_chunk] = np.repeat(Kg[g], group_size).astype(np.float32)[None, :]
    if block is not None:
        rs, cs = block
        mm[rs, cs] = (mm[rs, cs].astype(np.float64) * factor).astype(np.float32)
    mm.flush()
    del mm
    return np.repeat(x_groups, group_size, axis=0)


def _groups(d=8):
    rng = np.random.default_rng(7)
    g = rng.normal(size=(6, d)).astype(np.float32).astype(np.float64)
    g[1] = -g[0]                       # antiparallel
    g[2] = (3 * g[0] + 1e-6 * g[3]).astype(np.float32)   # near-parallel
    g[4] *= 1e-30                     # tiny
    return g


def _run_compare(args):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "ntkref.cli", "compare", "--kind", "kernel", *args],
                       capture_output=True, text=True, env=env, timeout=600)
    return r, time.perf_counter() - t0


def _sampled_compare_finds_the_block(tmp_path, group_size, n_sample, limit_s):
    try:
        return _finds_the_block(tmp_path, group_size, n_sample, limit_s)
    finally:  # the Gram (14.4 GB in the slow test) is deleted at once, not left to pytest's retained tmp folders
        (tmp_path / "K.npy").unlink(missing_ok=True)


def _finds_the_block(tmp_path, group_size, n_sample, limit_s):
    n = 6 * group_size
    b = n // 10                        # a (n/10) × (n/10) block: 1 % of the entries
    block = (slice(2 * b, 3 * b), slice(5 * b, 6 * b))
    x = _block_constant_gram(tmp_path / "K.npy", _groups(), group_size, depth=2, b_std=0.1, block=None)
    np.save(tmp_path / "x.npy", x)
    common = ["--x1", str(tmp_path / "x.npy"), "--depth", "2", "--b-std", "0.1", "--candidate",
              str(tmp_path / "K.npy"), "--rtol", "1e-6", "--sample", str(n_sample)]
    good, t_good = _run_compare(common + ["--report", str(tmp_path / "good.json")])
    assert good.returncode == 0, good.stdout + good.stderr
    rep = json.loads((tmp_path / "good.json").read_text())
    assert rep["schema"] == "ntkref.compare-sample/1" and rep["agree"]
    assert rep["checks"][0]["upper_bound"] == pytest.approx(zero_failure_bound(n_sample))
    assert "rule of three" in good.stdout
    _block_constant_gram(tmp_path / "K.npy", _groups(), group_size, depth=2, b_std=0.1, block=block)  # plant
    bad, t_bad = _run_compare(common + ["--report", str(tmp_path / "bad.json")])
    assert bad.returncode == 1 and "DISAGREE" in bad.stdout, bad.stdout + bad.stderr
    chk = json.loads((tmp_path / "bad.json").read_text())["checks"][0]
    lo, hi = chk["interval"]
    assert chk["n_failed"] > 0 and lo <= 0.01 <= hi, chk
    for w in chk["worst"]:             # every failing entry lies in the planted block, none outside
        inside = 2 * b <= w["row"] < 3 * b and 5 * b <= w["col"] < 6 * b
        assert inside == w["outside"], w
    assert max(t_good, t_bad) < limit_s, (t_good, t_bad)
    return t_good, t_bad, chk


def test_compare_sample_finds_a_planted_one_percent_block_small(tmp_path):
    """The default suite's version of the must-show: 3 000 × 3 000 float32 .npy, --sample 2000."""
    _sampled_compare_finds_the_block(tmp_path, 500, 2000, 60)


@pytest.mark.slow
def test_compare_sample_10000_on_a_60000_gram_on_disk(tmp_path):
    """The must-show: a 60 000 × 60 000 float32 .npy (14.4 GB, written in full: the Gram of 6 distinct rows
    repeated 10 000 times each — antiparallel, near-parallel and tiny rows among them — with a 6 000 × 6 000 block,
    1 % of the entries, multiplied by 1.001); `ntkref compare --sample 10000` must finish in under a minute (a
    fresh process, import included) and find the block."""
    need = 60_000 * 60_000 * 4 + 2 ** 30
    free = shutil.disk_usage(tmp_path).free
    if free < need:
        pytest.skip(f"needs {need / 1e9:.1f} GB free in {tmp_path}, has {free / 1e9:.1f} GB")
    t_good, t_bad, chk = _sampled_compare_finds_the_block(tmp_path, 10_000, 10_000, 60)
    print(f"\n60000 x 60000 float32: compare --sample 10000 took {t_good:.1f} s (correct) and {t_bad:.1f} s "
          f"(planted block: {chk['n_failed']} of 10000 failing, interval {chk['interval']})")


def test_cli_rows_zarr_and_refusals(tmp_path, capsys):
    pytest.importorskip("zarr")
    import zarr

    x = np.random.default_rng(2).normal(size=(60, 3))
    K = np.asarray(kernels.fc(x, depth=1).ntk)
    np.save(tmp_path / "x.npy", x)
    z = zarr.create_array(str(tmp_path / "K.zarr"), shape=K.shape, chunks=(8, 8), dtype="f8")
    z[:] = K
    base = ["compare", "--kind", "kernel", "--x1", str(tmp_path / "x.npy"), "--depth", "1"]
    assert cli.main(base + ["--candidate", str(tmp_path / "K.zarr"), "--rows", "7", "--sample", "100"]) == 0
    out = capsys.readouterr().out
    assert "7 random rows" in out and "100 random entries" in out and "(zarr)" in out
    assert cli.main(base + ["--candidate", str(tmp_path / "K.zarr"), "--depth", "2", "--rows", "3", "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    assert not rep["agree"] and rep["checks"][0]["mode"] == "rows"
    np.savez(tmp_path / "K.npz", K=K)
    np.save(tmp_path / "K.npy", K)
    np.save(tmp_path / "x2.npy", x[:10])
    for extra, message in (
            (["--candidate", str(tmp_path / "K.npz"), "--sample", "5"], "cannot be memory-mapped"),
            (["--candidate", str(tmp_path / "K.npy"), "--sample", "5", "--get", "both"], "one kernel at a time"),
            (["--candidate", str(tmp_path / "K.npy"), "--sample", "5", "--csv", str(tmp_path / "e.csv")], "--csv"),
            (["--candidate", str(tmp_path / "K.npy"), "--sample", "0"], "--sample: must be >= 1"),
            (["--candidate", str(tmp_path / "nope.zarr"), "--rows", "2"], "no such Zarr array"),
            (["--candidate", str(tmp_path / "K.npy"), "--rows", "2", "--x2", str(tmp_path / "x2.npy")],
             "does not match the kernel's shape (60, 10)")):
        assert cli.main(base + extra) == 2, extra
        assert message in capsys.readouterr().err, extra
    assert cli.main(["compare", "--kind", "fit", "--candidate", str(tmp_path / "K.npy"), "--sample", "3"]) == 2
    assert "--kind kernel only" in capsys.readouterr().err
