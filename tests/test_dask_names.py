"""Dask arrays: errors name the parameter the user passed, and the closed-form kernels that cannot run on Dask
refuse clearly, with ways out that are true (issue 26, item 9).

* A symmetric Gram (``x2=None``) computes its off-diagonal blocks as fn(rows of x1, other rows of x1); a bad
  row used to be reported as "The 'x2' parameter" although no x2 was passed.
* ``two_layer_relu_ntk``, ``wei_k1_k2``, ``wei_kernel`` and ``arora_ntk`` on Dask arrays failed with a raw
  ``TypeError: 'float' object cannot be interpreted as an integer``; they now refuse naming the parameter and
  the ``kernels.fc`` call that computes the same kernel on Dask — and those calls are checked here to give
  that kernel, lazily.
"""
import math

import numpy as np
import pytest

from ntkref import InvalidParameterError, kernels
from ntkref.nets import FullyConnected, empirical_ntk

da = pytest.importorskip("dask.array")


def _rows(n=6, d=3, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


@pytest.mark.parametrize("defect, message", [(np.nan, "NaN or infinite"), (1e300, "representable range")])
def test_symmetric_gram_blocks_name_x1(defect, message):
    """The block (0, 2) of fc(X) is fc(X[0:2], X[4:6]): a bad row 4 is x1's (it named 'x2' on 0ba5a20)."""
    x = _rows()
    x[4, 0] = defect
    gram = kernels.fc(da.from_array(x, chunks=2)).ntk
    with pytest.raises(InvalidParameterError, match=message) as info:
        gram.blocks[0, 2].compute(scheduler="sync")
    assert "'x1'" in str(info.value) and "x2" not in str(info.value), str(info.value)
    # a real x2 is still named x2
    with pytest.raises(InvalidParameterError, match="The 'x2' parameter of fc"):
        kernels.fc(da.from_array(_rows(seed=1), chunks=2), da.from_array(x, chunks=2)).ntk.compute(scheduler="sync")


def test_symmetric_gram_blocks_name_x1_for_cntk_and_empirical_ntk():
    images = np.random.default_rng(2).normal(size=(6, 1, 3, 3))
    images[5, 0, 1, 1] = np.inf
    gram = kernels.cntk(da.from_array(images, chunks=(2, 1, 3, 3)), depth=1).ntk
    with pytest.raises(InvalidParameterError, match="The 'x1' parameter of cntk") as info:
        gram.blocks[1, 2].compute(scheduler="sync")
    assert "x2" not in str(info.value)
    net = FullyConnected(3, 4, depth=1)
    x = _rows()
    x[5, 1] = np.nan
    import array_api_compat.numpy as cnp

    gram = empirical_ntk(net, net.init(0, xp=cnp), da.from_array(x, chunks=2))  # NumPy chunks, NumPy parameters
    with pytest.raises(InvalidParameterError, match="'x1'") as info:
        gram.blocks[0, 2].compute(scheduler="sync")
    assert "'x2'" not in str(info.value)


@pytest.mark.parametrize("name", ["two_layer_relu_ntk", "wei_k1_k2", "wei_kernel", "arora_ntk"])
@pytest.mark.parametrize("which", ["x1", "x2"])
def test_closed_form_kernels_refuse_dask_arrays_naming_the_parameter(name, which):
    x1, x2 = _rows(5), _rows(4, seed=1)
    args = (da.from_array(x1), x2) if which == "x1" else (x1, da.from_array(x2))
    with pytest.raises(InvalidParameterError) as info:
        getattr(kernels, name)(*args)
    text = str(info.value)
    assert f"The '{which}' parameter of {name} is a Dask array" in text and "kernels.fc" in text, text
    assert f"{which}.compute()" in text


def test_the_ways_out_of_the_dask_refusals_are_the_same_kernels():
    """The calls the refusals suggest, on Dask arrays (lazily), equal the closed forms on NumPy."""
    x1, x2 = _rows(7, 4), _rows(5, 4, seed=1)
    d = x1.shape[1]
    X1, X2 = da.from_array(x1, chunks=3), da.from_array(x2, chunks=2)
    k = kernels.fc(X1, X2, depth=1, W_std=1.0)
    theta, sigma = k.ntk.compute(), k.nngp.compute()
    tol = dict(rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(kernels.fc(X1, X2, depth=1, W_std=1.0, get="ntk").ntk.compute(),
                               kernels.two_layer_relu_ntk(x1, x2), **tol)
    K1, K2 = kernels.wei_k1_k2(x1, x2)
    np.testing.assert_allclose(2 * d * (theta - sigma), K1, **tol)
    np.testing.assert_allclose(2 * d * (2 * sigma - theta), K2, **tol)
    r_w, r_u = 1.7, 0.6
    np.testing.assert_allclose(d * (r_w**2 * (theta - sigma) + r_u**2 * sigma),
                               kernels.wei_kernel(x1, x2, r_w=r_w, r_u=r_u), **tol)
    for depth in (0, 1, 3):
        ws = [1.0] + [math.sqrt(2.0)] * depth
        lazy = kernels.fc(X1, X2, depth=depth, W_std=ws, get="ntk").ntk
        np.testing.assert_allclose(d * lazy.compute(), kernels.arora_ntk(x1, x2, depth=depth), **tol)
