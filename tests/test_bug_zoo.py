"""The bug zoo (issue 24): plausible NTK/CNTK implementation bugs, each caught by the default check with the right
kind and the right hint — and no wrong hint, on any seed.

Each candidate is what a user would write: a kernel function taking the configuration keywords (so the default
battery of configurations is swept, ``ntkref.testing._coverage``), with one planted bug.  Convention slips are
built from ntkref's own kernels under another convention (the slip, exactly); formula bugs are an independent FC
recursion (seed 001's, neural-tangents' conventions; checked against ``kernels.fc`` below before any bug is
planted) with one line changed.  For each bug and seed the check must

- fail (caught by the default battery),
- report the expected kind ("convention" with a hint naming the planted slip; "formula" with **no** hint;
  "precision" / "non_finite" for lost digits and underflow — never "convention"),
- report a minimal example whose error is within 10× of the worst error found (shrinking keeps the failure).

The fits and empirical-NTK entries of the zoo live with their checkers (tests/test_oracle_fits.py).
"""
import math

import numpy as np
import pytest

from ntkref import kernels
from ntkref import testing as T

SEEDS_FAST = (0, 1)
SEEDS_ALL = (0, 1, 2, 3, 4, 5)


# ---------------------------------------------------------------------------------------------
# an independent FC recursion (seed 001 eqs. for Σ, Σ̇, Θ; NT's W_std/b_std and 1/d), with switches for the bugs
# ---------------------------------------------------------------------------------------------
def _theta(k, q1, q2):
    s = np.sqrt(q1)[:, None] * np.sqrt(q2)[None, :]
    with np.errstate(all="ignore"):
        rho = np.clip(np.where(s > 0, k / np.where(s > 0, s, 1.0), 1.0), -1.0, 1.0)
    return np.arccos(rho), s


def _my_fc(x1, x2=None, *, depth=1, activation="relu", W_std=1.0, b_std=0.0, which="ntk", bug=None):
    x1 = np.asarray(x1, dtype=np.float64)
    x2 = x1 if x2 is None else np.asarray(x2, dtype=np.float64)
    if bug == "float32_inside":
        x1, x2 = x1.astype(np.float32), x2.astype(np.float32)
    d = x1.shape[1]
    W2, b2 = W_std**2, b_std**2
    k = W2 * (x1 @ x2.T) / d + b2
    q1 = W2 * np.sum(x1 * x1, axis=1) / d + b2
    q2 = W2 * np.sum(x2 * x2, axis=1) / d + b2
    if bug == "bias_hidden_layers":  # b² kept in the first layer, left out of the hidden layers
        b2 = 0.0
    theta = k.copy()
    for _ in range(depth):
        if activation == "relu":
            if bug == "nt_underflow":  # the product q1·q2 first, as some implementations do: 0 below ~1e-154
                s = np.sqrt(q1[:, None] * q2[None, :])
                with np.errstate(all="ignore"):
                    rho = np.clip(np.where(s > 0, k / np.where(s > 0, s, 1.0), 1.0), -1.0, 1.0)
                t = np.arccos(rho)
            else:
                t, s = _theta(k, q1, q2)
                if bug != "naive_arccos":  # the angle from both its cosine and its sine (no √eps loss near 0)
                    t = _accurate_angle(k, q1, q2, t)
            new_k = W2 * s / (2 * np.pi) * (np.sin(t) + (np.pi - t) * np.cos(t)) + b2
            dot = W2 * (np.pi - t) / (2 * np.pi)
            if bug == "sigma_dot_half":
                dot = dot / 2
            new_q1, new_q2 = W2 * q1 / 2 + b2, W2 * q2 / 2 + b2
        else:  # erf
            f = 1.0 if bug == "erf_arcsin_factor" else 2.0
            den = np.sqrt(1 + 2 * q1)[:, None] * np.sqrt(1 + 2 * q2)[None, :]  # no overflow at norms 1e150
            new_k = W2 * (2 / np.pi) * np.arcsin(np.clip(f * k / den, -1.0, 1.0)) + b2
            dot = W2 * (4 / np.pi) / (den * np.sqrt(np.maximum(1 - (2 * k / den) ** 2, 0.0)))
            new_q1 = W2 * (2 / np.pi) * np.arcsin(2 * q1 / (1 + 2 * q1)) + b2
            new_q2 = W2 * (2 / np.pi) * np.arcsin(2 * q2 / (1 + 2 * q2)) + b2
        theta = (theta * dot if bug == "ntk_missing_sigma" else new_k + theta * dot)
        k, q1, q2 = new_k, new_q1, new_q2
    return np.asarray(k if which == "nngp" else theta, dtype=np.float64)


def _accurate_angle(k, q1, q2, t):
    """θ where ρ is near ±1, from the stable half-angle form on the kernel values (NT's recursion has no rows)."""
    s = np.sqrt(q1)[:, None] * np.sqrt(q2)[None, :]
    with np.errstate(all="ignore"):
        # sin² θ = (s² − k²)/s² with s² − k² = (s − k)(s + k): one cancellation, in the difference s − |k|
        s1 = np.where(s > 0, s, 1.0)
        sin2 = np.where(s > 0, ((s - np.abs(k)) / s1) * ((s + np.abs(k)) / s1), 0.0)
        alt = np.arcsin(np.sqrt(np.clip(sin2, 0.0, 1.0)))
    alt = np.where(k < 0, np.pi - alt, alt)
    return np.where(np.abs(np.cos(t)) > 0.5, alt, t)


def _fc_bug(bug):
    """A library identical to ntkref but for one line: ntkref's value plus the planted line's effect (the same
    recursion with and without it, so that the recursion's own rounding cancels)."""

    def candidate(x1, x2=None, *, depth=1, activation="relu", W_std=1.0, b_std=0.0, which="ntk"):
        p = dict(depth=depth, activation=activation, W_std=W_std, b_std=b_std, which=which)
        exact = np.asarray(getattr(kernels.fc(x1, x2, **{k: v for k, v in p.items() if k != "which"}), which))
        with np.errstate(all="ignore"):
            return exact + (_my_fc(x1, x2, **p, bug=bug) - _my_fc(x1, x2, **p))

    candidate.__qualname__ = f"fc_{bug}"
    return candidate


def _fc_slip(**change):
    def candidate(x1, x2=None, *, depth=1, activation="relu", W_std=1.0, b_std=0.0, which="ntk"):
        p = dict(depth=depth, activation=activation, W_std=W_std, b_std=b_std, which=which)
        for key, f in change.items():
            p[key] = f(p[key]) if callable(f) else f
        w = p.pop("which")
        return getattr(kernels.fc(x1, x2, **p), w)

    return candidate


def _cntk_slip(transform):
    def candidate(x1, x2=None, *, depth=1, readout="gap", W_std=1.0, b_std=0.0, which="ntk"):
        return transform(x1, x2, dict(depth=depth, readout=readout, W_std=W_std, b_std=b_std), which)

    return candidate


def _cntk_of(x1, x2, p, which):
    return np.asarray(getattr(kernels.cntk(x1, x2, **p), which))


def _pixels(x1):
    return x1.shape[2] * x1.shape[3]


# (name, family, candidate, expected kind, a word the hint must contain ("" for no hint))
ZOO = [
    ("FC depth off by one (readout counted as a layer)", "fc", _fc_slip(depth=lambda L: L + 1), "convention",
     "depth="),
    ("FC missing bias term (b² left out)", "fc", _fc_slip(b_std=0.0), "convention", "b_std=0"),
    ("FC NNGP returned for the NTK", "fc", _fc_slip(which="nngp"), "convention", "NNGP"),
    ("FC W_std used where W_std² belongs", "fc", _fc_slip(W_std=lambda w: math.sqrt(w)), "convention", "W_std"),
    ("FC erf: factor 2 dropped inside arcsin", "fc", _fc_bug("erf_arcsin_factor"), "formula", ""),
    ("FC ReLU: Σ̇ halved", "fc", _fc_bug("sigma_dot_half"), "formula", ""),
    ("FC bias left out of the hidden layers (kept in the first)", "fc", _fc_bug("bias_hidden_layers"), "formula",
     ""),
    ("FC NTK without the Σ term of each layer", "fc", _fc_bug("ntk_missing_sigma"), "formula", ""),
    ("FC computed in float32 inside a float64 API", "fc", _fc_bug("float32_inside"), "formula", ""),
    ("CNTK GAP divided by H·W once, not (H·W)²", "cntk",
     _cntk_slip(lambda a, b, p, w: _cntk_of(a, b, p, w) * (_pixels(a) if p["readout"] == "gap" else 1)),
     "convention", "H·W"),
    ("CNTK Flatten readout where GAP is asked", "cntk",
     _cntk_slip(lambda a, b, p, w: _cntk_of(a, b, {**p, "readout": "flatten"}, w)), "convention", "readout"),
    ("CNTK depth off by one", "cntk",
     _cntk_slip(lambda a, b, p, w: _cntk_of(a, b, {**p, "depth": p["depth"] + 1}, w)), "convention", "depth="),
    ("CNTK NTK without the readout's Σ term", "cntk",
     _cntk_slip(lambda a, b, p, w: _cntk_of(a, b, p, w) - (_cntk_of(a, b, p, "nngp") if w == "ntk" else 0.0)),
     "formula", ""),
    ("FC ReLU angle by naive arccos(k/√(q1q2))", "fc", _fc_bug("naive_arccos"), "precision", ""),
]


def _run(family, candidate, seed):
    check = T.check_kernel if family == "fc" else T.check_cntk
    return check(candidate, seed=seed, raise_on_failure=False)


def _verify(name, report, kind, word):
    assert not report.passed, f"{name}: not caught\n{report}"
    f = report.failure
    row = {"bug": name, "kind": f.kind, "hint": f.hint, "reported": f.error,
           "worst": report.failures[f.kind].worst.error}
    assert f.kind == kind, f"{name}: kind {f.kind!r}, expected {kind!r}\n{report}"
    if kind == "formula":
        assert f.hint == "", f"{name}: a formula bug got a hint: {f.hint!r}"
    if kind == "convention":
        assert word in f.hint, f"{name}: hint {f.hint!r} does not name the slip ({word!r})"
    if kind in ("formula", "convention", "precision"):
        assert row["reported"] >= row["worst"] / 10, f"{name}: reported {row['reported']:.3e} vs worst " \
                                                     f"{row['worst']:.3e}\n{report}"
    return row


def test_the_independent_recursion_is_ntkrefs_before_any_bug():
    rng = np.random.default_rng(1)
    x1, x2 = rng.standard_normal((4, 3)), rng.standard_normal((3, 3))
    for depth in range(4):
        for act in ("relu", "erf"):
            for b in (0.0, 0.5):
                for which in ("nngp", "ntk"):
                    ref = getattr(kernels.fc(x1, x2, depth=depth, activation=act, W_std=1.5, b_std=b), which)
                    mine = _my_fc(x1, x2, depth=depth, activation=act, W_std=1.5, b_std=b, which=which)
                    np.testing.assert_allclose(mine, np.asarray(ref), rtol=1e-12, atol=0)


@pytest.mark.parametrize("seed", SEEDS_FAST)
@pytest.mark.parametrize("name, family, candidate, kind, word", ZOO, ids=[z[0] for z in ZOO])
def test_bug_zoo(name, family, candidate, kind, word, seed):
    _verify(name, _run(family, candidate, seed), kind, word)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [s for s in SEEDS_ALL if s not in SEEDS_FAST])
@pytest.mark.parametrize("name, family, candidate, kind, word", ZOO, ids=[z[0] for z in ZOO])
def test_bug_zoo_more_seeds(name, family, candidate, kind, word, seed):
    _verify(name, _run(family, candidate, seed), kind, word)


@pytest.mark.parametrize("seed", SEEDS_FAST)
def test_underflow_is_never_a_convention(seed):
    """neural-tangents' underflow (its q1·q2 product is 0 at row norms ~1e-150): non_finite or precision, never a
    convention, and no hint of one."""
    cand = _fc_bug("nt_underflow")
    r = _run("fc", cand, seed)
    assert not r.passed
    assert r.failure.kind in ("non_finite", "precision") and set(r.failures) <= {"non_finite", "precision"}
    assert "convention" not in r.failure.hint and "factor" not in r.failure.hint
    # the rows that show it are at an extreme scale (q1·q2 under- or overflows), and the hint says so
    x1, x2 = r.failure.inputs["x1"], r.failure.inputs["x2"]
    norms = np.linalg.norm(np.concatenate([x1] + ([] if x2 is None else [x2])), axis=1)
    norms = norms[norms > 0]
    assert np.min(norms) < 1e-75 or np.max(norms) > 1e75
    if r.failure.kind == "non_finite" and math.isfinite(r.failure.candidate_value):
        assert "underflow/overflow" in r.failure.hint
    # at 1e-150 explicitly: the candidate returns 0 where ntkref's value is ~1e-300
    x = np.array([[1e-150, 2e-150, 0.0], [3e-150, -1e-150, 1e-150]])
    K = cand(x, None, depth=1)
    R = np.asarray(kernels.fc(x, depth=1).ntk)
    assert np.all(R != 0) and np.any(K != R)
    r = T.check_kernel(cand, depth=1, activation="relu", W_std=1.0, b_std=0.0, which="ntk",
                       inputs=__import__("hypothesis").strategies.just((x, None)), max_examples=1,
                       raise_on_failure=False)
    assert r.failure.kind == "non_finite" and "underflow" in r.failure.hint


# ---------------------------------------------------------------------------------------------
# ntkref compare: the same diagnosis (kinds and hints) on a whole Gram
# ---------------------------------------------------------------------------------------------
def _compare(tmp_path, capsys, cand, x, *extra):
    import json

    from ntkref import cli

    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "c.npy", cand)
    code = cli.main([str(a) for a in ["compare", "--kind", "kernel", "--x1", tmp_path / "x.npy", "--candidate",
                                      tmp_path / "c.npy", "--report", tmp_path / "r.json", *extra]])
    out = capsys.readouterr().out
    return code, json.loads((tmp_path / "r.json").read_text()), out


def test_compare_names_a_slip_and_gives_a_formula_bug_no_hint(tmp_path, capsys):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 4))
    x[3] *= 1e-3
    opts = ["--depth", 2, "--b-std", 0.3]
    # a slip: the depth off by one (the readout counted as a layer)
    code, rep, out = _compare(tmp_path, capsys, _fc_slip(depth=lambda L: L + 1)(x, None, depth=2, b_std=0.3), x,
                              *opts)
    a = rep["arrays"]["ntk"]
    assert code == 1 and [h["hypothesis"] for h in rep["hints"]] == ["depth 3"]
    assert "depth=3, not 2" in out and a["groups"]["convention"]["count"] == a["n_outside"] > 0
    # a formula bug (Σ̇ halved): kind formula on every entry outside, and no hint at all
    code, rep, out = _compare(tmp_path, capsys, _fc_bug("sigma_dot_half")(x, None, depth=2, b_std=0.3), x, *opts)
    a = rep["arrays"]["ntk"]
    assert code == 1 and rep["hints"] == [] and "hint:" not in out
    assert a["groups"]["formula"]["count"] == a["n_outside"] > 0 and a["groups"]["convention"]["count"] == 0
    # lost digits only (the naive arccos near parallel rows): precision, no convention
    xp = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0 + 1e-9], [-1.0, 0.5, 2.0]])
    code, rep, out = _compare(tmp_path, capsys, _fc_bug("naive_arccos")(xp, None, depth=1), xp, "--depth", 1,
                              "--rtol", 1e-13)
    a = rep["arrays"]["ntk"]
    assert code == 1 and rep["hints"] == [] and a["groups"]["precision"]["count"] == a["n_outside"] > 0


def test_compare_calls_underflow_non_finite_not_a_convention(tmp_path, capsys):
    x = np.concatenate([np.random.default_rng(4).standard_normal((4, 3)),
                        np.array([[1e-150, 2e-150, 0.0], [3e-150, -1e-150, 1e-150]])])
    cand = _fc_bug("nt_underflow")(x, None, depth=1)
    code, rep, out = _compare(tmp_path, capsys, cand, x, "--depth", 1)
    a = rep["arrays"]["ntk"]
    assert code == 1 and rep["hints"] == [] and a["groups"]["convention"]["count"] == 0
    # the four entries between the two tiny rows are lost (0 or a wrong finite value at ~1e-300); its naive arccos
    # also loses digits on the diagonal of a unit-scale row: precision, never a convention or a formula
    assert a["groups"]["non_finite"]["count"] == 4 and a["groups"]["formula"]["count"] == 0
    assert a["groups"]["non_finite"]["count"] + a["groups"]["precision"]["count"] == a["n_outside"]
    assert all(e["row"] >= 4 and e["col"] >= 4 for e in a["groups"]["non_finite"]["worst"])


# ---------------------------------------------------------------------------------------------
# shrinking keeps the failure (issue 24, item 2)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS_FAST)
def test_shrinking_keeps_the_severe_failure(seed):
    """A GAP bug (×H·W) in a library that also wobbles at the 1e-8 level everywhere: the reported minimal example
    is the GAP failure (on an image of more than one pixel, error within 10× of the worst), not the wobble on a
    1-pixel image where GAP = Flatten and the bug cannot show."""

    def cand(x1, x2=None, *, depth=1, readout="gap", W_std=1.0, b_std=0.0, which="ntk"):
        K = _cntk_of(x1, x2, dict(depth=depth, readout=readout, W_std=W_std, b_std=b_std), which)
        return K * (_pixels(x1) if readout == "gap" else 1) * (1 + 1e-8 * np.sin(np.arange(K.size)).reshape(K.shape))

    r = T.check_cntk(cand, seed=seed, raise_on_failure=False)
    f = r.failure
    assert f.kind == "convention" and "H·W" in f.hint
    assert _pixels(f.inputs["x1"]) > 1 and f.error >= r.failures["convention"].worst.error / 10
    assert max(r.max_error.values()) >= f.error  # the reported example counts among the errors seen


@pytest.mark.parametrize("seed", SEEDS_FAST)
def test_shrinking_keeps_the_precision_magnitude(seed):
    """The naive arccos loses up to ~1e-8 near parallel rows: with a tolerance of 1e-13 many inputs fail by 1e-12,
    but the reported example stays within 10× of the worst error found (it used to shrink to ~1e-12)."""
    r = T.check_kernel(_fc_bug("naive_arccos"), depth=1, activation="relu", W_std=1.0, b_std=0.0, which="ntk",
                       diag_tol=1e-13, offdiag_tol=1e-13, seed=seed, raise_on_failure=False)
    f = r.failure
    assert f.kind == "precision" and f.error >= r.failures["precision"].worst.error / 10
    assert "worst precision error found" in str(r) or r.failures["precision"].worst is f
