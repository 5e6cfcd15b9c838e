r"""CUDA kernels for CuPy arrays: the seam beside :mod:`._compat` where GPU-specific code lives.

One object so far: the FC ReLU kernel without biases
(:func:`ntkref.kernels.fc` with ``activation="relu"`` and every ``b_std`` zero, any depth and ``W_std``),
written as one fused elementwise pass over the Gram matrix.

Why it is fused.  Per entry the recursion depends only on the input correlation ρ = x̂·x̂′ and the two
row norms (positive homogeneity: Θ(x, x′) = ‖x‖‖x′‖·Θ(x̂, x̂′)), so all layers run in registers: one matrix
product (cuBLAS) writes ρ into the output buffer, and one kernel reads it and writes the result in place.
The array-API path (:func:`ntkref.kernels._fc._relu_unbiased_block`) makes ~15 passes a layer over
row blocks (4096 rows on CuPy), each pass a round trip through device memory; here there is one.

Same arithmetic as the array-API path.  The kernel carries ρ, 1 − ρ and 1 + ρ and evaluates, per
hidden layer, exactly the operations of ``_relu_unbiased_block`` in the same order
(θ/2 = arctan(sin θ/(1 + ρ)), ρ′ = ((π − θ)ρ + sin θ)/π, 1 − ρ′ = (1 − ρ) + (θ/π)ρ − sin θ/π
floored at 0, Θ/q ← (1 − θ/π)·Θ/q + ρ′), so its accuracy statement is that path's: every entry within
1e-13·√(K(x,x)K(x′,x′)) of the exact value in float64.  The compiler may contract a·b + c into one
fused multiply-add, which rounds once instead of twice; the device tests compare the two paths.

Near-parallel and antiparallel pairs (|ρ| > 0.95) take their angle from the rows themselves,
θ = 2·atan2(‖x̂ − x̂′‖, ‖x̂ + x̂′‖), in a second kernel that runs over those pairs only (one thread a pair,
a loop over the d features), then the same recursion; this keeps angles of 1e-9 rad accurate where
1 − ρ from the Gram has lost every digit.

Symmetric Grams (``x2=None``): cuBLAS ``syrk`` computes the upper triangle of the product only (half the
multiply-adds), the lower triangle is copied from it, and the recursion, which is elementwise, keeps the
result exactly symmetric.

Memory: the output, plus, per row block, one byte an entry for the |ρ| > 0.95 mask, CuPy's scan buffer of
``flatnonzero`` (up to eight bytes an entry) and eight bytes per refined pair (measured peak on an H200 at
n = 40 000: 1.15× the output in float64, 1.27× in float32).  Row blocks are as large as free device memory allows (a single block for n = 40 000 in
float64 on an 80 GB card).  Host synchronisations: one per row block (the count of refined pairs).
"""
from __future__ import annotations

import functools
import math

import array_api_compat

_PARALLEL_THRESHOLD = 0.95

# The recursion on (rho, omr, opr) for `depth` hidden layers; leaves the unit-input NNGP in `rho` and the
# unit-input NTK in `ntk`.  T is float or double.  Mirrors _relu_unbiased_block operation by operation.
_RECURSION = r"""
    T ntk = rho;
    bool have = false;
    for (int h = 1; h <= depth; ++h) {
        const bool last = (h == depth);
        opr += tiny;
        T sin_t = sqrt(omr * opr);
        T phi = atan(sin_t / opr);
        phi *= (T)TWO_OVER_PI;
        T omp = (T)1 - phi;
        if (have) { ntk *= omp; } else { ntk = omp * rho; have = true; }
        omp *= rho;
        sin_t *= (T)ONE_OVER_PI;
        omp += sin_t;
        if (!last) {
            phi *= rho;
            omr += phi;
            omr -= sin_t;
            omr = omr > (T)0 ? omr : (T)0;
            opr = omp + (T)1;
        }
        rho = omp;
        ntk += rho;
    }
""".replace("TWO_OVER_PI", repr(2 / math.pi)).replace("ONE_OVER_PI", repr(1 / math.pi))
# (the same doubles as the array-API path's 2 / math.pi and 1 / math.pi, rounded to T the way NumPy does)

_WRITE = r"""
    const T scale = a1[row] * a2[col];
    if (mode == 0) { out1[OUT_IDX] = rho * scale; }
    else if (mode == 1) { out1[OUT_IDX] = ntk * scale; }
    else { out1[OUT_IDX] = rho * scale; out2[OUT_IDX] = ntk * scale; }
"""


@functools.lru_cache(maxsize=None)
def _kernels():
    import cupy

    # Every entry of a row block: rho is read from out1 (the Gram written by cuBLAS) and replaced in place.
    dense = cupy.ElementwiseKernel(
        "raw T a1, raw T a2, int64 n2, T tiny, int32 depth, int32 mode",
        "raw T out1, raw T out2",
        "const long long row = i / n2; const long long col = i - row * n2;\n"
        "T rho = out1[i]; T omr = (T)1 - rho; T opr = (T)1 + rho;\n"
        + _RECURSION
        + _WRITE.replace("OUT_IDX", "i"),
        "ntkref_fc_relu_dense",
    )
    # The pairs flagged near-parallel: the angle from the rows' difference and sum, then the recursion.
    refine = cupy.ElementwiseKernel(
        "int64 idx, raw T u1, raw T u2, raw T a1, raw T a2, int64 n2, int32 d, T tiny, int32 depth, int32 mode",
        "raw T out1, raw T out2",
        "const long long row = idx / n2; const long long col = idx - row * n2;\n"
        "T dm = 0, dp = 0;\n"
        "for (int k = 0; k < d; ++k) {\n"
        "    const T a = u1[row * d + k], b = u2[col * d + k];\n"
        "    dm += (a - b) * (a - b); dp += (a + b) * (a + b);\n"
        "}\n"
        "const T theta = (T)2 * atan2(sqrt(dm), sqrt(dp));\n"
        "const T hs = sin(theta / (T)2), hc = cos(theta / (T)2);\n"
        "T rho = cos(theta); T omr = (T)2 * hs * hs; T opr = (T)2 * hc * hc;\n"
        + _RECURSION
        + _WRITE.replace("OUT_IDX", "idx"),
        "ntkref_fc_relu_refine",
    )
    mask = cupy.ElementwiseKernel("T g, T t", "bool m", "m = fabs(g) > t", "ntkref_abs_gt")
    # Exact symmetry: the lower triangle takes the upper's values (threads only read above the diagonal).
    mirror = cupy.ElementwiseKernel(
        "int64 n", "raw T g",
        "const long long r = i / n; const long long c = i - r * n; if (r > c) g[i] = g[c * n + r];",
        "ntkref_mirror_upper",
    )
    return dense, refine, mask, mirror


def is_cupy(xp) -> bool:
    return array_api_compat.is_cupy_namespace(xp)


def _free_bytes():
    import cupy

    free, _ = cupy.cuda.runtime.memGetInfo()
    pool = cupy.get_default_memory_pool()
    return free + (pool.total_bytes() - pool.used_bytes())


def fc_relu_unbiased(x1n, u1, x2n, u2, d, Ws, want_nngp, want_ntk, symmetric, xp, block_rows=None):
    """NNGP/NTK of the bias-free ReLU FC net on CuPy arrays (see the module docstring).

    ``x1n``, ``x2n``: row norms; ``u1``, ``u2``: unit rows (zero rows stay zero), as made by
    ``kernels._fc._row_norms``.  Returns ``(nngp, ntk)`` with ``None`` for what was not asked.
    """
    import cupy

    with u1.device:  # allocate and launch on the inputs' GPU, whichever is current
        return _fc_relu_unbiased(cupy, x1n, u1, x2n, u2, d, Ws, want_nngp, want_ntk, symmetric, block_rows)


def _fc_relu_unbiased(cupy, x1n, u1, x2n, u2, d, Ws, want_nngp, want_ntk, symmetric, block_rows):
    dense, refine, mask_k, mirror = _kernels()
    dtype = u1.dtype
    n1, n2 = u1.shape[0], u2.shape[0]
    q = Ws[0] * Ws[0] / d
    for W in Ws[1:]:
        q *= W * W / 2
    sq = math.sqrt(q)
    a1 = cupy.ascontiguousarray(x1n * sq)
    a2 = cupy.ascontiguousarray(x2n * sq)
    u1 = cupy.ascontiguousarray(u1)
    u2 = cupy.ascontiguousarray(u2)
    mode = 2 if (want_nngp and want_ntk) else (0 if want_nngp else 1)
    out1 = cupy.empty((n1, n2), dtype=dtype)
    out2 = cupy.empty((n1, n2), dtype=dtype) if mode == 2 else out1
    tiny = dtype.type(cupy.finfo(dtype).tiny)
    depth = len(Ws) - 1
    if block_rows is None:
        # the mask (1 byte an entry), the scan buffer and the refined pairs' indices (8 bytes each at most)
        # of a row block must fit in a quarter of what is free after the outputs
        budget = max(_free_bytes() // 4, 1 << 26)
        block_rows = max(1, min(n1, budget // max(17 * n2, 1)))
    # the Gram of unit rows, straight into the output: for a symmetric Gram in one block, the upper
    # triangle only (cuBLAS syrk: half the multiply-adds of a full product), else one product per row block
    if symmetric and block_rows >= n1:
        import cupy.cublas

        cupy.cublas.syrk("N", u1, out=out1, alpha=1.0, beta=0.0, lower=False)  # upper triangle, row-major
    else:
        for i0 in range(0, n1, block_rows):
            i1 = min(n1, i0 + block_rows)
            cupy.matmul(u1[i0:i1], u2.T, out=out1[i0:i1])
    if symmetric and n1 > 1:
        mirror(n1, out1, size=n1 * n1)
    thr = dtype.type(_PARALLEL_THRESHOLD)
    for i0 in range(0, n1, block_rows):
        i1 = min(n1, i0 + block_rows)
        g1, g2 = out1[i0:i1], out2[i0:i1]
        idx = cupy.flatnonzero(mask_k(g1, thr))  # one host synchronisation: the number of flagged pairs
        dense(a1[i0:i1], a2, n2, tiny, depth, mode, g1, g2, size=g1.size)
        if idx.size:
            refine(idx, u1[i0:i1], u2, a1[i0:i1], a2, n2, d, tiny, depth, mode, g1, g2)
        del idx
    nngp = out1 if want_nngp else None
    ntk = (out2 if mode == 2 else out1) if want_ntk else None
    return nngp, ntk
