"""The peer audit (validation/peers.py): its logic on a fake peer with known, injected errors, and a real run of
neural-tangents when it is importable (skipped otherwise).

The fake peer is ntkref's own kernels with errors planted where real implementations have them; the audit must
find each one, give the minimal example, and settle it with the independent mpmath value (tests/_mp_reference.py
here, validation/make_golden.py inside the audit: two separate 50/650-digit transcriptions).
"""
import math

import numpy as np
import pytest

pytest.importorskip("mpmath")

from ntkref import kernels  # noqa: E402
from validation import peers  # noqa: E402

from ._mp_reference import fc_pair  # noqa: E402


class FakePeer:
    """ntkref's kernels (host NumPy) with planted errors: the NTK diagonal × (1 + 3e-8) when n ≥ 2; NaN for row
    norms ≥ 2e77; 0 for every entry when a row norm is < 1e-120; erf NTK × 2 at variances > 1e6; the CNTK-flatten
    diagonal × (1 + 5e-10) in batches of ≥ 2 images."""

    def fc(self, x1, x2, get, *, depth, activation="relu", W_std=1.0, b_std=0.0):
        x1 = np.asarray(x1, dtype=np.float64)
        xs = x1 if x2 is None else np.concatenate([x1, np.asarray(x2, dtype=np.float64)])
        norms = np.linalg.norm(xs, axis=1)
        if np.any(norms >= 2e77):
            return np.full((len(x1), len(x1) if x2 is None else len(x2)), np.nan)
        if np.any(norms < 1e-120):
            return np.zeros((len(x1), len(x1) if x2 is None else len(x2)))
        K = np.asarray(getattr(kernels.fc(x1, x2, depth=depth, activation=activation, W_std=W_std, b_std=b_std), get))
        K = K.copy()
        if get == "ntk" and activation == "relu" and x2 is None and len(x1) >= 2:
            K[np.diag_indices(len(x1))] *= 1 + 3e-8
        if get == "ntk" and activation == "erf" and np.max(norms) ** 2 / x1.shape[1] > 1e6:
            K *= 2
        return K

    def cntk(self, x1, x2, get, *, depth, readout="flatten"):
        K = np.asarray(getattr(kernels.cntk(np.asarray(x1), None if x2 is None else np.asarray(x2), depth=depth,
                                            readout=readout), get)).copy()
        if readout == "flatten" and x2 is None and len(x1) >= 2:
            K[np.diag_indices(len(x1))] *= 1 + 5e-10
        return K


class ExactPeer:
    """ntkref itself: the audit must find nothing."""

    def fc(self, x1, x2, get, **params):
        return np.asarray(getattr(kernels.fc(np.asarray(x1), None if x2 is None else np.asarray(x2), **params), get))

    def cntk(self, x1, x2, get, **params):
        return np.asarray(getattr(kernels.cntk(np.asarray(x1), None if x2 is None else np.asarray(x2), **params), get))


def _mp(x1, x2, which, depth, activation="relu", W=1.0, b=0.0):
    idx = 0 if which == "nngp" else 1
    x2 = x1 if x2 is None else x2
    return np.array([[float(fc_pair(a, c, depth, W, b, activation)[idx]) for c in x2] for a in x1])


def test_diagonal_error_found_with_minimal_example():
    measured, found = peers.check_ntk_diagonal(FakePeer(), "fake", dims=(5,), draws=1)
    assert len(found) == 1
    d = found[0]
    x = np.array(d.example["x1"])
    assert x.shape == (2, 5) and measured["minimal_shape"] == [2, 5]  # one row is exact in the fake: two needed
    i, j = d.extra["entry"]
    assert i == j
    truth = _mp(x, None, "ntk", 2)[i, i]  # the independent mpmath value
    assert d.true_value == pytest.approx(truth, rel=1e-15)
    assert d.scaled_error == pytest.approx(3e-8, rel=1e-6) and d.kind == "precision"
    assert d.ntkref_error <= 1e-13


def test_overflow_minimal_example_is_2e77():
    measured, found = peers.check_overflow(FakePeer(), "fake")
    assert measured["first_non_finite"] == 2e77
    d = found[0]
    assert d.example == {"x1": [[2e77]]} and d.kind == "non_finite" and math.isnan(d.peer_value)
    # depth 1, W = 1, no bias, d = 1: Σ⁰ = s², nngp = s²/2, Θ = s²/2 + s²·(1/2) = s²
    assert d.true_value == pytest.approx(4e154, rel=1e-15)


def test_underflow_zero_found():
    measured, found = peers.check_underflow(FakePeer(), "fake")
    checks = {d.check: d for d in found}
    assert "underflow_zero" in checks and checks["underflow_zero"].peer_value == 0.0
    # the first scale below the planted threshold 1e-120 (rows of norm ~10^-k·|u|): the truth is a normal float64
    assert measured["first_scale_zero"] in (1e-120, 1e-121)
    d = checks["underflow_zero"]
    x = np.array(d.example["x1"])
    i, j = d.extra["entry"]
    truth = _mp(x, None, "ntk", 1)[i, j]
    assert truth != 0 and abs(truth) >= np.finfo(np.float64).tiny and d.true_value == pytest.approx(truth, rel=1e-15)


def test_erf_factor_two_found():
    measured, found = peers.check_erf(FakePeer(), "fake", quick=True)
    d = next(d for d in found if d.check == "erf_ntk")
    x = np.array(d.example["x1"])
    i, j = d.extra["entry"]
    p = d.extra["params"]
    truth = _mp(x, None, "ntk", p["depth"], "erf", p["W_std"], p["b_std"])[i, j]
    assert d.peer_value == pytest.approx(2 * truth, rel=1e-12) and d.true_value == pytest.approx(truth, rel=1e-14)


def test_cntk_flatten_diagonal_found():
    measured, found = peers.check_cntk(FakePeer(), "fake", readout="flatten")
    assert measured["golden_max_diagonal_error"] == pytest.approx(5e-10, rel=1e-3)
    d = found[0]
    assert d.scaled_error == pytest.approx(5e-10, rel=1e-3) and measured["minimal_batch"] == "x and -x"
    assert d.ntkref_error <= 1e-12  # the audit's mpmath value (60 digits) against ntkref's CNTK
    assert peers.check_cntk(FakePeer(), "fake", readout="gap")[1] == []


def test_exact_peer_has_no_discrepancy():
    peer = ExactPeer()
    for check in (peers.check_ntk_diagonal, peers.check_near_parallel, peers.check_overflow):
        kw = {"dims": (5,), "draws": 1} if check is peers.check_ntk_diagonal else {}
        assert check(peer, "ntkref", **kw)[1] == []


def test_kkt_violation_in_f_units():
    """libsvm's per-point stopping measure on a hand-made solution: y·f ≥ 1 at α = 0, ≤ 1 at the bound, = 1 between."""
    K = np.eye(3)
    y = np.array([1.0, -1.0, 1.0])
    C = 2.0
    alpha = np.array([0.0, -2.0, 0.5])  # a = yα: 0 (lower), 2 (= C, upper), 0.5 (free)
    # f = Kα + b = α + b; with b = 0.2: y·f = (0.2, 1.8, 0.7) → violations (0.8, 0.8, 0.3)
    assert peers.kkt_violation_f(alpha, 0.2, K, y, C) == pytest.approx(0.8)
    assert peers.kkt_violation_f(np.array([0.0, -2.0, 0.8]), 1.0, K, y, C) == pytest.approx(0.8)  # y·f = (1, 1, 1.8)


@pytest.mark.slow
def test_svc_inexact_at_default_tol():
    pytest.importorskip("sklearn")
    pytest.importorskip("ntkref.kkt")
    measured, found = peers.check_svc(n=200, tol=1e-3)
    assert found and measured["kkt_violation_f"] > 1e-5 and measured["kkt_violation_f_exact"] <= 1e-9


def test_section_skips_without_the_peers_extra(monkeypatch, tmp_path):
    monkeypatch.setattr(peers, "peers_available", lambda: (False, "ModuleNotFoundError: neural_tangents"))
    sec = peers.run(lambda *a: None, None, tmp_path, quick=True)
    assert sec.key == "peers" and sec.results["skipped"] and "Skipped" in sec.markdown and sec.claims == []


def test_markdown_lists_each_discrepancy():
    _, found = peers.check_overflow(FakePeer(), "fake")
    md = peers.markdown(found, {}, "header")
    assert "[[2e+77]]" in md and "| fake | overflow | non_finite |" in md


def test_real_neural_tangents_audit():
    """With the peers extra: the known neural-tangents 0.6.5 errors are found (issue 15)."""
    ok, why = peers.peers_available()
    if not ok:
        pytest.skip(f"neural-tangents/JAX not importable: {why}")
    peer = peers.NeuralTangentsPeer()
    _, over = peers.check_overflow(peer, "neural-tangents")
    assert over and over[0].example == {"x1": [[2e77]]} and math.isnan(over[0].peer_value)
    _, diag = peers.check_ntk_diagonal(peer, "neural-tangents")
    assert diag and 1e-9 < diag[0].scaled_error < 1e-7 and diag[0].ntkref_error <= 1e-13
