"""Proven verdicts (ntkref._verdicts): each kernel entry judged against the *exact* kernel of the exact float
inputs — by ntkref's proven error bound, or, within that bound of the threshold, by a ball-arithmetic enclosure —
and every report saying per entry whether its verdict is proven.

The independent route is python-flint's arb: the exact decision |C − K*| ≤ τ·√(K*(x,x)K*(x′,x′)) + atol is
evaluated at 300 bits from ntkref.enclosures (balls that contain K*), and every verdict marked proven must equal
it; candidates are placed at the threshold ± a few ulps, where the old rule (τ = max(user, 1e-13), round to
nearest) decides wrongly.
"""
import json
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkref import _verdicts as V
from ntkref import kernels
from ntkref import testing as T

flint = pytest.importorskip("flint")
from ntkref import enclosures  # noqa: E402  (needs flint at call time only)

P = dict(depth=3, activation="relu", W_std=1.0, b_std=0.0)


def basis_names(v):
    return np.array(V.BASES, dtype=object)[v["basis"]]


def adversarial_rows(rng, d=5):
    """Near-parallel (1e-9), antiparallel, duplicate, orthogonal, tiny (1e-150) and huge (1e100) rows."""
    x = rng.standard_normal((8, d))
    x[1] = x[0] * (1 + 1e-9)
    x[2] = -x[0]
    x[3] = x[0]
    x[4] = np.zeros(d)
    x[4][0], x[4][1] = x[0][1], -x[0][0]  # orthogonal to x[0] in the first two coordinates
    x[4][2:] = 0.0
    x[0][2:] = 0.0
    x[5] *= 1e-150
    x[6] *= 1e100
    return x


def exact_decision(C, x1, x2, which, params, tau, atol):
    """+1 pass / −1 fail of |C − K*| ≤ τ·s* + atol decided in arb at 300 bits (None if undecidable)."""
    e = getattr(enclosures.fc(x1, x2, get=which, prec=300, **params), which).balls
    d1 = getattr(enclosures.fc_diagonal(x1, get=which, prec=300, **params), which).balls
    d2 = d1 if x2 is None else getattr(enclosures.fc_diagonal(x2, get=which, prec=300, **params), which).balls
    out = np.zeros(C.shape, dtype=int)
    with flint.ctx.workprec(300):
        for (i, j), K in np.ndenumerate(e):
            t = tau[i, j] if np.ndim(tau) else tau
            s = (d1[i] * d2[j]).nonnegative_part().sqrt()
            v = abs(flint.arb(float(C[i, j])) - K) - flint.arb(float(t)) * s - flint.arb(float(atol))
            out[i, j] = 1 if v <= 0 else (-1 if v > 0 else 0)
    return out


def at_threshold(x1, x2, which, params, tau, side, ulps):
    """Candidates at K* + side·τ·s* moved ``ulps`` floats inward (ulps > 0: passes) or outward (< 0: fails)."""
    e = getattr(enclosures.fc(x1, x2, get=which, prec=300, **params), which).balls
    d1 = getattr(enclosures.fc_diagonal(x1, get=which, prec=300, **params), which).balls
    d2 = d1 if x2 is None else getattr(enclosures.fc_diagonal(x2, get=which, prec=300, **params), which).balls
    C = np.empty(e.shape)
    with flint.ctx.workprec(300):
        for (i, j), K in np.ndenumerate(e):
            t = K + side * flint.arb(tau) * (d1[i] * d2[j]).nonnegative_part().sqrt()
            c = float(t.mid())
            toward = -side if ulps > 0 else side
            for _ in range(abs(ulps)):
                c = float(np.nextafter(c, toward * np.inf))
            C[i, j] = c
    return C


# ---------------------------------------------------------------------------------------------------------------
# (a) ntkref's own kernel passes, proven, on adversarial inputs
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [0, 1, 3])
def test_ntkrefs_own_kernel_passes_proven_on_the_battery(depth):
    def own(x1, x2=None, *, which):
        return np.asarray(getattr(kernels.fc(x1, x2, depth=depth), which))

    report = T.check_kernel(own, depth=depth, activation="relu", W_std=1.0, b_std=0.0, max_examples=8,
                            mode="measure")
    assert report.passed
    assert report.n_proven == report.n_entries > 100 and report.n_tested == 0
    d = report.to_dict(entries="all")
    assert d["verdicts"]["n_proven"] == report.n_entries and d["verdicts"]["notes"] == []
    assert all(e["proven"] and e["verdict_basis"] in ("proven bound", "enclosure") for e in d["entries"])
    # the proven bound decides nearly all of them at the default 1e-10: the enclosure only a few
    assert d["verdicts"]["n_by_basis"]["enclosure"] <= report.n_entries // 10


def test_own_kernel_proven_on_the_env_device(asxp, xp):
    """The reference (and its bound) is computed on the backend's device; the enclosure is a host step."""
    rng = np.random.default_rng(3)
    x = adversarial_rows(rng)
    R, proof, why = V.prove_fc(asxp(x), None, which="ntk", params=P)
    assert why == "" and isinstance(R, np.ndarray) and proof.B.shape == R.shape
    own = np.asarray(kernels.fc(x, depth=3).ntk)
    v = V.judge(own, R, proof, user_tol=1e-14, atol=0.0, tested_bound=1e-13, scale=1.0)
    exact = exact_decision(own, x, None, "ntk", P, 1e-14, 0.0)
    assert v["proven"][exact != 0].all() and (v["outside"] == (exact < 0))[exact != 0].all()
    assert (exact != 0).all()


def test_float32_candidate_judged_against_the_float64_reference_proven():
    """A float32 candidate is judged against the float64 reference of the cast inputs: its bound is float64's."""
    def own32(x1, x2=None):
        return np.asarray(kernels.fc(x1, x2, depth=2).ntk)  # float32 in, float32 out

    report = T.check_kernel(own32, depth=2, activation="relu", W_std=1.0, b_std=0.0, which="ntk", dtype="float32",
                            max_examples=6, mode="measure")
    assert report.passed and report.n_proven == report.n_entries > 50


# ---------------------------------------------------------------------------------------------------------------
# (b) at the threshold ± a few ulps: the exact verdict, settled by the enclosure; the old rule decides wrongly
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("side", [1, -1])
@pytest.mark.parametrize("ulps", [3, -3])
def test_threshold_candidates_get_the_exact_verdict(side, ulps):
    rng = np.random.default_rng(11)
    x1 = adversarial_rows(rng)[:5]
    x2 = rng.standard_normal((3, 5))
    tau = 1e-14
    C = at_threshold(x1, x2, "ntk", P, tau, side, ulps)
    exact = exact_decision(C, x1, x2, "ntk", P, tau, 0.0)
    nonzero = np.abs(C) > 0
    assert (exact[nonzero] == (1 if ulps > 0 else -1)).all()  # the construction is what it says
    R, proof, _ = V.prove_fc(x1, x2, which="ntk", params=P)
    d1 = np.asarray(kernels.fc_diagonal(x1, **P).ntk)
    d2 = np.asarray(kernels.fc_diagonal(x2, **P).ntk)
    scale = np.sqrt(d1)[:, None] * np.sqrt(d2)[None, :]
    v = V.judge(C, R, proof, user_tol=tau, atol=0.0, tested_bound=1e-13, scale=scale)
    assert v["proven"].all()
    assert (v["outside"] == (exact < 0)).all()
    assert set(basis_names(v)[nonzero].tolist()) == {"enclosure"}  # within ntkref's bound of the threshold
    # the old rule, |C − R| ≤ max(τ, 1e-13)·s: passes every candidate outside the exact threshold (wrong)
    old_out = np.abs(C - R) > np.maximum(tau, 1e-13) * scale
    if ulps < 0:
        assert not old_out[nonzero].any()  # every wrong candidate passed by the old rule


def test_old_rule_fails_right_candidates_the_proven_verdict_passes():
    """At τ = 1e-10 (above the old floor) the old rule measures from the rounded R: a candidate just inside the
    exact threshold fails where R lies on the far side of K* — the proven verdict passes it."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((12, 40))
    tau = 1e-10
    C = at_threshold(x, None, "ntk", P, tau, 1, 1)  # one float inside
    exact = exact_decision(C, x, None, "ntk", P, tau, 0.0)
    assert (exact == 1).all()
    R, proof, _ = V.prove_fc(x, None, which="ntk", params=P)
    d = np.asarray(kernels.fc_diagonal(x, **P).ntk)
    scale = np.sqrt(d)[:, None] * np.sqrt(d)[None, :]
    v = V.judge(C, R, proof, user_tol=tau, atol=0.0, tested_bound=1e-13, scale=scale)
    assert v["proven"].all() and not v["outside"].any()
    old_out = np.abs(C - R) > np.maximum(tau, 1e-13) * scale
    assert old_out.any()  # the old rule failed right candidates
    assert (basis_names(v)[old_out] == "enclosure").all()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), depth=st.integers(0, 4), which=st.sampled_from(["nngp", "ntk"]),
       tau=st.sampled_from([0.0, 1e-15, 1e-14, 1e-12, 1e-10]), atol=st.sampled_from([0.0, 1e-300, 1e-16]))
def test_every_proven_verdict_equals_the_exact_decision(seed, depth, which, tau, atol):
    """Theorem check: on random candidates around the threshold (and far from it), each verdict marked proven is
    the exact decision (arb at 300 bits)."""
    rng = np.random.default_rng(seed)
    x = adversarial_rows(rng, d=int(rng.integers(1, 6)) + 1)[: int(rng.integers(2, 8))]
    params = dict(P, depth=depth)
    K = np.asarray(getattr(kernels.fc(x, depth=depth), which))
    d = np.asarray(getattr(kernels.fc_diagonal(x, depth=depth), which))
    scale = np.sqrt(d)[:, None] * np.sqrt(d)[None, :]
    C = K + rng.choice([-1, 1], K.shape) * tau * scale * rng.choice([0.0, 0.5, 1.0, 1.0 + 1e-3, 3.0], K.shape)
    C += rng.integers(-3, 4, K.shape) * np.spacing(np.abs(C))
    R, proof, why = V.prove_fc(x, None, which=which, params=params)
    v = V.judge(C, R, proof, user_tol=tau, atol=atol, tested_bound=1e-13, scale=scale)
    exact = exact_decision(C, x, None, which, params, tau, atol)
    sure = v["proven"] & (exact != 0)
    assert (v["outside"][sure] == (exact[sure] < 0)).all()
    assert v["proven"][exact != 0].all()  # with flint, nothing decidable is left unproven


# ---------------------------------------------------------------------------------------------------------------
# (c) without python-flint: undecided entries are not proven, and the note names the 'rigorous' extra
# ---------------------------------------------------------------------------------------------------------------
def test_without_flint_undecided_entries_are_tested_and_say_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "flint", None)  # `import flint` raises ImportError
    rng = np.random.default_rng(11)
    x1 = adversarial_rows(rng)[:5]
    x2 = rng.standard_normal((3, 5))
    monkeypatch.undo()
    C = at_threshold(x1, x2, "ntk", P, 1e-14, 1, -3)  # just outside: a wrong candidate
    monkeypatch.setitem(sys.modules, "flint", None)
    R, proof, _ = V.prove_fc(x1, x2, which="ntk", params=P)
    d1 = np.asarray(kernels.fc_diagonal(x1, **P).ntk)
    d2 = np.asarray(kernels.fc_diagonal(x2, **P).ntk)
    scale = np.sqrt(d1)[:, None] * np.sqrt(d2)[None, :]
    v = V.judge(C, R, proof, user_tol=1e-14, atol=0.0, tested_bound=1e-13, scale=scale)
    undecided = ~v["proven"]
    assert undecided.sum() >= 10 and set(basis_names(v)[undecided].tolist()) == {"tested bound"}
    assert any("rigorous" in n and "not proven" in n for n in v["notes"])
    assert (v["tol"][undecided] == 1e-13).all()  # judged as before: max(τ, b)
    # through check_kernel: a candidate 3 ulps outside at τ = 1e-14 passes the tested rule, not proven
    report = T.check_kernel(lambda a, b=None: kernels.fc(a, b, depth=3).ntk, depth=3, activation="relu",
                            W_std=1.0, b_std=0.0, which="ntk", diag_tol=1e-14, offdiag_tol=1e-14, max_examples=4,
                            battery=False, mode="measure")
    assert report.n_tested > 0 and any("rigorous" in n for n in report.verdicts["notes"])
    assert "not proven" in str(report) and "rigorous" in str(report)


# ---------------------------------------------------------------------------------------------------------------
# (d) where ntkref has no proven bound, the verdict is tested, and says so
# ---------------------------------------------------------------------------------------------------------------
def _erf_has_bound():
    try:
        kernels.fc(np.ones((1, 2)), depth=1, activation="erf", error_bound=True)
        return True
    except NotImplementedError:
        return False


@pytest.mark.parametrize("activation", ["erf", "tanh"])
def test_no_proven_bound_means_tested_verdicts(activation):
    def own(x1, x2=None):
        return np.asarray(kernels.fc(x1, x2, depth=2, activation=activation).ntk)

    report = T.check_kernel(own, depth=2, activation=activation, W_std=1.0, b_std=0.0, which="ntk",
                            max_examples=3, battery=False, mode="measure")
    assert report.passed
    if activation == "erf" and _erf_has_bound():
        assert report.n_proven == report.n_entries
    else:
        assert report.n_proven == 0 and report.n_tested == report.n_entries
        assert any("error_bound" in n and "not proven" in n for n in report.verdicts["notes"])
        assert all(not e["proven"] and e["verdict_basis"] == "tested bound" for e in report.entry_table())


def test_cntk_verdicts_are_tested():
    def own(x1, x2=None):
        return np.asarray(kernels.cntk(x1, x2, depth=1, readout="gap").ntk)

    report = T.check_cntk(own, depth=1, readout="gap", which="ntk", max_examples=2, battery=False,
                          mode="measure")
    assert report.passed and report.n_proven == 0 and report.n_tested == report.n_entries > 0
    assert any("CNTK" in n for n in report.verdicts["notes"])


# ---------------------------------------------------------------------------------------------------------------
# (e) ntkref compare: per-entry basis in the JSON report and the CSV, the count in the text
# ---------------------------------------------------------------------------------------------------------------
def test_cli_compare_reports_the_basis_per_entry(tmp_path, capsys):
    from ntkref.cli import main

    rng = np.random.default_rng(11)
    x1 = adversarial_rows(rng)[:5]
    x2 = rng.standard_normal((3, 5))
    np.save(tmp_path / "a.npy", x1)
    np.save(tmp_path / "b.npy", x2)
    C = at_threshold(x1, x2, "ntk", P, 1e-14, 1, -3)  # 3 ulps outside the exact threshold
    C[0, 0] = at_threshold(x1[:1], x2[:1], "ntk", P, 1e-14, 1, 3)[0, 0]  # one inside
    np.save(tmp_path / "c.npy", C)
    code = main(["compare", "--kind", "kernel", "--x1", str(tmp_path / "a.npy"), "--x2", str(tmp_path / "b.npy"),
                 "--depth", "3", "--rtol", "1e-14", "--candidate", str(tmp_path / "c.npy"),
                 "--report", str(tmp_path / "r.json"), "--csv", str(tmp_path / "r.csv")])
    out = capsys.readouterr().out
    assert code == 1 and "verdicts proven: 15 of 15" in out
    rep = json.loads((tmp_path / "r.json").read_text())
    arr = rep["arrays"]["ntk"]
    assert arr["verdicts"]["n_proven"] == 15 and rep["verdicts"]["n_by_basis"]["enclosure"] >= 14
    assert all(e["proven"] is True and e["verdict_basis"] == "enclosure" for e in arr["worst"])
    assert arr["n_outside"] == 14  # all but (0, 0): the exact verdicts
    import csv

    rows = list(csv.DictReader((tmp_path / "r.csv").read_text().splitlines()))
    assert len(rows) == 15 and {r["verdict_basis"] for r in rows} == {"enclosure"}
    assert {r["proven"] for r in rows} == {"1"}
    assert [r["outside"] for r in rows if (r["row"], r["col"]) == ("0", "0")] == ["0"]
    # the old rule (max(τ, 1e-13)) would have agreed: every candidate is within 1e-13 of the reference
    R = np.asarray(kernels.fc(x1, x2, depth=3).ntk)
    s = np.sqrt(np.asarray(kernels.fc_diagonal(x1, depth=3).ntk))[:, None] * \
        np.sqrt(np.asarray(kernels.fc_diagonal(x2, depth=3).ntk))[None, :]
    assert (np.abs(C - R) <= 1e-13 * s).all()


def test_cli_compare_tested_configuration_says_not_proven(tmp_path, capsys):
    from ntkref.cli import main

    x = 0.3 * np.random.default_rng(2).standard_normal((4, 3))
    np.save(tmp_path / "a.npy", x)
    np.save(tmp_path / "k.npy", np.asarray(kernels.fc(x, depth=1, activation="tanh").ntk))
    code = main(["compare", "--kind", "kernel", "--x1", str(tmp_path / "a.npy"), "--depth", "1", "--activation",
                 "tanh", "--candidate", str(tmp_path / "k.npy"), "--report", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert code == 0 and "verdicts proven: 0 of 16" in out and "not proven" in out
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["verdicts"] == {"n_proven": 0, "n_tested": 16,
                               "n_by_basis": {"proven bound": 0, "enclosure": 0, "tested bound": 16}}
