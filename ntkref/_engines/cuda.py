r"""The CUDA engine: fused kernels for CuPy arrays, where GPU-specific code lives.

Registered with the seam (:mod:`ntkref._lib.dispatch`) the first time a CuPy array reaches one of its
points: ``fc_relu_fused`` (called by :func:`ntkref.kernels.fc` after validation, with the prepared norms
and unit rows) and ``free_memory`` (the memory guard's device reading).  Its tested reference is the
array-API path (``kernels.fc(..., engine="array_api")``).

One object so far: the FC ReLU kernel without biases
(:func:`ntkref.kernels.fc` with ``activation="relu"`` and every ``b_std`` zero, any depth and ``W_std``),
written as one fused elementwise pass over the Gram matrix.

Why it is fused.  Per entry the recursion depends only on the input correlation ρ = x̂·x̂′ and the two
row norms (positive homogeneity: Θ(x, x′) = ‖x‖‖x′‖·Θ(x̂, x̂′)), so all layers run in registers: one matrix
product (cuBLAS) writes ρ into the output buffer, and one kernel reads it and writes the result in place.
The array-API path (``ntkref.kernels._layers.relu_unbiased_block``) makes ~15 passes a layer over
row blocks (4096 rows on CuPy), each pass a round trip through device memory; here there is one.

Same arithmetic as the array-API path.  The kernel carries ρ, 1 − ρ and 1 + ρ and evaluates, per
hidden layer, exactly the operations of ``relu_unbiased_block`` in the same order
(θ/2 = arctan(sin θ/(1 + ρ)), ρ′ = ((π − θ)ρ + sin θ)/π, 1 − ρ′ = (1 − ρ) + (θ/π)ρ − sin θ/π
floored at 0, Θ/q ← (1 − θ/π)·Θ/q + ρ′), so its accuracy statement is that path's: every entry within
1e-13·√(K(x,x)K(x′,x′)) of the exact value in float64.  The compiler may contract a·b + c into one
fused multiply-add, which rounds once instead of twice; the device tests compare the two paths.

Near-parallel and antiparallel pairs (|ρ| > 0.95) take their angle from the rows themselves,
θ = 2·atan2(‖x̂ − x̂′‖, ‖x̂ + x̂′‖), in a second kernel that runs over those pairs only (one thread a pair,
a loop over the d features), then the same recursion; this keeps angles of 1e-9 rad accurate where
1 − ρ from the Gram has lost every digit.  The dense kernel flags those pairs while it reads ρ (the lanes of
a warp reserve slots in an index buffer with one atomic add), so finding them costs no extra pass over the
Gram; a row block with more flagged pairs than the buffer holds (1 in 16) is recomputed through a mask pass.

Symmetric Grams (``x2=None``): cuBLAS ``syrk`` computes the upper triangle of the product only (half the
multiply-adds), the recursion runs on the upper triangle only, and a tiled transpose kernel copies it onto
the lower triangle, so the result is exactly symmetric.

Memory: the output, plus, per row block, the index buffer of flagged pairs (half a byte an entry); the
fallback needs one byte an entry for the mask, CuPy's scan buffer of ``flatnonzero`` (up to eight bytes an
entry) and eight bytes per refined pair, and row blocks are sized for it.  Row blocks are as large as free
device memory allows (a single block for n = 40 000 in float64 on an 80 GB card).  Host synchronisations:
one per row block (the count of refined pairs).
"""
from __future__ import annotations

import functools
import math

import numpy

from .._lib import dispatch
from ..kernels._layers import check_finite_kernel

_PARALLEL_THRESHOLD = 0.95

# The recursion on (rho, omr, opr) for `depth` hidden layers; leaves the unit-input NNGP in `rho` and the
# unit-input NTK in `ntk`.  T is float or double.  Mirrors relu_unbiased_block operation by operation.
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


# Near-parallel pairs are collected by the dense kernel itself while it reads rho (no separate mask pass):
# the lanes of a warp that see |rho| > threshold reserve slots with one atomicAdd per warp, and write their
# block-relative flat indices there.  If more pairs are flagged than the buffer holds, the count still says
# how many, and the caller redoes that block through the mask path.
_COLLECT = r"""
    {
        const bool flag = keep && fabs(rho) > thr;
        const unsigned active = __activemask();
        const unsigned m = __ballot_sync(active, flag);
        if (m) {
            const int lane = threadIdx.x & 31;
            const int leader = __ffs(m) - 1;
            unsigned long long base = 0;
            if (lane == leader) base = atomicAdd(&cnt[0], (unsigned long long)__popc(m));
            base = __shfl_sync(active, base, leader);
            if (flag) {
                const unsigned long long pos = base + __popc(m & ((1u << lane) - 1u));
                if (pos < (unsigned long long)cap) found[pos] = i;
            }
        }
    }
"""

# Exact symmetry for Grams whose upper triangle holds the values: each 32×32 tile below the diagonal is
# loaded from its mirror image above (coalesced rows through shared memory) and written transposed.
_MIRROR = r"""
extern "C" __global__ void ntkref_mirror_tiled_T(T* g, const long long n) {
    __shared__ T tile[32][33];
    const long long bi = blockIdx.y, bj = blockIdx.x;
    if (bi < bj) return;
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int k = ty; k < 32; k += 8) {
        const long long r = bj * 32 + k, c = bi * 32 + tx;
        if (r < n && c < n) tile[k][tx] = g[r * n + c];
    }
    __syncthreads();
    for (int k = ty; k < 32; k += 8) {
        const long long r = bi * 32 + k, c = bj * 32 + tx;
        if (r < n && c < n && r > c) g[r * n + c] = tile[tx][k];
    }
}
"""


@functools.lru_cache(maxsize=None)
def _kernels():
    import cupy

    # Every entry of a row block: rho is read from out1 (the Gram written by cuBLAS) and replaced in place.
    # With upper=1 (symmetric Grams) entries below the diagonal are left alone (the mirror fills them).
    dense = cupy.ElementwiseKernel(
        "raw T a1, raw T a2, int64 n2, int64 row0, int32 upper, T tiny, int32 depth, int32 mode, T thr, "
        "int64 cap",
        "raw T out1, raw T out2, raw uint64 cnt, raw int64 found",
        "const long long row = i / n2; const long long col = i - row * n2;\n"
        "const bool keep = !(upper && row0 + row > col);\n"
        "T rho = keep ? out1[i] : (T)0;\n"
        + _COLLECT
        + "if (keep) {\n"
        "T omr = (T)1 - rho; T opr = (T)1 + rho;\n"
        + _RECURSION
        + _WRITE.replace("OUT_IDX", "i")
        + "}\n",
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
    # the fallback when a block has more near-parallel pairs than the collection buffer holds
    mask = cupy.ElementwiseKernel(
        "T g, int64 n2, int64 row0, int32 upper, T t", "bool m",
        "const long long row = i / n2; const long long col = i - row * n2;\n"
        "m = !(upper && row0 + row > col) && fabs(g) > t;",
        "ntkref_abs_gt",
    )
    mirrors = {
        name: cupy.RawKernel(_MIRROR.replace("_T(", "_" + name + "(").replace("T* g", ctype + "* g")
                             .replace("__shared__ T", "__shared__ " + ctype), "ntkref_mirror_tiled_" + name)
        for name, ctype in (("float32", "float"), ("float64", "double"))
    }
    return dense, refine, mask, mirrors


def _mirror(mirrors, g, n):
    """Copy the upper triangle of the n×n row-major ``g`` onto its lower triangle, in place."""
    tiles = (n + 31) // 32
    mirrors[str(g.dtype)]((tiles, tiles), (32, 8), (g, numpy.int64(n)))


#: seam -> what this engine does there (the README's backend table is made from this)
SEAMS = {
    "fc_relu_fused": "ReLU without biases: one fused CUDA kernel over the Gram (`engine=\"array_api\"` forces the reference path)",
    "free_memory": "free device memory (CuPy's pool included)",
}


def register():
    """Fill the seams this engine serves (called once by :func:`ntkref._lib.dispatch.load`)."""
    dispatch.fc_relu_fused.register("cupy", fc_relu_unbiased)
    dispatch.free_memory.register("cupy", free_memory)


def _free_bytes():
    import cupy

    free, _ = cupy.cuda.runtime.memGetInfo()
    pool = cupy.get_default_memory_pool()
    return free + (pool.total_bytes() - pool.used_bytes())


def free_memory(like):
    """Bytes free on ``like``'s device: free device memory plus the blocks CuPy's pool holds but does not
    use (freed arrays are cached)."""
    with like.device:
        return int(_free_bytes())


def fc_relu_unbiased(x1n, u1, x2n, u2, d, Ws, want_nngp, want_ntk, symmetric, xp, block_rows=None):
    """NNGP/NTK of the bias-free ReLU FC net on CuPy arrays (see the module docstring).

    ``x1n``, ``x2n``: row norms; ``u1``, ``u2``: unit rows (zero rows stay zero), as made by
    ``kernels._layers.row_norms``.  Returns ``(nngp, ntk)`` with ``None`` for what was not asked.
    """
    import cupy

    with u1.device:  # allocate and launch on the inputs' GPU, whichever is current
        return _fc_relu_unbiased(cupy, x1n, u1, x2n, u2, d, Ws, want_nngp, want_ntk, symmetric, block_rows)


def _fc_relu_unbiased(cupy, x1n, u1, x2n, u2, d, Ws, want_nngp, want_ntk, symmetric, block_rows):
    dense, refine, mask_k, mirrors = _kernels()
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
    thr = dtype.type(_PARALLEL_THRESHOLD)
    upper = 1 if symmetric else 0
    cnt = cupy.zeros(1, dtype=cupy.uint64)
    for i0 in range(0, n1, block_rows):
        i1 = min(n1, i0 + block_rows)
        g1, g2 = out1[i0:i1], out2[i0:i1]
        # room for 1 flagged pair in 16 (the diagonal alone is 1 in n2); more sends the block to the fallback
        cap = max(g1.size // 16, 2 * (i1 - i0))
        found = cupy.empty(cap, dtype=cupy.int64)
        cnt.fill(0)
        dense(a1[i0:i1], a2, n2, i0, upper, tiny, depth, mode, thr, cap, g1, g2, cnt, found, size=g1.size)
        flagged = int(cnt.get()[0])  # one host synchronisation a block: the number of near-parallel pairs
        if flagged <= cap:
            idx = found[:flagged]
        else:  # too many to collect: recompute this block's Gram, flag its pairs with the mask, run it again
            del found
            cupy.matmul(u1[i0:i1], u2.T, out=g1)
            idx = cupy.flatnonzero(mask_k(g1, n2, i0, upper, thr))
            found = cupy.empty(1, dtype=cupy.int64)
            dense(a1[i0:i1], a2, n2, i0, upper, tiny, depth, mode, dtype.type(2), 0, g1, g2, cnt, found,
                  size=g1.size)
        if idx.size:
            refine(idx, u1[i0:i1], u2, a1[i0:i1], a2, n2, d, tiny, depth, mode, g1, g2)
        del idx, found
    if symmetric and n1 > 1:
        _mirror(mirrors, out1, n1)
        if mode == 2:
            _mirror(mirrors, out2, n1)
    nngp = out1 if want_nngp else None
    ntk = (out2 if mode == 2 else out1) if want_ntk else None
    # Overflow: for unit rows |nngp| ≤ 1 and |ntk| ≤ depth + 1, so no entry exceeds max‖x‖·max‖x′‖·q·(depth + 1)
    # (the diagonal reaches it).  Only when that bound is not a finite number of the dtype is the output
    # scanned, and a non-finite entry refused like the array-API path does.
    bound = float(cupy.max(x1n)) * float(cupy.max(x2n)) * q * (depth + 1) if n1 * n2 else 0.0
    if not bound <= float(cupy.finfo(dtype).max):
        for value in (nngp, ntk):
            check_finite_kernel(value, "fc", cupy)
    return nngp, ntk
