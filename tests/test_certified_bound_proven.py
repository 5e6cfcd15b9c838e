"""``certified_bound(..., d=...)``: the proven a-priori constant of the FC ReLU kernels (kernels/_rounding.py,
kernels/_rounding_bias.py).

Theorem under test: for rows with √Σ_L(x,x) ≥ 2^-400 (float32: 2^-40; with biases also regular rows), every entry of
``kernels.fc`` satisfies |K̃ − K| ≤ c·√(K(x,x)K(x′,x′)), c the constant returned, K the exact kernel of the float
inputs.  Independent routes: the 50-digit mpmath recursion of tests/_mp_reference.py on adversarial and
hypothesis-drawn rows, and the ball arithmetic of ``ntkref.enclosures``.  Also: the constant dominates every
per-entry bound of ``fc(..., error_bound=True)`` on such rows (the a-priori analysis is the running one's sup),
the tested mode is unchanged, and what has no proven constant is refused, naming ``d``.
"""

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests._mp_reference import fc_pair
from ntkref._lib.validation import InvalidParameterError
from ntkref.kernels import fc
from ntkref.testing import certified_bound

RAD_MP = mp.mpf(10) ** -40


def _rows(d, seed, floor_norm):
    """Adversarial rows above the a-priori floor: random, near-parallel (1e-9), parallel, antiparallel,
    near-antiparallel, orthogonal, norms 1e±100 and the floor's own size."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((10, d))
    x[1] = 3.0 * x[0] + 1e-9 * np.linalg.norm(x[0]) * rng.standard_normal(d)
    x[2] = -x[0]
    x[3] = 2.0 * x[0]
    x[4] = -x[0] + 1e-12 * rng.standard_normal(d)
    x[5, :] = 0.0
    x[5, 0] = 1.0
    x[6, :] = 0.0
    x[6, -1] = 1.0
    x[7] *= 1e100
    x[8] *= 1e-100
    x[9] = x[9] / np.linalg.norm(x[9]) * floor_norm * np.sqrt(d) * 4  # just above the floor
    return x


def _scaled_errors(x, k, depth, W, b, bound_out=None):
    """max over entries and outputs of |K̃ − K|/√(K(x,x)K(x′,x′)) against mpmath, and of B/scale if given."""
    worst_e, worst_b = mp.mpf(0), mp.mpf(0)
    outs = {"nngp": np.asarray(k.nngp, dtype=np.float64), "ntk": np.asarray(k.ntk, dtype=np.float64)}
    for i in range(x.shape[0]):
        for j in range(x.shape[0]):
            r = fc_pair(x[i].astype(np.float64), x[j].astype(np.float64), depth, W, b)
            refs = {"nngp": (r[0], mp.sqrt(r[2] * r[4])), "ntk": (r[1], mp.sqrt(r[3] * r[5]))}
            for g, K in outs.items():
                ref, scale = refs[g]
                err = abs(mp.mpf(float(K[i, j])) - ref) - RAD_MP * abs(ref)
                worst_e = max(worst_e, err / scale)
                if bound_out is not None:
                    worst_b = max(worst_b, mp.mpf(float(bound_out[g][i, j])) / scale)
    return float(worst_e), float(worst_b)


CONFIGS = [  # (depth, W_std, b_std)
    (0, 1.0, 0.0), (1, 1.0, 0.0), (2, [1.3, 0.7, 2.0], 0.0), (3, 1.0, 0.0),
    (1, 1.0, 0.1), (2, [0.9, 1.4, 1.0], [0.5, 0.0, 0.2]), (3, 1.0, 0.1), (3, 2.0, [0.0, 0.0, 1.0, 0.3]),
]


@pytest.mark.parametrize("depth,W,b", CONFIGS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_constant_bounds_every_entry_against_mpmath(depth, W, b, dtype):
    d = 7
    floor = 2.0 ** -400 if dtype == "float64" else 2.0 ** -40
    x = _rows(d, seed=depth + 10 * (dtype == "float32"), floor_norm=floor)
    if dtype == "float32":
        x[7] /= 1e85  # float32's range: norms 1e15, 1e-10 (and 4× the floor, 2^-40)
        x[8] *= 1e90
    x = x.astype(dtype)
    c, src = certified_bound("fc", depth=depth, d=d, W_std=W, b_std=b, dtype=dtype)
    assert src.startswith("proven")
    k = fc(x, depth=depth, W_std=W, b_std=b, error_bound=True)
    worst_e, worst_b = _scaled_errors(x, k, depth, W, b, {"nngp": k.nngp_bound, "ntk": k.ntk_bound})
    assert worst_e <= c, (worst_e, c)
    assert worst_b <= c, (worst_b, c)  # the a-priori constant dominates each running bound


@settings(max_examples=25, deadline=None)
@given(depth=st.integers(0, 3), d=st.integers(1, 40), seed=st.integers(0, 2**32 - 1),
       log_norm=st.floats(-100, 100), W=st.sampled_from([0.5, 1.0, 1.7]), b=st.sampled_from([0.0, 0.05, 1.0]))
def test_the_constant_bounds_drawn_rows(depth, d, seed, log_norm, W, b):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, d)) * 10.0 ** log_norm
    x[2] = -x[0] + 1e-10 * np.linalg.norm(x[0]) * rng.standard_normal(d)
    c, _ = certified_bound("fc", depth=depth, d=d, W_std=W, b_std=b)
    k = fc(x, depth=depth, W_std=W, b_std=b, error_bound=True)
    worst_e, worst_b = _scaled_errors(x, k, depth, W, b, {"nngp": k.nngp_bound, "ntk": k.ntk_bound})
    assert worst_e <= c and worst_b <= c, (worst_e, worst_b, c)


def test_the_constant_against_ball_arithmetic():
    pytest.importorskip("flint", reason="python-flint (the rigorous extra)")
    from ntkref import enclosures

    for depth, W, b in CONFIGS:
        x = _rows(30, seed=depth, floor_norm=2.0 ** -400)
        c, _ = certified_bound("fc", depth=depth, d=30, W_std=W, b_std=b)
        k = fc(x, depth=depth, W_std=W, b_std=b)
        e = enclosures.fc(x, depth=depth, W_std=W, b_std=b)
        for g in ("nngp", "ntk"):
            enc = getattr(e, g)
            diag_lo = np.diag(enc.mid) - np.diag(enc.rad)  # lower ends of the exact diagonal
            assert np.all(diag_lo > 0)
            scale_lo = np.sqrt(diag_lo)[:, None] * np.sqrt(diag_lo)[None, :] * (1 - 1e-15)
            excess = np.abs(np.asarray(getattr(k, g)) - enc.mid) + enc.rad  # ≥ |K̃ − K| up to the host's rounding
            assert np.all(excess * (1 - 1e-15) <= c * scale_lo), (depth, g, float(np.max(excess / scale_lo)), c)


def test_documented_sizes_of_the_constant():
    # float64, depth 3: within 1e-12 of the scale for d ≤ 1000 without biases (MNIST's d = 784 included)
    for depth in range(4):
        assert certified_bound("fc", depth=depth, d=1000)[0] <= 1e-12
    assert certified_bound("fc", depth=3, d=784, b_std=0.1)[0] <= 1.2e-12
    # it grows with d (the dot product's worst case γ_d) and with depth; it is above the tested 1e-13 at
    # depth 3 because it covers every input, not the inputs tried
    bs = [certified_bound("fc", depth=3, d=d)[0] for d in (10, 100, 1000, 10000)]
    assert bs == sorted(bs) and bs[-1] > 5 * bs[1]
    assert certified_bound("fc", depth=3, d=100)[0] > certified_bound("fc", depth=3)[0] == 1e-13


def test_the_tested_mode_is_unchanged():
    assert certified_bound("fc", depth=2) == certified_bound("fc", depth=2, W_std=3.0)  # d absent: tested
    assert not certified_bound("fc", depth=2)[1].startswith("proven")


@pytest.mark.parametrize("kwargs,match", [
    ({"family": "fc", "activation": "erf"}, "'d' parameter.*erf"),
    ({"family": "fc", "activation": "softplus"}, "'d' parameter"),
    ({"family": "cntk"}, "'d' parameter.*CNTK"),
    ({"family": "fc", "dtype": "float32", "depth": 14, "d": 5000}, "no proven constant for depth=14, d=5000"),
    # the first-order regime left mid-loop (a raw ValueError, math domain error, before)
    ({"family": "fc", "dtype": "float32", "depth": 5, "d": 3, "b_std": [1e-18, 0.0, 0.001, 1.0, 0.0, 0.0]},
     "no proven constant.*first-order"),
    # absolute terms dominate over the row floor: a "proven" 1.7e8 before, now no constant
    ({"family": "fc", "dtype": "float32", "depth": 1, "d": 3, "W_std": 1e15}, "no useful a-priori constant"),
])
def test_no_proven_constant_is_refused_naming_d(kwargs, match):
    kw = {"depth": 2, "d": 10, **kwargs}
    with pytest.raises(NotImplementedError, match=match):
        certified_bound(kw.pop("family"), **kw)


def test_fc_refuses_what_leaves_the_first_order_regime_mid_loop():
    from ntkref.kernels import fc

    with pytest.raises(NotImplementedError, match="'error_bound'.*first-order"):  # a raw ValueError before
        fc(np.ones((2, 3), np.float32), depth=5, b_std=[1e-18, 0.0, 0.001, 1.0, 0.0, 0.0], error_bound=True)


def test_invalid_d_is_named():
    with pytest.raises(InvalidParameterError, match="'d'"):
        certified_bound("fc", depth=1, d=0)
    with pytest.raises(InvalidParameterError, match="'d'"):
        certified_bound("fc", depth=1, d=2.5)
    with pytest.raises(InvalidParameterError, match="'b_std' parameter of certified_bound"):  # OverflowError before
        certified_bound("fc", depth=2, d=3, b_std=1e300)
