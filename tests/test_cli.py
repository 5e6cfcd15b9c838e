"""The ntkref command line: round trips, reports, and bad input refused with nothing written.

Most tests call ``ntkref.cli.main([...])`` in-process; one runs ``python -m ntkref.cli`` in a
subprocess (the installed ``ntkref`` entry point is ``ntkref.cli:main``).  Kernel values are
checked against the independent 50-digit mpmath evaluation of tests/_mp_reference.py, not only
against ntkref.  The computations run in the namespace of NTKREF_BACKEND (also ``--backend``) on the device of
NTKREF_DEVICE: the inputs read from files are moved there, and only the results come back to the host.
"""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from ntkref import cli

from ._mp_reference import fc_pair


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    x1 = rng.normal(size=(5, 3))
    x1[3] = 2.5 * x1[0]  # a parallel pair: the diagonal-like regime off the diagonal
    x2 = rng.normal(size=(4, 3))
    np.save(tmp_path / "a.npy", x1)
    np.save(tmp_path / "b.npy", x2)
    return tmp_path, x1, x2


def _mp_kernel(x1, x2, depth, W=1.0, b=0.0, which=1):
    return np.array([[float(fc_pair(a, c, depth, W, b)[which]) for c in x2] for a in x1])


def _listing(folder):
    return sorted(os.listdir(folder))


def run(args, capsys=None):
    code = cli.main([str(a) for a in args])
    out = capsys.readouterr() if capsys is not None else None
    return code, out


def test_kernel_round_trip_and_compare_passes(data, capsys):
    tmp, x1, _ = data
    code, _ = run(["kernel", "--x1", tmp / "a.npy", "--depth", 3, "--out", tmp / "k.npy"], capsys)
    assert code == 0
    K = np.load(tmp / "k.npy", allow_pickle=False)
    ref = _mp_kernel(x1, x1, 3)
    scale = np.sqrt(np.outer(np.diag(ref), np.diag(ref)))
    assert np.all(np.abs(K - ref) <= 1e-13 * scale)  # the documented accuracy, against mpmath
    assert np.array_equal(K, K.T)
    code, out = run(["compare", "--kind", "kernel", "--candidate", tmp / "k.npy", "--x1", tmp / "a.npy",
                     "--depth", 3], capsys)
    assert code == 0
    assert "RESULT: AGREE" in out.out and "max absolute error" in out.out and "max relative error" in out.out
    assert "documented accuracy of ntkref" in out.out


def test_compare_mpmath_candidate_agrees_at_1e_13(data, capsys):
    tmp, x1, x2 = data
    np.save(tmp / "mine.npy", _mp_kernel(x1, x2, 2, W=1.2, b=0.3))
    code, out = run(["compare", "--kind", "kernel", "--candidate", tmp / "mine.npy", "--x1", tmp / "a.npy",
                     "--x2", tmp / "b.npy", "--depth", 2, "--W-std", 1.2, "--b-std", 0.3, "--rtol", 1e-13], capsys)
    assert code == 0, out.out


def test_perturbed_file_fails_with_the_right_location(data, capsys):
    tmp, x1, _ = data
    assert run(["kernel", "--x1", tmp / "a.npy", "--depth", 2, "--out", tmp / "k.npy"], capsys)[0] == 0
    K = np.load(tmp / "k.npy")
    K[2, 4] *= 1 + 1e-8
    np.save(tmp / "bad.npy", K)
    report = tmp / "report.json"
    code, out = run(["compare", "--kind", "kernel", "--candidate", tmp / "bad.npy", "--x1", tmp / "a.npy",
                     "--depth", 2, "--report", report], capsys)
    assert code == 1
    assert "RESULT: DISAGREE" in out.out and "worst at (2, 4)" in out.out
    assert "max absolute error |cand - ref|" in out.out and "at (2, 4)" in out.out
    import json

    assert json.loads(report.read_text())["agree"] is False
    # a looser tolerance accepts it (normalised error ~1e-8)
    assert run(["compare", "--kind", "kernel", "--candidate", tmp / "bad.npy", "--x1", tmp / "a.npy",
                "--depth", 2, "--rtol", 1e-6], capsys)[0] == 0


def test_diagonal_tolerance_is_separate(data, capsys):
    tmp, x1, _ = data
    run(["kernel", "--x1", tmp / "a.npy", "--out", tmp / "k.npy"], capsys)
    K = np.load(tmp / "k.npy")
    K[1, 1] *= 1 + 1e-8  # a neural-tangents-sized diagonal error
    np.save(tmp / "diag.npy", K)
    base = ["compare", "--kind", "kernel", "--candidate", tmp / "diag.npy", "--x1", tmp / "a.npy"]
    code, out = run(base, capsys)
    assert code == 1 and "max diagonal normalised error" in out.out and "at (1, 1)" in out.out
    assert run(base + ["--diag-rtol", 1e-7], capsys)[0] == 0


def test_get_both_npz_cross_kernel_and_backends(data, capsys):
    pytest.importorskip("array_api_strict")  # --backend array_api_strict below
    tmp, x1, x2 = data
    for backend in ("numpy", "array_api_strict"):
        out = tmp / f"k_{backend}.npz"
        code, _ = run(["kernel", "--x1", tmp / "a.npy", "--x2", tmp / "b.npy", "--get", "both", "--depth", 1,
                       "--activation", "erf", "--W-std", "1.5,0.5", "--b-std", "0.1", "--backend", backend,
                       "--out", out], capsys)
        assert code == 0
        with np.load(out, allow_pickle=False) as z:
            assert sorted(z.files) == ["nngp", "ntk"]
            for which, key in ((0, "nngp"), (1, "ntk")):
                ref = np.array([[float(fc_pair(a, c, 1, [1.5, 0.5], [0.1, 0.1], "erf")[which]) for c in x2]
                                for a in x1])
                assert z[key].shape == (5, 4)
                np.testing.assert_allclose(z[key], ref, rtol=1e-13, atol=1e-15)


def test_npz_inputs_with_keys_and_float32(data, capsys):
    tmp, x1, x2 = data
    np.savez(tmp / "in.npz", x=x1, y=x2)
    code, _ = run(["kernel", "--x1", f"{tmp / 'in.npz'}:x", "--x2", f"{tmp / 'in.npz'}:y", "--dtype", "float32",
                   "--out", tmp / "k32.npy"], capsys)
    assert code == 0
    K = np.load(tmp / "k32.npy")
    assert K.dtype == np.float32
    ref = _mp_kernel(x1.astype(np.float32), x2.astype(np.float32), 1)
    assert np.max(np.abs(K - ref)) <= 1e-5 * np.max(np.abs(ref))  # documented float32 accuracy
    code, out = run(["kernel", "--x1", tmp / "in.npz", "--out", tmp / "k.npy"], capsys)
    assert code == 2 and "holds 2 arrays" in out.err and not (tmp / "k.npy").exists()


def test_pickled_npy_is_refused_and_nothing_written(data, capsys):
    tmp, *_ = data
    np.save(tmp / "obj.npy", np.array([[1.0, "a"], [None, 2]], dtype=object), allow_pickle=True)
    before = _listing(tmp)
    code, out = run(["kernel", "--x1", tmp / "obj.npy", "--out", tmp / "k.npy"], capsys)
    assert code == 2
    assert "pickled" in out.err and "allow_pickle=False" in out.err
    assert _listing(tmp) == before
    code, out = run(["compare", "--kind", "kernel", "--candidate", tmp / "obj.npy", "--x1", tmp / "a.npy",
                     "--report", tmp / "r.json"], capsys)
    assert code == 2 and "pickled" in out.err and _listing(tmp) == before


@pytest.mark.parametrize(
    "make, args, message",
    [
        (lambda t: np.save(t / "v.npy", np.ones(3)), ["--x1", "v.npy"], "2-d array"),
        (lambda t: np.save(t / "w.npy", np.ones((4, 2))), ["--x1", "a.npy", "--x2", "w.npy"], "same sample shape"),
        (lambda t: np.save(t / "c.npy", np.ones((2, 2)) + 1j), ["--x1", "c.npy"], "real numeric"),
        (lambda t: (t / "x.txt").write_text("1 2"), ["--x1", "x.txt"], ".npy file or a .npz"),
        (lambda t: None, ["--x1", "missing.npy"], "no such file"),
        (lambda t: (t / "bad.npy").write_bytes(b"not an npy file"), ["--x1", "bad.npy"], "cannot read"),
        (lambda t: np.save(t / "n.npy", np.array([[1.0, np.nan]])), ["--x1", "n.npy"], "NaN"),
    ],
)
def test_bad_inputs_give_clear_errors(data, capsys, make, args, message, monkeypatch):
    tmp, *_ = data
    make(tmp)
    monkeypatch.chdir(tmp)
    before = _listing(tmp)
    code, out = run(["kernel", *args, "--out", "k.npy"], capsys)
    assert code == 2
    assert message in out.err and out.err.startswith("ntkref kernel: error:")
    assert _listing(tmp) == before


def test_bad_outputs_and_candidate_shapes(data, capsys):
    tmp, *_ = data
    before = _listing(tmp)
    for out_arg, message in (("k.npy", "needs a .npz"), ("k.txt", "must end in .npy or .npz"),
                             (tmp / "nope" / "k.npz", "does not exist")):
        code, out = run(["kernel", "--x1", tmp / "a.npy", "--get", "both", "--out", out_arg], capsys)
        assert code == 2 and message in out.err
    np.save(tmp / "wrong.npy", np.ones((5, 4)))
    before = _listing(tmp)
    code, out = run(["compare", "--kind", "kernel", "--candidate", tmp / "wrong.npy", "--x1", tmp / "a.npy"], capsys)
    assert code == 2 and "does not match the kernel's shape (5, 5)" in out.err
    code, out = run(["compare", "--kind", "kernel", "--candidate", tmp / "wrong.npy"], capsys)
    assert code == 2 and "needs --x1" in out.err
    assert _listing(tmp) == before


def test_invalid_parameters_are_reported(data, capsys):
    tmp, *_ = data
    code, out = run(["kernel", "--x1", tmp / "a.npy", "--depth", -1, "--out", tmp / "k.npy"], capsys)
    assert code == 2 and "depth" in out.err and not (tmp / "k.npy").exists()
    code, out = run(["kernel", "--x1", tmp / "a.npy", "--depth", 2, "--W-std", "1,2", "--out", tmp / "k.npy"], capsys)
    assert code == 2 and "W_std" in out.err and not (tmp / "k.npy").exists()


def test_write_is_atomic(data, capsys, monkeypatch):
    tmp, *_ = data
    np.save(tmp / "k.npy", np.zeros((1, 1)))  # an existing output must survive a failed write untouched
    before = _listing(tmp)

    def broken_save(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np, "save", broken_save)
    capsys.readouterr()
    code = cli.main(["kernel", "--x1", str(tmp / "a.npy"), "--out", str(tmp / "k.npy")])
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert code == 2  # a failed write is one line on stderr, not a traceback
    assert err.count("\n") == 1 and "--out" in err and "disk full" in err and "Traceback" not in err
    assert _listing(tmp) == before  # no temporary file left behind
    assert np.array_equal(np.load(tmp / "k.npy"), np.zeros((1, 1)))


def test_unknown_commands_and_options_exit_2(capsys):
    for argv in (["kernl"], ["kernel", "--x1", "a.npy", "--out", "k.npy", "--frobnicate"],
                 ["compare", "--kind", "weights", "--candidate", "c.npy"], ["kernel", "--get", "all"]):
        with pytest.raises(SystemExit) as info:
            cli.main(argv)
        assert info.value.code == 2
        assert "error:" in capsys.readouterr().err
    assert cli.main([]) == 2  # no command: help on stderr


@pytest.mark.parametrize("command", [[], ["kernel"], ["fit"], ["dynamics"], ["certify"], ["compare"]])
def test_help_for_every_command(command, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(command + ["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ntkref") and "--help" in out


def test_subprocess_entry_point(data):
    tmp, *_ = data
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "ntkref.cli"]
    r = subprocess.run(cmd + ["kernel", "--x1", str(tmp / "a.npy"), "--depth", "2", "--out", str(tmp / "k.npy")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(cmd + ["compare", "--kind", "kernel", "--candidate", str(tmp / "k.npy"), "--x1",
                              str(tmp / "a.npy"), "--depth", "3"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 1 and "DISAGREE" in r.stdout  # depth 2 file against the depth 3 kernel
    r = subprocess.run(cmd + ["nonsense"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_cli_needs_no_hypothesis(data):
    # hypothesis is only in the [test] extra: the CLI (compare's measure and ntkref's bounds included) must work
    # without it, and `import ntkref.cli` must not load ntkref.testing (which needs it)
    tmp, *_ = data
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    a, k = str(tmp / "a.npy"), str(tmp / "k.npy")
    code = f"""
import sys
sys.modules["hypothesis"] = None  # `import hypothesis` now raises ImportError
import ntkref.cli

def loaded():
    return sorted(m for m in sys.modules if m == "ntkref.testing" or m.startswith("ntkref.testing."))

assert not loaded(), loaded()
try:
    ntkref.cli.main(["--version"])
except SystemExit as exc:
    assert exc.code == 0, exc.code
assert ntkref.cli.main(["kernel", "--x1", {a!r}, "--depth", "2", "--out", {k!r}]) == 0
assert ntkref.cli.main(["compare", "--kind", "kernel", "--candidate", {k!r}, "--x1", {a!r}, "--depth", "2"]) == 0
assert ntkref.cli.main(["compare", "--kind", "kernel", "--candidate", {k!r}, "--x1", {a!r}, "--depth", "3"]) == 1
err, _ = ntkref.cli.kernel_error([[1.0]], [[1.0]], [1.0])
assert err[0, 0] == 0.0
assert not loaded(), loaded()
try:
    import ntkref.testing
except ImportError as exc:
    assert "hypothesis" in str(exc), exc
else:
    raise AssertionError("ntkref.testing imported without hypothesis")
print("OK")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("ntkref ") and r.stdout.rstrip().endswith("OK")
    assert "RESULT: AGREE" in r.stdout and "DISAGREE" in r.stdout


# ---------------------------------------------------------------------------------------------
# fit, dynamics, certify
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def machine_data(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(8, 3))
    A = rng.normal(size=(8, 8))
    K = A @ A.T / 8 + 0.1 * np.eye(8)
    y = np.where(rng.normal(size=8) > 0, 1.0, -1.0)
    y[:2] = (1.0, -1.0)
    np.save(tmp_path / "K.npy", K)
    np.save(tmp_path / "y.npy", y)
    np.save(tmp_path / "x.npy", x)
    return tmp_path, K, y, x


def test_fit_krr_and_compare(machine_data, capsys):
    pytest.importorskip("ntkref.machines")
    tmp, K, y, _ = machine_data
    code, _ = run(["fit", "--K", tmp / "K.npy", "--y", tmp / "y.npy", "--loss", "squared", "--lam", 0.5,
                   "--out", tmp / "alpha.npz"], capsys)
    assert code == 0
    with np.load(tmp / "alpha.npz") as z:
        alpha = z["alpha"]
        np.testing.assert_allclose(z["g_train"], K @ alpha, rtol=1e-12)
    # independent closed form: (y − z)² without ½ ⇒ α = (K + (λ/2) I)⁻¹ y
    np.testing.assert_allclose(alpha, np.linalg.solve(K + 0.25 * np.eye(8), y), rtol=1e-10, atol=1e-12)
    np.save(tmp / "mine.npy", np.linalg.solve(K + 0.25 * np.eye(8), y))
    base = ["compare", "--kind", "fit", "--K", tmp / "K.npy", "--y", tmp / "y.npy", "--loss", "squared",
            "--lam", 0.5]
    code, out = run(base + ["--candidate", tmp / "mine.npy"], capsys)
    assert code == 0 and "objective eq. (7)" in out.out
    np.save(tmp / "wrong.npy", np.linalg.solve(K + 0.5 * np.eye(8), y))
    assert run(base + ["--candidate", tmp / "wrong.npy"], capsys)[0] == 1
    code, out = run(["fit", "--K", tmp / "y.npy", "--y", tmp / "y.npy", "--loss", "hinge", "--lam", 1,
                     "--out", tmp / "z.npy"], capsys)
    assert code == 2 and "square matrix" in out.err and not (tmp / "z.npy").exists()


def test_dynamics_flow_and_descent(machine_data, capsys):
    pytest.importorskip("ntkref.dynamics")
    from scipy.linalg import expm

    tmp, K, y, _ = machine_data
    lam, times = 0.3, [0.0, 0.5, 2.0]
    code, _ = run(["dynamics", "--K", tmp / "K.npy", "--y", tmp / "y.npy", "--loss", "squared", "--lam", lam,
                   "--times", ",".join(map(str, times)), "--out", tmp / "traj.npz"], capsys)
    assert code == 0
    n = len(y)
    A = np.zeros((n + 1, n + 1))
    A[:n, :n] = -lam * np.eye(n) - 2 * K  # dα/dt = −λα − 2(Kα − y) (squared loss without ½)
    A[:n, n] = 2 * y
    ref = np.array([K @ expm(A * t)[:n, n] for t in times])
    with np.load(tmp / "traj.npz") as z:
        np.testing.assert_allclose(z["g_train"], ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(z["times"], times)
    np.save(tmp / "g.npy", ref)
    base = ["compare", "--kind", "dynamics", "--K", tmp / "K.npy", "--y", tmp / "y.npy", "--loss", "squared",
            "--lam", lam, "--times", ",".join(map(str, times))]
    assert run(base + ["--candidate", tmp / "g.npy"], capsys)[0] == 0
    code, _ = run(["dynamics", "--K", tmp / "K.npy", "--y", tmp / "y.npy", "--loss", "hinge", "--lam", 0.1,
                   "--mode", "descent", "--lr", 0.1, "--steps", 5, "--out", tmp / "d.npy"], capsys)
    assert code == 0
    a = np.zeros(n)
    for _ in range(5):  # seed 000 eq. (5): strict hinge subgradient
        a = (1 - 0.1 * 0.1) * a + 0.1 * y * (y * (K @ a) < 1)
    np.testing.assert_allclose(np.load(tmp / "d.npy")[-1], K @ a, rtol=1e-12, atol=1e-14)
    code, out = run(["dynamics", "--K", tmp / "K.npy", "--y", tmp / "y.npy", "--loss", "squared", "--lam", 0.1,
                     "--out", tmp / "e.npy"], capsys)
    assert code == 2 and "needs --times" in out.err


def test_certify_and_compare(machine_data, capsys):
    certify = pytest.importorskip("ntkref.certify")
    tmp, _, y, x = machine_data
    alpha = y * 0.5
    np.save(tmp / "alpha.npy", alpha)
    np.save(tmp / "xt.npy", x[:4] + 0.05)
    code, _ = run(["certify", "--alpha", tmp / "alpha.npy", "--x-train", tmp / "x.npy", "--x-test", tmp / "xt.npy",
                   "--out", tmp / "r.npy"], capsys)
    assert code == 0
    r = np.load(tmp / "r.npy")
    ref = certify.certified_radius(alpha, x, x[:4] + 0.05)  # NumPy in, NumPy out: the host reference
    from ntkref._lib.backend import backend_name

    if backend_name() == "numpy":
        np.testing.assert_array_equal(r, ref)  # the same computation
    else:
        # the CLI computed on NTKREF_BACKEND's device: different rounding may move the bisection's grid snap
        # by one step; both radii are correct to certified_radius's stated relative tolerance (tol = 1e-4)
        np.testing.assert_allclose(r, ref, rtol=2e-4, atol=0)
    base = ["compare", "--kind", "certify", "--alpha", tmp / "alpha.npy", "--x-train", tmp / "x.npy",
            "--x-test", tmp / "xt.npy"]
    assert run(base + ["--candidate", tmp / "r.npy"], capsys)[0] == 0
    np.save(tmp / "r2.npy", r * 1.5 + 0.01)
    assert run(base + ["--candidate", tmp / "r2.npy"], capsys)[0] == 1
    np.save(tmp / "a3.npy", np.ones(3))
    code, out = run(["certify", "--alpha", tmp / "a3.npy", "--x-train", tmp / "x.npy", "--x-test", tmp / "xt.npy",
                     "--out", tmp / "r3.npy"], capsys)
    assert code == 2 and "one per training row" in out.err


def test_kernel_error_matches_definition():
    R = np.array([[4.0, -1.0], [-1.0, 1.0]])
    K = R + np.array([[0.0, 2e-3], [0.0, 0.0]])
    err, scale = cli.kernel_error(K, R, np.diag(R))
    assert err[0, 1] == pytest.approx(2e-3 / math.sqrt(4.0 * 1.0))
    assert err[1, 0] == 0.0 and scale[0, 1] == 2.0


def test_unavailable_backend_is_a_clear_error(data, capsys):
    tmp, *_ = data
    import importlib.util

    missing = next((b for b in ("cupy", "torch", "dask", "jax") if importlib.util.find_spec(b) is None), None)
    if missing is None:
        pytest.skip("every optional backend is installed")
    code, out = run(["kernel", "--x1", tmp / "a.npy", "--backend", missing, "--out", tmp / "k.npy"], capsys)
    assert code == 2 and missing in out.err and "cannot be imported" in out.err
    assert not (tmp / "k.npy").exists()


def test_compare_reports_non_finite_candidates_apart(data, capsys):
    """One NaN no longer turns every maximum into inf: the finite errors are summarised over the finite entries,
    the NaN is counted and listed apart (issue 15)."""
    import json

    tmp, x1, _ = data
    ref = _mp_kernel(x1, x1, 1)  # independent 50-digit values
    K = ref.copy()
    K[0, 3] = np.nan
    K[2, 4] = ref[2, 4] + 3e-9 * np.sqrt(ref[2, 2] * ref[4, 4])  # a finite error of 3e-9 in the normalised measure
    np.save(tmp / "nan.npy", K)
    code, out = run(["compare", "--kind", "kernel", "--candidate", tmp / "nan.npy", "--x1", tmp / "a.npy",
                     "--report", tmp / "r.json"], capsys)
    assert code == 1 and "worst at (0, 3)" in out.out
    assert "1 non-finite candidate entry" in out.out and "(0, 3) nan" in out.out
    rep = json.loads((tmp / "r.json").read_text())["arrays"]["ntk"]
    assert rep["n_entries"] == 25 and rep["n_finite"] == 24 and rep["n_non_finite"] == 1
    scaled = rep["errors"]["scaled"]
    assert scaled["location"] == [2, 4] and scaled["max"] == pytest.approx(3e-9, rel=1e-4)  # not inf
    assert rep["non_finite"][0]["row"] == 0 and rep["non_finite"][0]["col"] == 3
    assert rep["non_finite"][0]["candidate"] is None and rep["non_finite"][0]["non_finite"]["candidate"] == "nan"
    # 3e-9 at a generic pair is far above the precision band (1e3·eps·(d + L + 2 + κ) ~ 1e-12 here): a formula
    # error, not lost digits (issue 24: kinds by cause, not by size)
    assert rep["groups"]["non_finite"]["count"] == 1 and rep["groups"]["formula"]["count"] == 1
    assert rep["groups"]["precision"]["count"] == 0
    assert rep["groups"]["formula"]["worst"][0]["row"] == 2 and rep["groups"]["formula"]["worst"][0]["col"] == 4
    # the minimal example of a kernel entry is its pair of input rows
    minimal = rep["groups"]["formula"]["minimal"]["inputs"]
    assert minimal["x1_row"] == x1[2].tolist() and minimal["x2_row"] == x1[4].tolist()


def test_cntk_family_round_trip_against_golden(tmp_path, capsys):
    # the golden CNTK values (independent mpmath, ntkref/golden) through the CLI
    from ntkref import golden

    np.save(tmp_path / "img.npy", golden.inputs("images"))
    for readout in ("gap", "flatten"):
        out = tmp_path / f"c_{readout}.npz"
        code, _ = run(["kernel", "--family", "cntk", "--x1", tmp_path / "img.npy", "--depth", 2, "--readout", readout,
                       "--get", "both", "--out", out], capsys)
        assert code == 0
        with np.load(out) as z:
            for key in ("nngp", "ntk"):
                G = golden.values(f"cntk-{readout}-depth2", key)
                s = np.sqrt(np.diag(G))
                assert np.all(np.abs(z[key] - G) <= 1e-13 * np.outer(s, s))
        np.save(tmp_path / "g.npy", golden.values(f"cntk-{readout}-depth2", "ntk"))
        code, out_ = run(["compare", "--kind", "kernel", "--family", "cntk", "--candidate", tmp_path / "g.npy",
                          "--x1", tmp_path / "img.npy", "--depth", 2, "--readout", readout, "--rtol", 1e-13], capsys)
        assert code == 0, out_.out
    code, out_ = run(["kernel", "--family", "cntk", "--x1", tmp_path / "img.npy", "--x2",
                      tmp_path / "c_gap.npz:ntk", "--out", tmp_path / "bad.npy"], capsys)
    assert code == 2 and "4-d array" in out_.err and not (tmp_path / "bad.npy").exists()


# ---------------------------------------------------------------------------------------------
# where the work runs: NTKREF_BACKEND / NTKREF_DEVICE move the inputs (issue 16)
# ---------------------------------------------------------------------------------------------
def _record_devices(monkeypatch, module, name, seen):
    """Wrap ``module.name`` so that the namespaces/devices of its array arguments are recorded in ``seen``."""
    import array_api_compat

    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        for a in list(args) + list(kwargs.values()):
            if array_api_compat.is_array_api_obj(a):
                seen.append((type(a).__module__.split(".")[0], array_api_compat.device(a)))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)


def _cli_commands(tmp):
    x = tmp / "x.npy"
    return {
        "kernel": (("ntkref.kernels", "fc"), ["kernel", "--x1", x, "--depth", 2, "--get", "both", "--out", tmp / "k.npz"]),
        "fit": (("ntkref.machines", "solve"), ["fit", "--K", tmp / "K.npy", "--y", tmp / "y.npy", "--loss", "hinge",
                                                "--lam", 0.5, "--out", tmp / "a.npz"]),
        "dynamics": (("ntkref.dynamics", "subgradient_descent"),
                     ["dynamics", "--K", tmp / "K.npy", "--y", tmp / "y.npy", "--loss", "hinge", "--lam", 0.1,
                      "--mode", "descent", "--lr", 0.1, "--steps", 3, "--out", tmp / "d.npz"]),
        "certify": (("ntkref.certify", "certified_radius"),
                    ["certify", "--alpha", tmp / "alpha.npy", "--x-train", x, "--x-test", tmp / "xt.npy",
                     "--out", tmp / "r.npz"]),
    }


@pytest.mark.parametrize("command", ["kernel", "fit", "dynamics", "certify"])
def test_commands_run_on_the_env_device_and_say_so(machine_data, capsys, monkeypatch, command):
    """NTKREF_BACKEND=array_api_strict NTKREF_DEVICE=device1: the library function receives its inputs on device1
    (the CPU stand-in for a GPU: nothing may convert them to NumPy), the files hold the same numbers as the NumPy run
    (the strict namespace computes with NumPy underneath), and --json names the backend and device."""
    import importlib
    import json

    strict = pytest.importorskip("array_api_strict")
    tmp, K, y, x = machine_data
    np.save(tmp / "alpha.npy", 0.5 * y)
    np.save(tmp / "xt.npy", x[:4] + 0.05)
    (mod_name, fn), args = _cli_commands(tmp)[command]
    out_file = args[args.index("--out") + 1]
    monkeypatch.delenv("NTKREF_DEVICE", raising=False)
    monkeypatch.setenv("NTKREF_BACKEND", "numpy")
    assert run(args, capsys)[0] == 0
    with np.load(out_file) as z:
        expected = {k: z[k] for k in z.files}
    monkeypatch.setenv("NTKREF_BACKEND", "array_api_strict")
    monkeypatch.setenv("NTKREF_DEVICE", "device1")
    seen = []
    _record_devices(monkeypatch, importlib.import_module(mod_name), fn, seen)
    code, out = run(args + ["--json"], capsys)
    assert code == 0, out.err
    assert seen and all(s == ("array_api_strict", strict.Device("device1")) for s in seen), seen
    summary = json.loads(out.out)
    assert summary["command"] == command
    assert summary["backend"] == "array_api_strict on array_api_strict.Device('device1')"
    with np.load(out_file) as z:
        assert sorted(z.files) == sorted(expected) == sorted(summary["arrays"])
        for k in z.files:
            assert isinstance(z[k], np.ndarray) and z[k].shape == tuple(summary["arrays"][k]["shape"])
            np.testing.assert_array_equal(z[k], expected[k])


def test_compare_report_and_json_name_the_backend(data, capsys, monkeypatch):
    import json

    from ntkref._lib import backend as _backend

    tmp, *_ = data
    assert run(["kernel", "--x1", tmp / "a.npy", "--out", tmp / "k.npy"], capsys)[0] == 0
    code, out = run(["kernel", "--x1", tmp / "a.npy", "--out", tmp / "k.npy"], capsys)
    assert f"(computed on {_backend.description()})" in out.out
    base = ["compare", "--kind", "kernel", "--candidate", tmp / "k.npy", "--x1", tmp / "a.npy"]
    code, out = run(base + ["--report", tmp / "r.json"], capsys)
    assert code == 0 and f"reference computed on {_backend.description()}" in out.out
    report = json.loads((tmp / "r.json").read_text())
    assert report["agree"] is True and report["backend"] == _backend.description()
    code, out = run(base + ["--json"], capsys)
    summary = json.loads(out.out)  # nothing but the JSON object on stdout
    assert code == 0 and summary["agree"] is True and summary["backend"] == _backend.description()
    strict = pytest.importorskip("array_api_strict")
    monkeypatch.setenv("NTKREF_BACKEND", "array_api_strict")
    monkeypatch.setenv("NTKREF_DEVICE", "device1")
    code, out = run(base + ["--json"], capsys)
    assert code == 0 and json.loads(out.out)["backend"] == f"array_api_strict on {strict.Device('device1')!r}"


# ---------------------------------------------------------------------------------------------
# finite or an error: tolerances, options a family ignores, output paths
# ---------------------------------------------------------------------------------------------
def _one_line_error(out, *needles):
    assert out.err.count("\n") == 1 and "Traceback" not in out.err, out.err
    for needle in needles:
        assert needle in out.err, out.err


def _no_temporary_files(folder):
    return not [name for name in os.listdir(folder) if name.startswith(".ntkref-")]


@pytest.mark.parametrize("flag, value", [("--rtol", "nan"), ("--rtol", "inf"), ("--rtol", "-1"), ("--rtol", "-inf"),
                                         ("--diag-rtol", "nan"), ("--diag-rtol", "-1e-300"),
                                         ("--atol", "inf"), ("--atol", "nan"), ("--atol", "-1")])
@pytest.mark.parametrize("factor", [2.0, 1.0])  # a 2x wrong kernel (was AGREE for nan/inf), the exact one
def test_compare_tolerances_must_be_finite_and_non_negative(data, capsys, flag, value, factor):
    tmp, *_ = data
    assert run(["kernel", "--x1", tmp / "a.npy", "--out", tmp / "k.npy"], capsys)[0] == 0
    np.save(tmp / "cand.npy", factor * np.load(tmp / "k.npy"))
    before = _listing(tmp)
    code, out = run(["compare", "--kind", "kernel", "--candidate", tmp / "cand.npy", "--x1", tmp / "a.npy",
                     f"{flag}={value}", "--report", tmp / "r.json"], capsys)
    assert code == 2 and "RESULT" not in out.out  # no verdict from an invalid tolerance
    _one_line_error(out, flag, "finite")
    assert _listing(tmp) == before  # no report written


def test_valid_tolerances_still_give_the_verdicts(data, capsys):
    tmp, *_ = data
    run(["kernel", "--x1", tmp / "a.npy", "--out", tmp / "k.npy"], capsys)
    np.save(tmp / "twice.npy", 2 * np.load(tmp / "k.npy"))
    base = ["compare", "--kind", "kernel", "--x1", tmp / "a.npy", "--candidate"]
    assert run(base + [tmp / "twice.npy", "--rtol", "1e300"], capsys)[0] == 0
    assert run(base + [tmp / "twice.npy", "--rtol", "0", "--atol", "0"], capsys)[0] == 1
    # tolerance 0 asks for the exact kernel (verdicts against the exact value, ntkref._verdicts): ntkref's own
    # float kernel is not exact, and is proven so; the exact kernel, where it is a float, agrees
    assert run(base + [tmp / "k.npy", "--rtol", "0", "--atol", "0"], capsys)[0] == 1
    xi = np.array([[1.0, -2.0, 3.0, 0.0], [4.0, 1.0, -1.0, 2.0], [0.0, 0.0, 5.0, -3.0]])  # depth 0: x·x′/4, exact
    np.save(tmp / "xi.npy", xi)
    np.save(tmp / "exact0.npy", xi @ xi.T / 4)
    assert run(["compare", "--kind", "kernel", "--x1", tmp / "xi.npy", "--depth", "0", "--candidate",
                tmp / "exact0.npy", "--rtol", "0", "--atol", "0"], capsys)[0] == 0


@pytest.mark.parametrize("family, option", [("cntk", ["--activation", "erf"]), ("cntk", ["--activation", "relu"]),
                                            ("fc", ["--readout", "flatten"]), ("fc", ["--filter-size", "1"]),
                                            ("fc", ["--fix-first-last"])])
@pytest.mark.parametrize("command", ["kernel", "compare"])
def test_options_the_family_ignores_are_refused(tmp_path, capsys, family, option, command):
    x = np.random.default_rng(1).normal(size=(2, 1, 3, 3) if family == "cntk" else (3, 2))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "cand.npy", np.zeros((x.shape[0], x.shape[0])))
    tail = (["--out", tmp_path / "k.npy"] if command == "kernel"
            else ["--kind", "kernel", "--candidate", tmp_path / "cand.npy"])
    before = _listing(tmp_path)
    code, out = run([command, "--family", family, "--x1", tmp_path / "x.npy", *option, *tail], capsys)
    assert code == 2
    _one_line_error(out, option[0], f"--family {family}")
    assert _listing(tmp_path) == before


def test_family_defaults_unchanged(tmp_path, capsys):
    from ntkref import kernels

    x = np.random.default_rng(2).normal(size=(2, 1, 3, 3))
    np.save(tmp_path / "x.npy", x)
    assert run(["kernel", "--family", "cntk", "--x1", tmp_path / "x.npy", "--out", tmp_path / "k.npy"], capsys)[0] == 0
    ref = kernels.cntk(x, depth=1, readout="gap", filter_size=3).ntk  # NumPy in, NumPy out
    from ntkref._lib.backend import backend_name

    got = np.load(tmp_path / "k.npy")
    if backend_name() == "numpy":
        assert np.array_equal(got, ref)  # the same computation
    else:  # the CLI computed on NTKREF_BACKEND: other rounding, within cntk's stated float64 accuracy
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0)


def _fail_if_computed(monkeypatch):
    import ntkref.kernels

    def boom(*args, **kwargs):
        raise AssertionError("the reference was computed before the output path was checked")

    monkeypatch.setattr(ntkref.kernels, "fc", boom)


@pytest.mark.parametrize("where", ["folder", "missing-folder"])
def test_report_path_is_checked_before_computing(data, capsys, monkeypatch, where):
    tmp, *_ = data
    run(["kernel", "--x1", tmp / "a.npy", "--out", tmp / "k.npy"], capsys)
    report = tmp / "DIR.json"
    if where == "folder":
        report.mkdir()
    else:
        report = tmp / "nowhere" / "r.json"
    before = _listing(tmp)
    _fail_if_computed(monkeypatch)
    code, out = run(["compare", "--kind", "kernel", "--candidate", tmp / "k.npy", "--x1", tmp / "a.npy",
                     "--report", report], capsys)
    assert code == 2
    _one_line_error(out, "--report")
    assert _listing(tmp) == before and _no_temporary_files(tmp)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may write anywhere")
@pytest.mark.parametrize("option", ["--out", "--report"])
def test_unwritable_folder_is_refused_before_computing(data, capsys, monkeypatch, option):
    tmp, *_ = data
    run(["kernel", "--x1", tmp / "a.npy", "--out", tmp / "k.npy"], capsys)
    locked = tmp / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        _fail_if_computed(monkeypatch)
        if option == "--out":
            argv = ["kernel", "--x1", tmp / "a.npy", "--out", locked / "k.npy"]
        else:
            argv = ["compare", "--kind", "kernel", "--candidate", tmp / "k.npy", "--x1", tmp / "a.npy",
                    "--report", locked / "r.json"]
        code, out = run(argv, capsys)
        assert code == 2
        _one_line_error(out, option, "not writable")
        assert os.listdir(locked) == []
    finally:
        locked.chmod(0o700)


def test_failed_report_write_leaves_no_temporary_file(data, capsys, monkeypatch):
    tmp, *_ = data
    run(["kernel", "--x1", tmp / "a.npy", "--out", tmp / "k.npy"], capsys)
    before = _listing(tmp)

    def broken_replace(src, dst, **kwargs):
        raise OSError(28, "No space left on device")

    # the last step fails: the rename of a named temporary, or the link of an unnamed O_TMPFILE (whose
    # fallback, a named copy, is then renamed: also refused)
    monkeypatch.setattr(os, "replace", broken_replace)
    monkeypatch.setattr(os, "link", broken_replace)
    code, out = run(["compare", "--kind", "kernel", "--candidate", tmp / "k.npy", "--x1", tmp / "a.npy",
                     "--report", tmp / "r.json"], capsys)
    assert code == 2
    _one_line_error(out, "--report", "No space left")
    assert _listing(tmp) == before


@pytest.mark.parametrize("value", [1e300, -1e200, 1e160])
def test_kernel_inputs_beyond_the_representable_range_are_one_line_errors(tmp_path, capsys, value):
    np.save(tmp_path / "x.npy", np.array([[value, 0.0], [1.0, 1.0]]))
    code, out = run(["kernel", "--x1", tmp_path / "x.npy", "--b-std", 1.0, "--out", tmp_path / "k.npy"], capsys)
    assert code == 2
    _one_line_error(out, "'x1'", "representable range")
    assert _listing(tmp_path) == ["x.npy"]


# ---------------------------------------------------------------------------------------------
# compare: structured results (--report JSON, --csv), ntkref's bound in the verdict, convention hints (issue 15)
# ---------------------------------------------------------------------------------------------
_ENTRY_KEYS = {"row": (int,), "col": (int, type(None)), "candidate": (float, type(None)),
               "reference": (float, type(None)), "abs_error": (float, type(None)),
               "scaled_error": (float, type(None)), "tolerance": (float,), "tolerance_applied": (str,),
               "ratio": (float, type(None)), "part": (str, type(None)), "group": (str,), "non_finite": (dict,)}


def _check_entry(e):
    for key, types in _ENTRY_KEYS.items():
        assert isinstance(e[key], types), (key, e[key])
    assert e["tolerance_applied"] in ("user", "ntkref")
    assert e["group"] in ("ok", "non_finite", "convention", "formula", "precision")
    for field, text in e["non_finite"].items():
        assert e[field] is None and text in ("nan", "inf", "-inf")


def _check_report_schema(rep, arrays):
    """The documented schema of ntkref.cli._verdict (types of every field; numbers are numbers)."""
    from ntkref.cli import _verdict

    assert rep["schema"] == _verdict.SCHEMA_VERSION and rep["command"] == "compare"
    assert isinstance(rep["agree"], bool) and isinstance(rep["backend"], str)
    assert isinstance(rep["reference"]["function"], str) and isinstance(rep["reference"]["params"], dict)
    assert isinstance(rep["tolerance"]["rtol"], float) and isinstance(rep["tolerance"]["ntkref_bound_source"], str)
    assert sorted(rep["arrays"]) == sorted(arrays)
    assert all(isinstance(line, str) for line in rep["lines"])
    for h in rep["hints"]:
        assert isinstance(h["message"], str) and isinstance(h["hypothesis"], str)
    for a in rep["arrays"].values():
        for key in ("n_entries", "n_finite", "n_non_finite", "n_outside"):
            assert isinstance(a[key], int)
        assert a["n_finite"] + a["n_non_finite"] == a["n_entries"]
        assert a["tolerance_applied"]["user"] + a["tolerance_applied"]["ntkref"] == a["n_entries"]
        for stat in a["errors"].values():
            assert isinstance(stat["max"], (float, type(None))) and isinstance(stat["median"], (float, type(None)))
        for kind in ("non_finite", "convention", "formula", "precision"):
            g = a["groups"][kind]
            assert isinstance(g["count"], int)
            for e in g["worst"]:
                _check_entry(e)
                assert e["group"] == kind
        for e in a["non_finite"] + a["worst"]:
            _check_entry(e)
        assert a["n_outside"] == sum(a["groups"][k]["count"] for k in ("non_finite", "convention", "formula",
                                                                       "precision"))


def test_compare_report_schema_and_csv_table(data, capsys):
    """--report holds numbers in the documented schema, --csv one row per entry; both agree with an independent
    recomputation of the errors from the mpmath reference."""
    import csv
    import json

    tmp, x1, x2 = data
    ref = _mp_kernel(x1, x2, 2)
    d1 = np.array([float(fc_pair(a, a, 2, 1.0, 0.0)[1]) for a in x1])
    d2 = np.array([float(fc_pair(c, c, 2, 1.0, 0.0)[1]) for c in x2])
    scale = np.sqrt(np.outer(d1, d2))
    K = ref.copy()
    K[1, 2] += 4e-9 * scale[1, 2]
    K[3, 0] = np.inf
    np.save(tmp / "c.npy", K)
    code, out = run(["compare", "--kind", "kernel", "--candidate", tmp / "c.npy", "--x1", tmp / "a.npy", "--x2",
                     tmp / "b.npy", "--depth", 2, "--report", tmp / "r.json", "--csv", tmp / "r.csv"], capsys)
    assert code == 1
    rep = json.loads((tmp / "r.json").read_text())
    _check_report_schema(rep, ["ntk"])
    a = rep["arrays"]["ntk"]
    assert a["n_outside"] == 2 and a["errors"]["scaled"]["location"] == [1, 2]
    assert a["errors"]["scaled"]["max"] == pytest.approx(4e-9, rel=1e-4)
    assert a["non_finite"][0]["non_finite"]["candidate"] == "inf"
    with open(tmp / "r.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    from ntkref.cli import _verdict

    assert tuple(rows[0]) == _verdict.CSV_COLUMNS and len(rows) == K.size
    for r in rows:
        i, j = int(r["row"]), int(r["col"])
        assert float(r["reference"]) == pytest.approx(ref[i, j], rel=1e-13, abs=1e-13 * scale[i, j])
        outside = (i, j) in ((1, 2), (3, 0))
        assert int(r["outside"]) == outside and r["group"] == ("ok" if not outside else
                                                              "non_finite" if (i, j) == (3, 0) else "formula")
        if not outside:
            assert float(r["scaled_error"]) <= 1e-13  # ntkref vs mpmath: within ntkref's bound
    assert rows[3 * 4 + 0]["candidate"] == "inf" and rows[3 * 4 + 0]["scaled_error"] == "inf"


def test_compare_get_both(data, capsys):
    import json

    tmp, x1, x2 = data
    nngp, ntk = _mp_kernel(x1, x2, 2, which=0), _mp_kernel(x1, x2, 2, which=1)
    np.savez(tmp / "both.npz", nngp=nngp, ntk=ntk)
    base = ["compare", "--kind", "kernel", "--get", "both", "--x1", tmp / "a.npy", "--x2", tmp / "b.npy",
            "--depth", 2, "--rtol", 1e-13]
    code, out = run(base + ["--candidate", tmp / "both.npz", "--report", tmp / "r.json"], capsys)
    assert code == 0, out.out
    rep = json.loads((tmp / "r.json").read_text())
    _check_report_schema(rep, ["nngp", "ntk"])
    bad = nngp.copy()
    bad[0, 1] *= 1 + 1e-6
    np.savez(tmp / "bad.npz", nngp=bad, ntk=ntk)
    code, out = run(base + ["--candidate", tmp / "bad.npz", "--report", tmp / "r.json"], capsys)
    rep = json.loads((tmp / "r.json").read_text())
    assert code == 1 and not rep["arrays"]["nngp"]["agree"] and rep["arrays"]["ntk"]["agree"]
    assert rep["arrays"]["nngp"]["worst"][0]["row"] == 0 and rep["arrays"]["nngp"]["worst"][0]["col"] == 1
    np.save(tmp / "one.npy", ntk)
    code, out = run(base + ["--candidate", tmp / "one.npy"], capsys)
    _one_line_error(out, "--get both needs a .npz archive")
    assert code == 2
    np.savez(tmp / "half.npz", ntk=ntk)
    code, out = run(base + ["--candidate", tmp / "half.npz"], capsys)
    assert code == 2 and "has no array 'nngp'" in out.err


def test_compare_verdict_uses_ntkref_bound(data, capsys):
    """Verdicts against the exact kernel (ntkref._verdicts): at a user tolerance of 1e-14 — below the old floor
    max(τ, 1e-13) — the exact (50-digit mpmath) kernel agrees, every verdict proven, and an error of 3e-14 of the
    scale, which the old rule passed, is caught (proven); an error of 1e-12 at tolerance 0 too."""
    import json

    tmp, x1, x2 = data
    ref = _mp_kernel(x1, x2, 3, W=1.3, b=0.2)
    np.save(tmp / "exact.npy", ref)
    base = ["compare", "--kind", "kernel", "--x1", tmp / "a.npy", "--x2", tmp / "b.npy", "--depth", 3,
            "--W-std", 1.3, "--b-std", 0.2, "--report", tmp / "r.json"]
    code, out = run(base + ["--rtol", "1e-14", "--candidate", tmp / "exact.npy"], capsys)
    full = json.loads((tmp / "r.json").read_text())
    rep = full["arrays"]["ntk"]
    assert code == 0, out.out
    assert rep["tolerance_applied"] == {"user": 20, "ntkref": 0}
    assert rep["verdicts"]["n_proven"] == 20 and full["verdicts"]["n_proven"] == 20
    assert "verdicts proven: 20 of 20" in out.out
    d1 = np.array([float(fc_pair(a, a, 3, 1.3, 0.2)[1]) for a in x1])
    d2 = np.array([float(fc_pair(c, c, 3, 1.3, 0.2)[1]) for c in x2])
    bad = ref.copy()
    bad[4, 3] += 3e-14 * np.sqrt(d1[4] * d2[3])
    np.save(tmp / "bad.npy", bad)
    code, out = run(base + ["--rtol", "1e-14", "--candidate", tmp / "bad.npy"], capsys)
    rep = json.loads((tmp / "r.json").read_text())["arrays"]["ntk"]
    assert code == 1 and rep["n_outside"] == 1 and rep["verdicts"]["n_proven"] == 20  # the other 19 agree
    w = rep["worst"][0]
    assert (w["row"], w["col"]) == (4, 3) and w["tolerance"] == 1e-14
    assert w["tolerance_applied"] == "user" and w["proven"] is True
    bad[4, 3] = ref[4, 3] + 1e-12 * np.sqrt(d1[4] * d2[3])
    np.save(tmp / "bad.npy", bad)
    assert run(base + ["--rtol", "0", "--candidate", tmp / "bad.npy"], capsys)[0] == 1


def test_compare_kernel_convention_hints(data, capsys):
    """A candidate that is the NNGP (asked: NTK), or Arora et al.'s d·2^L·Θ, is named as such and grouped as a
    convention mismatch; an unrelated error gets no hint."""
    import json

    tmp, x1, _ = data
    d, L = x1.shape[1], 2
    base = ["compare", "--kind", "kernel", "--x1", tmp / "a.npy", "--depth", L, "--report", tmp / "r.json"]
    cases = [(_mp_kernel(x1, x1, L, which=0), "nngp instead of ntk", "matches the NNGP"),
             (d * 2.0 ** L * _mp_kernel(x1, x1, L), "factor", "d·2^L")]
    for cand, hypothesis, text in cases:
        np.save(tmp / "c.npy", cand)
        code, out = run(base + ["--candidate", tmp / "c.npy"], capsys)
        rep = json.loads((tmp / "r.json").read_text())
        assert code == 1 and text in out.out
        assert [h["hypothesis"].split(" ")[0] for h in rep["hints"]] == [hypothesis.split(" ")[0]]
        assert rep["arrays"]["ntk"]["groups"]["convention"]["count"] == rep["arrays"]["ntk"]["n_outside"] > 0
    wrong = _mp_kernel(x1, x1, L) + 1e-3  # not a convention: a formula error (not "lost digits"), and no hint
    np.save(tmp / "c.npy", wrong)
    code, out = run(base + ["--candidate", tmp / "c.npy"], capsys)
    rep = json.loads((tmp / "r.json").read_text())
    assert code == 1 and rep["hints"] == [] and rep["arrays"]["ntk"]["groups"]["formula"]["count"] == 25
    assert rep["arrays"]["ntk"]["groups"]["precision"]["count"] == 0 and "hint:" not in out.out


LAM, N = 0.5, 8


@pytest.mark.parametrize("lam_prime, hypothesis", [(LAM, None), (2 * LAM, "lam' = 2 lam"), (LAM / 2, "lam' = lam/2"),
                                                   (N * LAM, "lam' = n lam"), (LAM / N, "lam' = lam/n"),
                                                   (1 / LAM, "lam' = 1/lam")])
def test_compare_fit_convention_hints(machine_data, capsys, lam_prime, hypothesis):
    """Each usual slip, made on purpose with the independent closed form α = (K + (λ′/2)I)⁻¹y (squared loss
    without ½), is named; the candidate's own duality gap and KKT residual are reported and agree with an
    independent computation."""
    pytest.importorskip("ntkref.machines")
    import json

    tmp, K, y, _ = machine_data
    assert K.shape == (N, N)
    alpha = np.linalg.solve(K + lam_prime / 2 * np.eye(N), y)
    np.save(tmp / "cand.npy", alpha)
    code, out = run(["compare", "--kind", "fit", "--K", tmp / "K.npy", "--y", tmp / "y.npy", "--loss", "squared",
                     "--lam", LAM, "--candidate", tmp / "cand.npy", "--report", tmp / "f.json"], capsys)
    rep = json.loads((tmp / "f.json").read_text())
    _check_report_schema(rep, ["g_train"])
    # independent: P(α) = (λ/2)αᵀKα + Σ(y − Kα)², P* from the exact solution, KKT: α + l′(Kα)/λ = α − 2(y − Kα)/λ
    P = lambda a: LAM / 2 * a @ K @ a + np.sum((y - K @ a) ** 2)  # noqa: E731
    p_star = P(np.linalg.solve(K + LAM / 2 * np.eye(N), y))
    cand = rep["candidate"]
    assert cand["objective"] == pytest.approx(P(alpha), rel=1e-12)
    assert cand["duality_gap"] >= P(alpha) - p_star - 1e-12  # weak duality: the gap bounds the suboptimality
    if hypothesis is None:
        assert code == 0 and rep["hints"] == [] and abs(cand["duality_gap"]) <= 1e-10
    else:
        assert code == 1 and [h["hypothesis"] for h in rep["hints"]] == [hypothesis]
        assert f"hint: candidate matches {hypothesis}" in out.out
        assert rep["arrays"]["g_train"]["groups"]["convention"]["count"] == rep["arrays"]["g_train"]["n_outside"]
        assert cand["duality_gap"] > 1e-3
    if cand["kkt_residual"] is not None:
        assert cand["kkt_residual"] == pytest.approx(np.max(np.abs(alpha - 2 * (y - K @ alpha) / LAM)),
                                                     rel=1e-9, abs=1e-12)
