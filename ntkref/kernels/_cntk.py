"""Convolutional neural tangent kernel (CNTK) of seed 004 (Arora et al.).

Implements, for images of shape ``(N, C, H, W)``, the NNGP and NTK of the
infinitely wide CNN

    conv(q×q, SAME zero padding, stride 1) → ReLU   (``depth`` times)
    → readout: global average pooling + dense ("gap")  or  flatten + dense ("flatten")

in the NTK parameterization, with the neural-tangents conventions that
:func:`ntkref.kernels.fc` follows (docs/conventions.md, 'FC kernels').  Seed 004 equations implemented:

- eq. (6): the covariance recursion Σ⁽ʰ⁾ = c_σ E[σ(u)σ(v)], (u, v) ~ N(0, Λ⁽ʰ⁾),
  here per pixel pair and with c_σ carried by the next layer's ``W_std²``;
- eq. (7): the derivative covariance Σ̇⁽ʰ⁾ = c_σ E[σ′(u)σ′(v)];
- eq. (8): Θ = Σ_h Σ⁽ʰ⁻¹⁾ Π_{h′≥h} Σ̇⁽ʰ′⁾, written as the layer recursion
  Θ ← Σ_new + W²·conv(Θ ⊙ Σ̇) and applied per pixel pair;
- the CNTK of the paper's Section 4 (the "dynamic programming" over pixel
  pairs; CNTK-V = vanilla/flatten readout, CNTK-GAP = global average pooling),
  including the variant with "first and last layer fixed".

Recursion (pixel pairs p = (i, j), p′ = (i′, j′); K and Θ are (H, W, H, W)
tensors for one image pair (x, x′); 𝒜 is the q×q patch *average* along the
spatial diagonals, with zero padding:
𝒜(K)[i, j, i′, j′] = (1/q²) Σ_{a,b=-r..r} K[i+a, j+b, i′+a, j′+b], r = (q−1)/2,
entries outside the image being 0):

    K₀[p, p′]  = (1/C) Σ_c x[c, p] x′[c, p′]          (neural-tangents: mean over channels)
    layer ℓ = 1..L:
        Σ_ℓ  = W_ℓ² 𝒜(K_{ℓ−1}) + b_ℓ²                   (conv; K_{ℓ−1} post-ReLU, K₀ the input)
        Θ_ℓ  = Σ_ℓ + W_ℓ² 𝒜(Θ̇_{ℓ−1})                   (Θ̇₀ = 0)
        K_ℓ  = E[relu(u) relu(v)]   over (u, v) ~ N(0, [[q_p, Σ_ℓ], [Σ_ℓ, q′_{p′}]])
        Θ̇_ℓ = Θ_ℓ ⊙ κ̇_ℓ,  κ̇_ℓ = P[u > 0, v > 0] = (π − θ)/(2π)
    readout (R = mean over all pixel pairs for "gap", mean over the
    spatial diagonal p = p′ for "flatten", i.e. (1/P)·trace):
        nngp = W_{L+1}² R(K_L) + b_{L+1}²
        ntk  = nngp + W_{L+1}² R(Θ̇_L)

where q_p = Σ_ℓ(x, x)[p, p] and q′_{p′} = Σ_ℓ(x′, x′)[p′, p′] are the per-image
variance maps.  ReLU closed forms (arc-cosine kernel of degree 1 and 0), with
s = √(q q′) and the angle computed stably as θ = atan2(√((s − k)(s + k)), k):
E[relu(u)relu(v)] = (√((s−k)(s+k)) + (π − θ) k)/(2π).  Where s = 0 (a pixel
whose pre-activation is identically zero, e.g. an all-zero patch without
bias) the pre-activation covariance k is 0, so K_ℓ = 0, and κ̇ is defined as
0 (the finite network's ReLU′(0) = 0): such pixel pairs contribute nothing.

**Vanilla fast path.**  𝒜 only mixes entries with the same spatial offset
p′ − p, the ReLU step is entrywise, and the flatten readout reads only the
offset-0 entries (p = p′).  Hence for ``readout="flatten"`` the recursion
runs on the (H, W) diagonal alone: O(P q² L) per pair instead of O(P² q² L)
(P = H·W), which is exact, not an approximation (``method="full"`` computes
the full tensor for comparison; the tests check equality).

**Relation to Arora et al.'s normalization** (seed 004 and the authors' CUDA
code, c_σ = 2, no biases, Σ⁽⁰⁾ = Σ_c x_c x′_c without 1/C, patch *sum*
instead of average inside ``conv3`` with the 1/q² put into c_σ/q² = 2/9,
GAP readout = mean over pixel pairs, vanilla readout = *trace*, "fix" =
Θ starts at 0 after the first layer and the last layer's Σ is subtracted).
With W_std = (1, √2, √2, …, √2) (first conv 1, every later conv and the
readout √2), b_std = 0, and ``filter_size=3``:

    Θ_Arora-GAP     = C · cntk(readout="gap").ntk
    Θ_Arora-vanilla = C · P · cntk(readout="flatten").ntk
    with ``fix=yes``: the same with ``fix_first_last=True``,

and with W_std = 1 everywhere (the neural-tangents default) the right-hand
sides gain a factor 2^L (L = ``depth``; every ReLU layer halves the scale):
Θ_Arora-GAP = C·2^L·cntk(W_std=1).ntk.  Arora's ``--depth`` option is L + 1
("#conv layers + 1").  The test suite checks these identities against an
independent transcription of Arora's algorithm.

**"First and last layer fixed"** (``fix_first_last=True``; Arora et al.
Sec. 4.2): the parameters (weights and biases) of the first convolution and
of the dense readout are not trained, so their gradients are dropped from
the tangent kernel: Θ_1 = 0 instead of Σ_1, and ntk = W_{L+1}² R(Θ̇_L)
without the readout's nngp term.  ``.nngp`` is unchanged.

Accuracy.  Near-parallel and antiparallel pixel pairs get their ReLU angle
without cancellation (the numerics: :mod:`._cntk_refine`).  Without biases the
images are first scaled by powers of two (exact) and the kernel by their
product afterwards (positive homogeneity), so images from 1e-150 to 1e150
neither underflow nor overflow.

Measured (tests/test_cntk.py, float64): every entry within 1e-13·√(K(x,x)
K(x′,x′)) of the 50-digit value (K = the same output, nngp or ntk), on x and
−x, x and c·x, constant and zero patches, zero images, scales 1e-150..1e150,
gap and flatten, depths 1–4, 1×1 and 3×3 filters, with and without biases.
float32 inputs are computed in float32 (≈1e-6 relative).

Speed (NumPy).  Pairs run in threads (NumPy's loops release the GIL; BLAS is held to one thread); a
symmetric Gram computes the pairs i ≤ j.  Small images go in batches of pairs (:mod:`._cntk_batched`);
larger ones (a pair tensor of ≥ 90 000 entries) with the GAP readout one pair at a time, in cache-sized
blocks of pixel rows (:mod:`._cntk_rows`).

Where the code is: this module holds :func:`cntk`, its validation and the work plan of a Gram (batches,
threads, the memory estimate); :mod:`._cntk_layout` the flat zero-padded layout, the patch sums and the
per-image maps; :mod:`._cntk_refine` the cancellation-free ReLU angle; :mod:`._cntk_batched` and
:mod:`._cntk_rows` the recursion on batches of pairs and on one pair in blocks of pixel rows.
"""
from __future__ import annotations

import math

import array_api_compat

from .._lib import dispatch
from .._lib.backend import device_of, namespace
from .._lib.compat import single_threaded_blas
from .._lib.memory import check_bytes
from .._lib.validation import (
    InvalidParameterError,
    check_array,
    check_int,
    check_option,
    check_real,
)

from ._cntk_batched import _batch_sums
from ._cntk_layout import _Geometry, _interior_flags, _np, _pad_images, _patch_sum, _variance_maps
from ._cntk_refine import _PI
from ._cntk_rows import _RowBlocks, _block_patch_sum, _pair_sums_rows, _row_work, _row_work_bytes
from ._fc import Kernel, n_workers
from ._layers import check_finite_kernel
from ._rounding import refuse_error_bound

__all__ = ["cntk"]

# tests/test_cntk.py imports these from here (their code is in _cntk_layout and _cntk_rows)
_REEXPORTED = (_patch_sum, _block_patch_sum)

_CALLER = "cntk"
# work buffers of a batch (numbers of m·N-entry float arrays), for the memory estimate
_BUFFERS = 10
# The tests set _ROWS_MIN_ENTRIES, _BLOCK_ENTRIES, _REFINE_CHUNK and _batch_sums on this module: only the
# code here reads them, and it hands _REFINE_CHUNK (flagged entries refined at once) to both routes in their
# state, st["refine_chunk"].
_REFINE_CHUNK = 1 << 15
# NumPy, GAP readout: pairs of at least _ROWS_MIN_ENTRIES padded pixel pairs run one by one in blocks of
# pixel rows of about _BLOCK_ENTRIES entries (cache-sized), smaller ones in batches of pairs (CPU time per
# pair, depth 3, 3×3, one thread: rows/batched 1.26 at 13×13, 1.01 at 14×14, 1.07 at 15×15, 0.89 at 16×16,
# 0.65 at 20×20, 0.63 at 24×24, 0.65 at 32×32)
_ROWS_MIN_ENTRIES = 90_000
_BLOCK_ENTRIES = 1 << 16


# ----------------------------------------------------------------------------
# validation helpers
# ----------------------------------------------------------------------------
def _per_layer(value, name, depth):
    """Broadcast a scalar or a per-layer sequence (depth convs + readout)."""
    if isinstance(value, (list, tuple)):
        if len(value) != depth + 1:
            raise InvalidParameterError(
                f"The {name!r} parameter of {_CALLER} must be a scalar or a sequence of "
                f"depth + 1 = {depth + 1} values (one per conv layer and the readout); "
                f"got {len(value)} values."
            )
        return [check_real(v, name, caller=_CALLER, low=0.0) for v in value]
    v = check_real(value, name, caller=_CALLER, low=0.0)
    return [v] * (depth + 1)


def _check_pixel_scale(x, name, w0, xp):
    """Refuse pixel values whose squares (summed over channels, times W_std[0]²) would overflow.

    The recursion starts from K₀ = xᵀx'/C, so every |pixel value| must be at most
    √(largest float)/(4·√C·max(1, W_std[0])); beyond that InvalidParameterError names ``name``.
    """
    if x.shape[0] == 0:
        return
    c = x.shape[1]
    largest = float(xp.max(xp.abs(x)))
    limit = math.sqrt(float(xp.finfo(x.dtype).max)) / 4 / math.sqrt(c) / max(1.0, w0)
    if not largest <= limit:
        dtype = "float32" if x.dtype == xp.float32 else "float64"
        raise InvalidParameterError(
            f"The {name!r} parameter of {_CALLER} has a pixel value of magnitude {largest:.3g}, outside the "
            f"representable range: with {c} channel(s) and W_std[0] = {w0:.3g}, |values| must be at most "
            f"{limit:.3g} in {dtype} (the first-layer variances would overflow). Rescale the inputs."
        )


def _power_of_two_scales(x, xp):
    """(n,) powers of two 2^e with max|x_i| / 2^e in [1, 2) (1 for zero images): exact rescaling factors."""
    n = x.shape[0]
    big = xp.max(xp.abs(xp.reshape(x, (n, -1))), axis=1)
    safe = xp.where(big > 0, big, xp.ones_like(big))
    expo = xp.floor(xp.log2(safe))
    two = xp.asarray(2.0, dtype=x.dtype, device=device_of(x))
    return xp.pow(two, expo)


# ----------------------------------------------------------------------------
# public entry point
# ----------------------------------------------------------------------------
def cntk(
    x1,
    x2=None,
    *,
    depth,
    readout="gap",
    filter_size=3,
    W_std=1.0,
    b_std=0.0,
    fix_first_last=False,
    method=None,
    max_memory=2**28,
    n_jobs=None,
    error_bound=False,
):
    r"""NNGP and NTK of the infinitely wide ReLU CNN (seed 004, CNTK).

    Architecture: ``depth`` × [conv q×q (SAME zero padding, stride 1) → ReLU],
    then a dense readout after global average pooling (``"gap"``, CNTK-GAP)
    or after flattening (``"flatten"``, vanilla CNTK-V), all in the NTK
    parameterization with neural-tangents' conventions (see the module
    docstring for the recursion, seed 004 eqs. (6)–(8) per pixel pair):

    .. math::
        K_0 = \tfrac1C x^\top x',\quad
        \Sigma_\ell = W_\ell^2\,\mathcal A(K_{\ell-1}) + b_\ell^2,\quad
        \Theta_\ell = \Sigma_\ell + W_\ell^2\,\mathcal A(\Theta_{\ell-1}\odot\dot\kappa_{\ell-1}),

    K_ℓ, κ̇_ℓ the ReLU arc-cosine moments of Σ_ℓ per pixel pair, and readout
    nngp = W²R(K_L) + b², ntk = nngp + W²R(Θ_L ⊙ κ̇_L) with R the mean over
    all pixel pairs (gap) or over the diagonal p = p′ (flatten).

    Parameters
    ----------
    x1 : array, shape (n1, C, H, W)
        Images, channels first.
    x2 : array, shape (n2, C, H, W), optional
        Second set; ``None`` means ``x1``, and then only the pairs i ≤ j are
        computed and the result is mirrored (exactly symmetric).
    depth : int ≥ 1
        Number of conv + ReLU layers L (Arora et al.'s ``--depth`` is L + 1).
    readout : {"gap", "flatten"}
        Global average pooling (mean over all P² pixel pairs) or flatten
        (mean over the P offset-0 pairs, i.e. (1/P)·trace).
    filter_size : odd int ≥ 1
        q; ``filter_size=1`` makes every pixel an independent FC net over
        the channels (the kernel is then the mean of FC kernels over pixel
        pairs, tested).  A filter larger than 2·max(H, W) − 1 sees only zero
        padding beyond that size: it is computed as that size with the conv
        layers' ``W_std`` scaled by (2·max(H, W) − 1)/q, the same kernel
        (tested), at the cost of the smaller filter.
    W_std, b_std : float ≥ 0 or sequence of depth + 1 floats
        Weight and bias standard deviations, per conv layer and readout.
    fix_first_last : bool
        Drop the first conv's and the readout's parameters from the tangent
        kernel (Arora et al.'s "fix" variant, Sec. 4.2).  ``.nngp`` unchanged.
    method : {None, "full", "diagonal"}
        ``None``: "diagonal" (O(P) per pair, exact) for flatten, "full"
        (O(P²) per pair) for gap.  ``"full"`` with flatten computes the whole
        pixel-pair tensor (for validation).  "diagonal" with gap is an error.
    max_memory : int
        Approximate bound, in bytes, on the working memory of one batch of
        image pairs per worker thread (a batch holds ≥ 1 pair whatever the
        bound).  Large GAP pairs on NumPy run one at a time in blocks of
        pixel rows whatever the bound (a 32×32 pair takes about 8 × 10.7 MB
        per thread, plus ~30 MB for the refinement of flagged entries).
    n_jobs : int ≥ 1, optional
        Worker threads over batches of pairs (NumPy only; default: the
        available cores).  Other namespaces run one batch at a time.
    error_bound : bool
        ``True`` is refused (NotImplementedError naming the parameter): no proven per-entry bound of the
        CNTK's rounding exists yet; its enclosures are :func:`ntkref.enclosures.cntk` (small images).

    Returns
    -------
    Kernel
        ``.nngp`` and ``.ntk``, arrays of shape (n1, n2) in the namespace and
        floating dtype of the inputs (float64 for integer inputs).

    Raises
    ------
    InvalidParameterError
        A pixel value of ``x1``/``x2`` above √(largest float)/(4·√C·max(1, W_std[0]))
        (the message names the parameter and the bound), or a kernel entry that
        overflows the dtype (never inf or NaN); or the outputs, the per-image
        maps and the workers' batches would not fit in the memory available where
        the arrays live (checked before computing; the message gives the size
        and the ways out).

    Notes
    -----
    Arora et al.'s values (c_σ = 2, no 1/C, patch sums, trace for vanilla)
    are Θ_Arora-GAP = C·ntk and Θ_Arora-V = C·P·ntk with
    ``W_std=[1, √2, …, √2]``; see the module docstring.

    Accuracy (float64): every entry within 1e-13·√(K(x,x)·K(x′,x′)) of the
    exact value of the recursion, K the same output (``nngp`` or ``ntk``),
    measured against a 50-digit mpmath evaluation on adversarial images
    (antiparallel and parallel pixel pairs of equal and unequal norms, zero
    patches and images, scales 1e-150 to 1e150, biases, depths 1–4, 1×1 and
    3×3 filters, both readouts); near-parallel and antiparallel pixel pairs
    get their angle without cancellation (module docstring).  float32: ≈1e-6
    relative.  Cost per pair: O(L q P²) (gap) or O(L q P) (flatten).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.kernels import cntk, fc
    >>> x = np.random.default_rng(0).standard_normal((3, 2, 5, 5))      # 3 images, 2 channels, 5×5
    >>> k = cntk(x, depth=2, readout="flatten")
    >>> k.ntk.shape, bool((k.ntk == k.ntk.T).all())                        # exactly symmetric
    ((3, 3), True)
    >>> v = np.random.default_rng(1).standard_normal((3, 4))
    >>> k1 = cntk(v[:, :, None, None], depth=2, filter_size=1)            # 1×1 images, 1×1 filters: an FC net
    >>> bool(np.allclose(k1.ntk, fc(v, depth=2).ntk, rtol=1e-12, atol=1e-12))
    True
    """
    refuse_error_bound(error_bound, _CALLER, "the CNTK")
    lazy = dispatch.cntk.lookup(x1, x2)
    if lazy is not None:  # Dask images: one task per block of image rows, nothing computed (ntkref/_engines/dask)
        return lazy(x1, x2, depth=depth, readout=readout, filter_size=filter_size, W_std=W_std, b_std=b_std,
                    fix_first_last=fix_first_last, method=method, max_memory=max_memory, n_jobs=n_jobs)
    xp = namespace(x1, x2)
    x1 = check_array(x1, "x1", caller=_CALLER, ndim=4, xp=xp)
    symmetric = x2 is None
    if not symmetric:
        x2 = check_array(x2, "x2", caller=_CALLER, ndim=4, xp=xp)
        if tuple(x2.shape[1:]) != tuple(x1.shape[1:]):
            raise InvalidParameterError(
                f"The 'x2' parameter of {_CALLER} must have the same (channels, height, width) "
                f"as 'x1' {tuple(x1.shape[1:])}; got {tuple(x2.shape[1:])}."
            )
        dtype = xp.result_type(x1.dtype, x2.dtype)
        x1, x2 = xp.astype(x1, dtype), xp.astype(x2, dtype)
    depth = check_int(depth, "depth", caller=_CALLER, low=1)
    check_option(readout, "readout", ("gap", "flatten"), caller=_CALLER)
    q = check_int(filter_size, "filter_size", caller=_CALLER, low=1)
    if q % 2 == 0:
        raise InvalidParameterError(
            f"The 'filter_size' parameter of {_CALLER} must be odd (SAME padding is "
            f"symmetric only for odd sizes); got {q}."
        )
    if not isinstance(fix_first_last, bool):
        raise InvalidParameterError(
            f"The 'fix_first_last' parameter of {_CALLER} must be a bool; got {fix_first_last!r}."
        )
    check_option(method, "method", (None, "full", "diagonal"), caller=_CALLER)
    if method == "diagonal" and readout == "gap":
        raise InvalidParameterError(
            f"The 'method' parameter of {_CALLER} cannot be 'diagonal' with readout='gap': "
            "global average pooling needs every pixel pair."
        )
    full = readout == "gap" or method == "full"
    max_memory = check_int(max_memory, "max_memory", caller=_CALLER, low=1)
    if n_jobs is not None:
        n_jobs = check_int(n_jobs, "n_jobs", caller=_CALLER, low=1)
    ws = _per_layer(W_std, "W_std", depth)
    bs = _per_layer(b_std, "b_std", depth)
    if x1.shape[1] == 0 or x1.shape[2] == 0 or x1.shape[3] == 0:
        raise InvalidParameterError(
            f"The 'x1' parameter of {_CALLER} must have at least one channel and pixel; "
            f"got shape {tuple(x1.shape)}."
        )

    _check_pixel_scale(x1, "x1", ws[0], xp)
    if not symmetric:
        _check_pixel_scale(x2, "x2", ws[0], xp)
    xb_all = x1 if symmetric else x2
    n1, n2 = x1.shape[0], xb_all.shape[0]
    _, c, h, w = x1.shape
    device = device_of(x1)
    # A filter wider than q_c = 2·max(H, W) − 1 reaches past the image from every pixel: its further taps
    # read only zero padding, so 𝒜_q = (q_c/q)²·𝒜_{q_c}, and W_ℓ²𝒜_q = (W_ℓ·q_c/q)²𝒜_{q_c}: the kernel is the
    # q_c filter's with the conv layers' W_std scaled by q_c/q (the readout's unchanged) — equal up to
    # rounding (tested), in O(q_c²) instead of O(q²) memory and time (q = 99 on 4×4 images asked for 51.8 GiB).
    q_full = 2 * max(h, w) - 1
    if q > q_full:
        ws = [v * q_full / q for v in ws[:depth]] + list(ws[depth:])
        q = q_full
    g = _Geometry(h, w, q, full)
    itemsize = 4 if x1.dtype == xp.float32 else 8
    fast = array_api_compat.is_numpy_namespace(xp)

    rows, per_batch, batches, workers, needed = _plan(n1, n2, symmetric, c, g, depth, readout, itemsize, fast,
                                                      max_memory, n_jobs, xp)
    check_bytes(
        needed,
        f"The 'x1'/'x2' parameters ({n1} × {n2} images of {c}×{h}×{w}, in "
        f"{'float32' if itemsize == 4 else 'float64'})",
        _CALLER,
        xp,
        x1,
        "ways out: float32 inputs (half the memory), a smaller max_memory or n_jobs, or fewer images per call: "
        "compute the Gram in row blocks cntk(x1[i:j], x2) and write each block out (e.g. with the CLI's --out)",
    )
    if n1 == 0 or n2 == 0:
        empty = xp.zeros((n1, n2), dtype=x1.dtype, device=device)
        return Kernel(empty, empty)
    import numpy as np  # errstate: the padding holds 0/0 and ∞·0 (also inside NumPy-backed namespaces)

    with np.errstate(all="ignore"):
        nngp, ntk = _gram(x1, x2, symmetric, ws, bs, depth, q, g, readout, fix_first_last, batches, per_batch,
                          workers, fast, rows, xp)
    out = Kernel(nngp, ntk)
    for value in (out.nngp, out.ntk):
        check_finite_kernel(value, _CALLER, xp)
    return out


class _Batches:
    """The batches (i, j0, j1) of a Gram, in row order, generated on iteration; ``len`` without listing them."""

    def __init__(self, n1, n2, symmetric, per_batch):
        self.n1, self.n2, self.symmetric, self.per_batch = n1, n2, symmetric, per_batch

    def __iter__(self):
        for i in range(self.n1):
            for j0 in range(i if self.symmetric else 0, self.n2, self.per_batch):
                yield i, j0, min(self.n2, j0 + self.per_batch)

    def __len__(self):
        per, n2 = self.per_batch, self.n2
        if not self.symmetric:
            return self.n1 * (-(-n2 // per))
        return sum(-(-(n2 - i) // per) for i in range(self.n1))


def _plan(n1, n2, symmetric, c, g, depth, readout, itemsize, fast, max_memory, n_jobs, xp):
    """The work plan of a Gram: (row-block path?, pairs per batch, batches, worker threads, estimated bytes).

    The estimate (what :func:`cntk` checks against the available memory before computing): the two outputs
    (assembled by concatenation, about twice, where arrays are not writable in place) and the per-pair sums,
    the per-image maps, and each worker's arrays for one batch.
    """
    n_pairs = n1 * (n1 + 1) // 2 if symmetric else n1 * n2  # a symmetric Gram: the pairs i ≤ j
    per_pair = itemsize * (_BUFFERS * g.n + 2 * (c + depth) * g.pt) + g.n  # + the refinement's flags
    rows = fast and readout == "gap" and g.n >= _ROWS_MIN_ENTRIES
    if rows:  # one pair at a time, in blocks of pixel rows
        per_pair = _row_work_bytes(g, itemsize, _BLOCK_ENTRIES) + itemsize * 2 * (c + depth) * g.pt
        # the flagged entries waiting for their refinement (≤ _REFINE_CHUNK + a block: index, k, Θ and five
        # results each) and one refinement group's gathers (patches of C·q² values and their indices)
        pending = _REFINE_CHUNK + _RowBlocks(g, _BLOCK_ENTRIES).longest
        per_pair += pending * (8 + 7 * itemsize) + _REFINE_CHUNK * 4 * (c * g.q * g.q) * 8
        per_batch = 1
    elif fast:
        # one pair a batch when its tensors exceed ~2M entries (cache-sized passes), more for small images
        per_batch = max(1, min(max_memory // per_pair, max(1, (1 << 21) // g.n)))
    else:
        per_batch = max(1, max_memory // per_pair)
    # batches: runs of ≤ per_batch pairs (i, j0..j1) along a row (j ≥ i for a symmetric Gram), generated as
    # they are taken (a list, or one future per batch, would cost ~1.7 kB a pair: 3.4 GB for 2 000 images)
    batches = _Batches(n1, n2, symmetric, per_batch)
    workers = n_workers(n_jobs, xp, len(batches), _CALLER)
    outputs = 2 * n1 * n2 * itemsize * (1 if fast else 3) + (0 if fast else 8 * n1 * n2 + 32 * n_pairs)
    maps = itemsize * (c + depth) * g.pt * (n1 + (0 if symmetric else n2))
    return rows, per_batch, batches, workers, outputs + maps + workers * per_pair * min(per_batch, max(1, n_pairs))


def _gram(x1, x2, symmetric, ws, bs, depth, q, g, readout, fix, batches, per_batch, workers, fast, rows, xp):
    """The (n1, n2) nngp and ntk, batch by batch (threads over batches on NumPy)."""
    n1 = x1.shape[0]
    n2 = n1 if symmetric else x2.shape[0]
    device = device_of(x1)
    h, w = g.h, g.w
    # without biases the kernel is positively homogeneous in each image: compute on x/2^e, scale back
    homogeneous = all(b == 0.0 for b in bs)
    if homogeneous:
        sc1 = _power_of_two_scales(x1, xp)
        x1n = x1 / sc1[:, None, None, None]
        sc2 = sc1 if symmetric else _power_of_two_scales(x2, xp)
        x2n = x1n if symmetric else x2 / sc2[:, None, None, None]
    else:
        x1n, x2n = x1, (x1 if symmetric else x2)
    cs = [wl * wl / (q * q) for wl in ws[:depth]]
    b2s = [bl * bl for bl in bs[:depth]]
    pad1 = _pad_images(x1n, g, xp)
    pad2 = pad1 if symmetric else _pad_images(x2n, g, xp)
    sig1 = _variance_maps(pad1, g, cs, b2s, xp)
    sig2 = sig1 if symmetric else _variance_maps(pad2, g, cs, b2s, xp)
    inside_img = _interior_flags(g, xp, device)
    zero1 = [xp.any((s == 0) & inside_img[None, :], axis=1) for s in sig1]
    zero2 = zero1 if symmetric else [xp.any((s == 0) & inside_img[None, :], axis=1) for s in sig2]
    n_inner = (h * w) ** 2 if readout == "gap" else h * w
    w2, b2 = ws[depth] ** 2, bs[depth] ** 2
    per_entry = w2 / (2 * _PI * n_inner)
    shared = {"inside": inside_img} if rows else {}  # the image's interior flags, for the refinement

    def run(batch, work):
        i, j0, j1 = batch
        m = j1 - j0
        sa = xp.full((m,), i, device=device)
        sb = xp.arange(j0, j1, device=device)
        st = {
            "c": cs,
            "b2": b2s,
            "fix": fix,
            "diagonal_readout": readout == "flatten",
            "xa": xp.take(pad1, sa, axis=0),
            "xb": xp.take(pad2, sb, axis=0),
            "sig_a": [xp.take(s, sa, axis=0) for s in sig1],
            "sig_b": [xp.take(s, sb, axis=0) for s in sig2],
            "zero_sig": [bool(za[i]) or bool(xp.any(zb[j0:j1])) for za, zb in zip(zero1, zero2)],
            "refine_chunk": _REFINE_CHUNK,
            **shared,
        }
        if rows:
            ksum, tsum = _pair_sums_rows(st, g, work)
        else:
            ksum, tsum = _batch_sums(st, g, m, xp, fast, work)
        nngp_v = ksum * per_entry + b2
        tail = tsum * per_entry
        ntk_v = tail if fix else nngp_v + tail
        if homogeneous:
            factor = sc1[i] * sc2[j0:j1]
            nngp_v, ntk_v = nngp_v * factor, ntk_v * factor
        return nngp_v, ntk_v

    if fast:
        np = _np()
        dtype = x1.dtype
        nngp = np.empty((n1, n2), dtype=dtype)
        ntk = np.empty((n1, n2), dtype=dtype)

        def store(batch, values):
            i, j0, j1 = batch
            for out, v in zip((nngp, ntk), values):
                out[i, j0:j1] = v
                if symmetric:
                    out[j0:j1, i] = v  # exactly symmetric: one value for (i, j) and (j, i)

        def new_work():
            if rows:
                return _row_work(g, dtype, _BLOCK_ENTRIES)
            return {name: np.empty(per_batch * g.n, dtype=dtype)
                    for name in ("s", "k", "th", "f", "tmp", "e0", "e1", "p0", "p1")}

        with single_threaded_blas(xp):
            if workers == 1:
                work = new_work()
                for batch in batches:
                    store(batch, run(batch, work))
            else:
                # each worker takes the next batch from one shared iterator (a bounded number in flight)
                import threading
                from concurrent.futures import ThreadPoolExecutor

                taken = iter(batches)
                lock = threading.Lock()
                failed = threading.Event()

                def worker():
                    work = new_work()
                    with np.errstate(all="ignore"):  # thread-local
                        while not failed.is_set():
                            with lock:
                                batch = next(taken, None)
                            if batch is None:
                                return
                            try:
                                store(batch, run(batch, work))
                            except BaseException:
                                failed.set()
                                raise

                with ThreadPoolExecutor(max_workers=workers) as pool:
                    for future in [pool.submit(worker) for _ in range(workers)]:
                        future.result()
        return nngp, ntk
    # other namespaces: one batch at a time, assembled by a gather (no item assignment needed)
    parts = [run(batch, None) for batch in batches]
    nngp_v = xp.concat([p_[0] for p_ in parts])
    ntk_v = xp.concat([p_[1] for p_ in parts])
    if symmetric:
        la = xp.arange(n1, device=device)
        lo = xp.minimum(la[:, None], la[None, :])
        hi = xp.maximum(la[:, None], la[None, :])
        pos = xp.reshape(lo * n1 - (lo * (lo - 1)) // 2 + (hi - lo), (-1,))
    else:
        pos = xp.arange(n1 * n2, device=device)
    return xp.reshape(xp.take(nngp_v, pos), (n1, n2)), xp.reshape(xp.take(ntk_v, pos), (n1, n2))
