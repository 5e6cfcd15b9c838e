"""The fused CUDA kernel of ``ntkref._engines.cuda`` against its reference, the array-API path, on the GPU.

These run where CuPy sees a GPU (``NTKREF_BACKEND=cupy``, ``.ci/device``) and are skipped elsewhere; the
accuracy against mpmath on adversarial rows is ``tests/test_kernels.py``, which under
``NTKREF_BACKEND=cupy`` goes through the fused kernel for every bias-free ReLU configuration.
"""
import math

import numpy as np
import pytest

from ntkref import kernels as K

from .test_kernels import adversarial_rows

cupy = pytest.importorskip("cupy")
try:
    _N_GPUS = cupy.cuda.runtime.getDeviceCount()
except Exception:  # noqa: BLE001 - no driver, no device
    _N_GPUS = 0
pytestmark = pytest.mark.skipif(_N_GPUS == 0, reason="needs a CUDA device")


def _scaled_err(a, b, diag1, diag2):
    scale = np.sqrt(np.outer(diag1, diag2))
    return np.max(np.abs(a - b) / np.where(scale > 0, scale, 1.0))


def _inputs(kind, dtype):
    rng = np.random.default_rng(3)
    if kind == "adversarial":
        x = adversarial_rows(d=6, seed=1)
        y = np.concatenate([adversarial_rows(d=6, seed=2)[:9], x[:4]])
        if dtype == "float32":  # rows of 1e±100 and beyond are not float32 numbers
            x, y = (a[np.all((np.abs(a) < 1e30) & ((np.abs(a) > 1e-30) | (a == 0)), axis=1)] for a in (x, y))
    else:
        x = rng.random((300, 40))
        x[10] = x[3] * 2.5  # exactly parallel, unequal norms
        x[11] = -x[4]  # antiparallel
        x[12] = 0.0
        y = np.concatenate([rng.random((170, 40)), x[:30] * 1.0000001])
    return cupy.asarray(x.astype(dtype)), cupy.asarray(y.astype(dtype))


@pytest.mark.parametrize("dtype,tol", [("float64", 4e-15), ("float32", 2e-6)])
@pytest.mark.parametrize("kind", ["adversarial", "random"])
@pytest.mark.parametrize("depth,W", [(0, 1.0), (1, 1.0), (3, [1.0, 1.3, 0.7, 2.0]), (5, math.sqrt(2.0))])
def test_fused_equals_array_api_path(kind, dtype, tol, depth, W):
    x, y = _inputs(kind, dtype)
    for x2 in (None, y):
        fused = K.fc(x, x2, depth=depth, W_std=W)
        ref = K.fc(x, x2, depth=depth, W_std=W, engine="array_api")
        d1 = K.fc_diagonal(x, depth=depth, W_std=W)
        d2 = d1 if x2 is None else K.fc_diagonal(y, depth=depth, W_std=W)
        for name in ("nngp", "ntk"):
            a, b = cupy.asnumpy(getattr(fused, name)), cupy.asnumpy(getattr(ref, name))
            assert a.dtype == np.dtype(dtype)
            dd1, dd2 = cupy.asnumpy(getattr(d1, name)), cupy.asnumpy(getattr(d2, name))
            # same operations per entry; only the matrix product's summation order and fused multiply-adds differ
            assert _scaled_err(a, b, dd1, dd2) <= tol, (name, x2 is None)
            if x2 is None:
                assert np.array_equal(a, a.T)  # exactly symmetric


@pytest.mark.parametrize("get", ["nngp", "ntk", ("nngp", "ntk")])
def test_fused_outputs_and_blocks(get):
    x, y = _inputs("random", "float64")
    from ntkref._engines import cuda as _gpu
    from ntkref.kernels._layers import row_norms

    full = K.fc(x, y, depth=2, get=get)
    sym_blocked = K.fc(x, depth=2, get="ntk")
    n1, u1 = row_norms(x, cupy)
    n2, u2 = row_norms(y, cupy)
    nngp, ntk = _gpu.fc_relu_unbiased(n1, u1, n2, u2, x.shape[1], [1.0, 1.0, 1.0], "nngp" in get, "ntk" in get,
                                      False, cupy, block_rows=7)
    for name, blocked in (("nngp", nngp), ("ntk", ntk)):
        if name in get:
            # row blocks of 7 change only the matrix product's blocking: agreement to rounding
            np.testing.assert_allclose(cupy.asnumpy(blocked), cupy.asnumpy(getattr(full, name)), rtol=1e-14, atol=1e-15)
        else:
            assert blocked is None and getattr(full, name) is None
    # symmetric: syrk (one block) against row-block products (blocks of 7)
    _, sym7 = _gpu.fc_relu_unbiased(n1, u1, n1, u1, x.shape[1], [1.0, 1.0, 1.0], False, True, True, cupy,
                                    block_rows=7)
    a, b = cupy.asnumpy(sym_blocked.ntk), cupy.asnumpy(sym7)
    np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-15)
    assert np.array_equal(a, a.T) and np.array_equal(b, b.T)


def test_fused_peak_memory_is_close_to_the_output():
    pool = cupy.get_default_memory_pool()
    x = cupy.asarray(np.random.default_rng(0).random((3000, 784)))
    K.fc(x[:64], depth=3, get="ntk")  # compile
    high = [0]

    def alloc(size):
        mem = pool.malloc(size)
        high[0] = max(high[0], pool.used_bytes())
        return mem

    cupy.cuda.Device().synchronize()
    base = pool.used_bytes()
    high[0] = base
    cupy.cuda.set_allocator(alloc)
    try:
        out = K.fc(x, depth=3, get="ntk").ntk
        cupy.cuda.Device().synchronize()
    finally:
        cupy.cuda.set_allocator(pool.malloc)
    assert (high[0] - base) <= 1.5 * out.nbytes, (high[0] - base) / out.nbytes


@pytest.mark.parametrize("dtype,tol", [("float64", 4e-15), ("float32", 2e-6)])
@pytest.mark.parametrize("block_rows", [None, 7])
def test_blocks_with_mostly_near_parallel_pairs_take_the_mask_fallback(dtype, tol, block_rows):
    # Every pair has |cos| > 0.95, more than the dense kernel's collection buffer (1 pair in 16) holds, so
    # each row block is recomputed through the mask pass; the result must still equal the array-API path,
    # and a block where only some pairs are near-parallel (the second half of the rows) must mix both paths.
    from ntkref._engines import cuda as _gpu
    from ntkref.kernels._layers import row_norms

    rng = np.random.default_rng(5)
    base = rng.standard_normal(30)
    x = base + 1e-3 * rng.standard_normal((120, 30))
    x[60:] = rng.standard_normal((60, 30))  # generic rows: these pairs are mostly not flagged
    x[61] = -x[2]  # antiparallel across the two halves
    x = cupy.asarray(x.astype(dtype))
    n, u = row_norms(x, cupy)
    for x2, (n2, u2) in ((None, (n, u)), (x[::-1], row_norms(x[::-1], cupy))):
        _, fused = _gpu.fc_relu_unbiased(n, u, n2, u2, 30, [1.0, 1.0, 1.0, 1.0], False, True, x2 is None, cupy,
                                         block_rows=block_rows)
        ref = K.fc(x, x2, depth=3, get="ntk", engine="array_api").ntk
        diag = cupy.asnumpy(K.fc_diagonal(x, depth=3).ntk)
        d2 = diag if x2 is None else diag[::-1]
        a, b = cupy.asnumpy(fused), cupy.asnumpy(ref)
        assert _scaled_err(a, b, diag, d2) <= tol
        if x2 is None:
            assert np.array_equal(a, a.T)
