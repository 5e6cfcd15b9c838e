r"""NNGP and NTK of fully connected networks of any depth (infinite width).

Conventions (neural-tangents' NTK parameterisation, docs/conventions.md, 'FC kernels').  With
``depth`` = L hidden layers and per-layer ``W_std`` = (W₀, …, W_L) and
``b_std`` = (b₀, …, b_L) (the last entry is the readout):

.. math::

    Σ^{(0)}(x, x') = W_0^2\,x·x'/d + b_0^2,\qquad Θ^{(0)} = Σ^{(0)},

    Σ^{(h)} = W_h^2\,E[σ(u)σ(v)] + b_h^2,\qquad
    Θ^{(h)} = Σ^{(h)} + W_h^2\,E[σ'(u)σ'(v)]\,Θ^{(h-1)},

with (u, v) ~ N(0, [[Σ^{(h−1)}(x,x), Σ^{(h−1)}(x,x')], [·, Σ^{(h−1)}(x',x')]]);
``.nngp`` = Σ^{(L)} and ``.ntk`` = Θ^{(L)}.  This is the recursion of seed 004
eqs. (6)–(8) with c_σ moved into the next layer's W² and the input divided by
d; seed 000 eq. (63) is the case L = 1, W = 1 (see :mod:`._two_layer`).

Dual activations (σ, closed forms; θ the angle of (u, v), q = E[u²]):

- ReLU (arc-cosine kernel of degree 1, Cho & Saul):
  E[σσ] = √(q₁q₂)·(sin θ + (π − θ) cos θ)/(2π), E[σ'σ'] = (π − θ)/(2π).
- erf: E[σσ] = (2/π) arcsin(2Σ₁₂/√((1+2q₁)(1+2q₂))),
  E[σ'σ'] = (4/π)/√((1+2q₁)(1+2q₂) − 4Σ₁₂²).
- any other elementwise σ (with σ'): Gauss–Hermite quadrature over the 2×2
  Gaussian, written in polar form u = √q₁ z₁, v = √q₂ (cos θ z₁ + sin θ z₂).

Numerics.  The recursion carries, per pair, the correlation ρ = cos θ *and*
the two quantities 1 − ρ and 1 + ρ, each computed without cancellation
(bias terms enter through identities such as
√((aq₁+b²)(aq₂+b²)) − a√(q₁q₂) − b² = ab²(√q₁−√q₂)²/(…) ≥ 0), and
θ = atan2(√((1−ρ)(1+ρ)), ρ).  At the input, pairs with |cos| > 0.95 get their
angle from the difference and the sum of the normalised rows,
θ = 2·atan2(‖x̂ − x̂'‖, ‖x̂ + x̂'‖), so the angle is accurate to a few ulps in
absolute terms for near-parallel and antiparallel rows alike (the arccos or
neural-tangents' atan2(√(q₁q₂ − k²), k) lose half the digits there).  Scales
are carried as √q (norms), so inputs from 1e-150 to 1e150 neither overflow
nor underflow (for erf and quadrature the post-activation scale of a tiny row
is computed without squaring it, so rows down to 1e-300 keep their scale).

Representable range (finite or an error).  Rows whose first-layer scale
W_std[0]·‖x‖/√d exceeds √(largest float)/4 (3.4e153 in float64, 4.6e18 in
float32), and W_std or b_std above that bound, are refused with an
InvalidParameterError naming the parameter and the bound; an output that still
overflows (e.g. W_std = 1e100 over several layers) raises InvalidParameterError
instead of returning inf or NaN.  A zero row has Σ(x, ·) = b² terms only and Θ(x, 0) = 0
without biases.  ReLU without biases (the common case) runs on the angle
alone — Θ(x, x') = ‖x‖‖x'‖·Θ(x̂, x̂') by positive homogeneity — with in-place
updates, so a layer costs one arctan, one square root and ~15 cheap passes
per entry (the arctan, not the matmul, is the largest single cost).

Accuracy (ReLU, measured against mpmath at 50 digits in the tests): every
entry within 1e-13·√(K(x,x)K(x',x')) in float64 (about 1e-5 in float32), the
diagonal to 1e-14 relative.  erf: the same bound, checked at row norms from
1e-300 to 3e153 (tests/test_kernels.py).  Quadrature: the rule's error, which for smooth σ falls geometrically
with the number of points (default 128 per dimension; the tests measure the convergence).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import array_api_compat

from .._lib import dispatch
from .._lib.backend import is_array, namespace
from .._lib.compat import overflow_checked, single_threaded_blas
from .._lib.memory import check_bytes
from .._lib.validation import InvalidParameterError, check_array, check_int, check_option
from ._activations import per_layer, resolve_activation
from . import _rounding, _rounding_bias, _rounding_erf
from ._layers import (
    check_finite_kernel,
    check_input_scale,
    check_quadrature_resolution,
    diag_recursion,
    fc_block,
    relu_unbiased_block,
    row_norms,
    scale_limit,
)

__all__ = ["BoundedKernel", "Kernel", "fc", "fc_diagonal"]


@dataclass(frozen=True)
class Kernel:
    """NNGP and NTK Gram matrices (either may be ``None`` if not requested).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.kernels import fc
    >>> k = fc(np.eye(3), get="ntk")          # only the NTK was asked for
    >>> k.nngp is None, k.ntk.shape
    (True, (3, 3))
    """

    nngp: object
    ntk: object


@dataclass(frozen=True)
class BoundedKernel(Kernel):
    """A :class:`Kernel` with proven per-entry error bounds (``fc(..., error_bound=True)``).

    ``nngp_bound``/``ntk_bound`` (``None`` where the output was not asked for) have the outputs' shape,
    namespace and device: for every entry |K̃ − K| ≤ bound, K the exact real-number kernel of the exact float
    inputs (the theorem and its assumptions: :mod:`ntkref.kernels._rounding`).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.kernels import fc
    >>> k = fc(np.array([[1.0, 2.0], [3.0, -1.0]]), depth=2, error_bound=True)
    >>> k.ntk.shape == k.ntk_bound.shape, bool((k.ntk_bound <= 1e-12 * np.abs(k.ntk).max()).all())
    (True, True)
    """

    nngp_bound: object = None
    ntk_bound: object = None



# ------------------------------------------------------------------ public API


def prepare(x1, x2, depth, activation, W_std, b_std, dtype, caller, x1_name="x1"):
    xp = namespace(x1, x2)
    x1 = check_array(x1, x1_name, caller=caller, ndim=2, xp=xp, dtype=dtype)
    if x2 is not None:
        # an array keeps its own floating dtype and the two are promoted (float32 with float64 is float64, in
        # either order); a list follows x1's dtype
        x2 = check_array(x2, "x2", caller=caller, ndim=2, xp=xp,
                         dtype=dtype if dtype is not None or is_array(x2) else x1.dtype)
        if x2.dtype != x1.dtype:
            wide = xp.result_type(x1.dtype, x2.dtype)
            x1, x2 = xp.astype(x1, wide), xp.astype(x2, wide)
        if x2.shape[1] != x1.shape[1]:
            raise InvalidParameterError(
                f"x1 and x2 of {caller} must have the same number of features; got {x1.shape[1]} and {x2.shape[1]}."
            )
    if x1.shape[1] == 0:
        raise InvalidParameterError(f"The {x1_name!r} parameter of {caller} must have at least one feature.")
    depth = check_int(depth, "depth", caller=caller, low=0)
    act, closed = resolve_activation(activation)
    limit = scale_limit(x1.dtype, xp)
    Ws = per_layer(W_std, "W_std", depth + 1, low=0.0, closed="left", high=limit)
    bs = per_layer(b_std, "b_std", depth + 1, low=0.0, closed="left", high=limit)
    return xp, x1, x2, depth, act, closed, Ws, bs


def fc(
    x1,
    x2=None,
    *,
    depth=1,
    activation="relu",
    W_std=1.0,
    b_std=0.0,
    get=("nngp", "ntk"),
    method="closed",
    quadrature_points=128,
    block_size=None,
    n_jobs=None,
    dtype=None,
    engine="auto",
    error_bound=False,
):
    """NNGP and NTK of a fully connected network with ``depth`` hidden layers.

    Parameters
    ----------
    x1 : array, shape (n1, d)
        One sample a row.
    x2 : array, shape (n2, d), optional
        ``None`` means ``x1``; the result is then exactly symmetric and only
        blocks on and above the diagonal are computed.
    depth : int ≥ 0
        Number of hidden layers (0: a linear model, Θ = Σ = W₀²x·x'/d + b₀²).
    activation : {"relu", "erf", "tanh"} or Activation
        ReLU and erf have closed forms; anything else is integrated by
        Gauss–Hermite quadrature (``quadrature_points`` per dimension).
    W_std, b_std : float ≥ 0 or sequence of depth + 1 floats
        Per-layer weight and bias standard deviations, readout last.
    get : "nngp", "ntk" or a tuple of them
        What to compute (computing only the NTK still runs the NNGP recursion,
        but stores one output array).
    method : {"closed", "quadrature"}
        ``"quadrature"`` forces quadrature even for ReLU/erf (a test route, to measure the rule's convergence
        against the closed forms: its resolution is not checked there).  For activations without a closed form
        (tanh, an Activation) the n-point rule's error is estimated by the 2n-point rule on the diagonal and
        inputs it cannot resolve to 1e-8 (float64; 1e-4 float32) are refused, naming ``quadrature_points``:
        with the default 128 points that is W_std[0]·‖x‖/√d ≳ 2 for tanh or erf (measured against erf's
        closed form: 5.6e-12 at 1.5, 2.6e-7 at 2 — a 36 % error at 7 used to be returned silently).
    block_size : int, optional
        Rows per block; the working memory is about 12·block_size² floats per
        worker on top of the output.  Default: 768 (4096 on CuPy; smaller for
        quadrature).
    n_jobs : int, optional
        Blocks computed in parallel threads (NumPy namespace only; other
        namespaces use 1).  Default: the number of CPUs available.
    dtype : {"float64", "float32"}, optional
        Default: the inputs' floating dtype (float32 with float64 gives float64, in either order), float64 for
        integer input.
    engine : {"auto", "array_api"}
        ``"auto"`` runs ReLU without biases on CuPy arrays as one fused CUDA
        kernel over the Gram (:mod:`ntkref._engines.cuda`: the same operations per
        entry, one pass over memory instead of ~15 a layer; blocks as large
        as free device memory allows, ``block_size`` ignored) and everything
        else on the array-API path.  ``"array_api"`` forces the array-API
        path, the tested reference of the fused kernel.
    error_bound : bool
        ``True``: also return a proven per-entry bound B ≥ |K̃ − K| of each output's rounding error against
        the exact kernel of the exact float inputs (:class:`BoundedKernel`), by a running error analysis of
        the recursion (:mod:`ntkref.kernels._rounding`: the theorem and its assumptions — IEEE arithmetic,
        atan/atan2/sin/cos within 4 ulp).  The kernel values are bit-for-bit those of ``error_bound=False``.
        Available for ReLU without biases (any ``W_std``, float64/float32, every namespace but JAX; on CuPy
        the array-API path runs, not the fused kernel; refused where the first-order analysis stops — float32
        with d > 2 602, or beyond depth 14; float64 beyond depth ~1 050) and with biases (per-layer ``b_std``;
        :mod:`ntkref.kernels._rounding_bias`, ``hypot`` within 4 ulp also assumed; float32 to depth 3);
        erf (closed form, with or without biases, depth ≤ 10, float64/float32): per-entry running bounds
        (:mod:`ntkref.kernels._rounding_erf`; scaled bound ~1e-13 at depth 1, ~1e-11 at depth 3, ~1e-8 at
        depth 10 for d = 784; larger — truly ill-conditioned — where a first-layer scale ≳ 1e50 meets an
        angle near 0 or π); quadrature: NotImplementedError naming the parameter.  Scaled bound B/√(K(x,x)K(x′,x′)) at
        depths 0–3 in float64, for every input: ≤ 1e-12 for d ≤ 1118 without biases (it grows like d·u:
        the worst-case rounding of the dot products; ≈ 1.6e-13 at depth 3, d = 100) and for d ≤ 669 with
        biases (≈ 3.8e-13 at depth 3, d = 100), for rows of normal norm (a row of subnormal norm in a
        biased net gets the trivial bound |K̃| + |K|).

    Returns
    -------
    Kernel
        ``.nngp`` and ``.ntk`` arrays of shape (n1, n2) (``None`` if not in ``get``); with ``error_bound``
        a :class:`BoundedKernel` (also ``.nngp_bound`` and ``.ntk_bound``).

    Raises
    ------
    InvalidParameterError
        A row of ``x1``/``x2`` with W_std[0]·‖x‖/√d > √(largest float)/4, a
        ``W_std``/``b_std`` above that bound (the message names the parameter
        and the bound), or a kernel entry that overflows the dtype; or the
        outputs and the blocks' working memory would not fit in the memory
        available where the arrays live (host: /proc/meminfo; CuPy: the
        device's free memory), checked before anything is allocated: the
        message gives the size and the ways out (float32, fewer rows per call,
        smaller blocks).

    Notes
    -----
    Formula: see the module docstring (neural-tangents' convention; seed 004
    eqs. (6)–(8) up to the scalings tested in ``tests/test_kernels.py``).
    Cost: O(n1·n2·(d + depth)) time, O(n1·n2) output memory.

    Examples
    --------
    At depth 0 the kernel is the linear model W₀²·x·x′/d + b₀² (here d = 2):

    >>> import numpy as np
    >>> from ntkref.kernels import fc
    >>> x = np.array([[1.0, 2.0], [3.0, -1.0]])
    >>> np.round(fc(x, depth=0, W_std=2.0, b_std=0.5).ntk, 12).tolist()
    [[10.25, 2.25], [2.25, 20.25]]
    >>> k = fc(x, depth=3)                    # exactly symmetric, positive definite
    >>> bool((k.ntk == k.ntk.T).all()), bool(np.linalg.eigvalsh(k.ntk).min() > 0)
    (True, True)
    """
    lazy = dispatch.fc.lookup(x1, x2)
    if lazy is not None:  # a Dask x1/x2: one task per block (ntkref/_engines/dask)
        return lazy(x1, x2, depth=depth, activation=activation, W_std=W_std, b_std=b_std, get=get, method=method,
                        quadrature_points=quadrature_points, block_size=block_size, n_jobs=n_jobs, dtype=dtype,
                        engine=engine, **({} if error_bound is False else {"error_bound": error_bound}))
    xp, x1, x2, depth, act, closed, Ws, bs = prepare(x1, x2, depth, activation, W_std, b_std, dtype, "fc")
    if method not in ("closed", "quadrature"):
        raise InvalidParameterError(f"The 'method' parameter of fc must be 'closed' or 'quadrature'. Got {method!r} instead.")
    quadrature_only = closed is None  # no closed form: quadrature is the answer, and its resolution is checked
    if method == "quadrature":
        closed = None
    wanted = (get,) if isinstance(get, str) else tuple(get)
    if not wanted or any(g not in ("nngp", "ntk") for g in wanted):
        raise InvalidParameterError(f"The 'get' parameter of fc must be 'nngp', 'ntk' or both. Got {get!r} instead.")
    n_points = check_int(quadrature_points, "quadrature_points", caller="fc", low=2, high=256)
    if block_size is None:
        # CPU: blocks that stay in cache; GPU: blocks large enough to fill the device
        block_size = (4096 if array_api_compat.is_cupy_namespace(xp) else 768) if closed is not None \
            else max(16, 4096 // n_points * 8)
    block_size = check_int(block_size, "block_size", caller="fc", low=1)

    engine = check_option(engine, "engine", ("auto", "array_api"), caller="fc")
    coefs = _bound_coefficients(error_bound, closed, method, bs, act, x1.shape[1], Ws, depth, wanted, x1, xp)
    if n_jobs is not None:
        check_int(n_jobs, "n_jobs", caller="fc", low=1)
    symmetric = x2 is None
    d = x1.shape[1]
    unbiased_relu = closed == "relu" and all(b == 0.0 for b in bs)
    lift = _liftable(closed, bs, Ws, x1.dtype, xp)
    # rows of subnormal norm are lifted by 2^64 (exact) and the outputs multiplied by 2^-64 per lifted row at
    # the end (row_norms(lift=True)), where the kernel is homogeneous in each row (_liftable)
    n1_norm, u1, *f1 = row_norms(x1, xp, lift=lift)
    if symmetric:
        x2, n2_norm, u2, f2 = x1, n1_norm, u1, f1
    else:
        n2_norm, u2, *f2 = row_norms(x2, xp, lift=lift)
    lift = _lift_factors(f1, f2, n1_norm, n2_norm, xp)
    if coefs is not None and "_bias" in coefs:
        _bias_rows(coefs, n1_norm, n2_norm, symmetric, d, Ws, bs, xp)
    if coefs is not None and "_erf" in coefs:  # erf: per-row regularity and trivial-bound scales
        r1 = _rounding_erf.erf_rows(n1_norm, f1[0] if f1 else None, xp, coefs["_erf"])
        coefs["_rows"] = (r1, r1 if symmetric else _rounding_erf.erf_rows(n2_norm, f2[0] if f2 else None, xp,
                                                                          coefs["_erf"]))
    n1, n2 = x1.shape[0], x2.shape[0]
    first = Ws[0] / math.sqrt(d)
    check_input_scale(n1_norm, "x1", "fc", first, xp)
    if not symmetric:
        check_input_scale(n2_norm, "x2", "fc", first, xp)
    if quadrature_only:
        check_quadrature_resolution(n1_norm, "x1", d, Ws, bs, act, n_points, xp)
        if not symmetric:
            check_quadrature_resolution(n2_norm, "x2", d, Ws, bs, act, n_points, xp)
    want_ntk = "ntk" in wanted
    # a CuPy x1: the bias-free ReLU Gram as one fused CUDA kernel (ntkref/_engines/cuda.py), same arithmetic
    # (error_bound: the array-API path, whose operations the analysis is of)
    fused = dispatch.fc_relu_fused.lookup(x1) if unbiased_relu and engine == "auto" and coefs is None else None
    outputs = wanted + tuple(f"{g}_bound" for g in wanted) if coefs is not None else wanted
    _check_fc_memory(n1, n2, d, len(outputs), x1, block_size, n_points, closed, symmetric, n_jobs,
                     fused is not None, xp)
    if fused is not None and n1 * n2 > 0:
        nngp, ntk = fused(n1_norm, u1, n2_norm, u2, d, Ws, "nngp" in wanted, want_ntk, symmetric, xp)
        return _result(_unlift({"nngp": nngp, "ntk": ntk}, lift, coefs, xp), None)
    if array_api_compat.is_jax_namespace(xp):
        # JAX arrays are immutable: blocks are assembled by concatenation (about twice the output in memory)
        outs = _fc_assembled(n1_norm, u1, n2_norm, u2, d, Ws, bs, act, closed, n_points, wanted, symmetric,
                             unbiased_relu, block_size, xp, coefs)
        return _result(_unlift(outs, lift, coefs, xp), coefs)
    outs = {g: xp.zeros((n1, n2), dtype=x1.dtype, device=array_api_compat.device(x1)) for g in outputs}
    tasks = []
    for i0 in range(0, n1, block_size):
        i1 = min(i0 + block_size, n1)
        for j0 in range(i0 if symmetric else 0, n2, block_size):
            j1 = min(j0 + block_size, n2)
            if symmetric and i0 == j0 and i1 - i0 >= 64:
                # a diagonal block is computed as two half-size diagonal blocks and the block between
                # them: a quarter of its entries (below the diagonal) is then never computed
                m = (i0 + i1) // 2
                tasks += [(i0, m, i0, m), (i0, m, m, i1), (m, i1, m, i1)]
            else:
                tasks.append((i0, i1, j0, j1))

    def compute(task):
        i0, i1, j0, j1 = task
        with overflow_checked(xp):  # every output is checked below (check_finite_kernel): the named error only
            block = _block_values(n1_norm, u1, n2_norm, u2, i0, i1, j0, j1, d, Ws, bs, act, closed, n_points,
                                  wanted, unbiased_relu, xp, coefs)
        for g in outputs:
            val = block[g]
            check_finite_kernel(val, "fc", xp)
            if symmetric and i0 == j0:
                # exact symmetry: mirror the upper triangle
                val = xp.triu(val) + xp.matrix_transpose(xp.triu(val, k=1))
            outs[g][i0:i1, j0:j1] = val
            if symmetric and i0 != j0:
                outs[g][j0:j1, i0:i1] = xp.matrix_transpose(val)

    workers = n_workers(n_jobs, xp, len(tasks))
    if workers == 1:
        for task in tasks:
            compute(task)
    else:
        # NumPy's elementwise loops release the GIL on large arrays: blocks run in parallel threads,
        # each writing a disjoint region of the output.
        from concurrent.futures import ThreadPoolExecutor

        with single_threaded_blas(xp), ThreadPoolExecutor(max_workers=workers) as pool:
            for _ in pool.map(compute, tasks):
                pass
    return _result(_unlift(outs, lift, coefs, xp), coefs)


def _liftable(closed, bs, Ws, dtype, xp):
    """Whether rows of subnormal norm may be lifted by 2^64 (:func:`._layers.row_norms`): the kernel is then
    homogeneous of degree 1 in each row.  ReLU without biases: exactly (positive homogeneity).  erf without
    biases: for a row of scale s = √q below √u·1e-5 in every layer (a lifted row has norm < 2^-958 in float64,
    2^-62 in float32; each layer multiplies its scale by at most W_h·√(4/π)), arcsin z = z(1 + O(z²)) and
    1 + 2q = 1 + O(q) make Σ(x, x′) linear in x, and E[σ′σ′] independent of it, to a relative 4q·depth
    ≤ 1e-10·u: far below the rounding.  Anything else (biases, quadrature): no lift."""
    if any(b != 0.0 for b in bs):
        return False
    if closed == "relu":
        return True
    if closed != "erf":
        return False
    fin = xp.finfo(dtype)
    s = float(fin.smallest_normal) * 2.0 ** 64 * Ws[0]
    for W in Ws[1:]:
        s *= max(1.0, W * math.sqrt(4 / math.pi))
    return s <= math.sqrt(float(fin.eps) / 2) * 1e-5


def _lift_factors(f1, f2, n1_norm, n2_norm, xp):
    """The outer product of the lift factors of :func:`row_norms` (``None`` when no row was lifted)."""
    f1 = f1[0] if f1 else None
    f2 = f2[0] if f2 else None
    if f1 is None and f2 is None:
        return None
    f1 = xp.ones_like(n1_norm) if f1 is None else f1
    f2 = xp.ones_like(n2_norm) if f2 is None else f2
    return f1[:, None] * f2[None, :]  # products of 1, 2^-64, 2^-128: exact powers of two


def _unlift(outs, lift, coefs, xp):
    """Outputs computed on lifted rows times their factors (exact: powers of two, up to underflow of the
    product, which the bounds' absolute term c₀ ≥ 5η covers: fl(B·F) + c₀ ≥ F·B + η)."""
    if lift is None:
        return outs
    out = {}
    for g, v in outs.items():
        if v is None:
            out[g] = None
        elif g.endswith("_bound"):
            out[g] = v * lift + coefs[g[:-6]].c0
        else:
            out[g] = v * lift
    return out


def _result(outs, coefs):
    if coefs is None:
        return Kernel(outs.get("nngp"), outs.get("ntk"))
    return BoundedKernel(outs.get("nngp"), outs.get("ntk"), outs.get("nngp_bound"), outs.get("ntk_bound"))


def _bound_coefficients(error_bound, closed, method, bs, act, d, Ws, depth, wanted, x, xp):
    """None (no bound asked) or {output: coefficients} of the proven bound (:mod:`._rounding`); refuses what
    the analysis does not cover, naming ``error_bound``."""
    if error_bound is False:
        return None
    if error_bound is not True:
        raise InvalidParameterError(f"The 'error_bound' parameter of fc must be True or False. Got {error_bound!r} "
                                    "instead.")
    if closed not in ("relu", "erf") or method != "closed":
        raise NotImplementedError(
            f"The 'error_bound' parameter of fc: a proven bound is available for ReLU and erf (closed forms, with "
            f"or without biases) only, not for activation {getattr(act, 'name', act)!r} by method={method!r}; "
            "use error_bound=False (the stated accuracy ntkref.testing.certified_bound applies) or check against "
            "ntkref.enclosures.fc.")
    if array_api_compat.is_jax_namespace(xp):
        raise NotImplementedError(
            "The 'error_bound' parameter of fc: no proven bound on JAX arrays (XLA multiplies float32 in TF32 on "
            "GPUs by default and has its own atan/atan2/sin/cos of undocumented accuracy, outside the analysis' "
            "assumptions, ntkref/kernels/_rounding.py); pass NumPy, CuPy or PyTorch arrays, or check against "
            "ntkref.enclosures.fc.")
    dtype_name = "float32" if x.dtype == xp.float32 else "float64"
    if closed == "erf":  # ntkref/kernels/_rounding_erf.py: per-entry running bounds
        st = _rounding_erf.erf_setup(d, Ws, bs, depth, dtype_name)
        return {"_erf": st, "nngp": st, "ntk": st}
    if any(b != 0.0 for b in bs):  # ReLU with biases: ntkref/kernels/_rounding_bias.py
        return {"_bias": _rounding_bias.bias_coefficients(d, Ws, bs, depth, dtype_name, wanted)}
    return _rounding.relu_coefficients(d, Ws, depth, dtype_name, wanted)


def _bias_rows(coefs, n1_norm, n2_norm, symmetric, d, Ws, bs, xp):
    """The per-row scales P̃ (σ̃ for the NNGP, τ̃ for the NTK) and regular-row masks of the biased bound."""
    floor = 2.0 ** -1000 if n1_norm.dtype == xp.float64 else 2.0 ** -120
    r1 = _rounding_bias.row_scales(n1_norm, d, Ws, bs, xp, floor)
    r2 = r1 if symmetric else _rounding_bias.row_scales(n2_norm, d, Ws, bs, xp, floor)
    irr = bool(xp.any(~r1[2])) or bool(xp.any(~r2[2]))
    coefs["_rows"] = (r1, r2, irr)

def _check_fc_memory(n1, n2, d, n_out, x, block_size, n_points, closed, symmetric, n_jobs, fused, xp):
    """The memory guard of :func:`fc`: the outputs (twice for JAX, which concatenates) plus the blocks'
    working memory (about 12·block² floats per worker, ×(1 + n_points/3) for quadrature; none counted for
    the fused CUDA kernel, which sizes its blocks to the free memory) against :func:`ntkref._lib.memory.available_memory`."""
    itemsize = 4 if x.dtype == xp.float32 else 8
    out_bytes = n_out * n1 * n2 * itemsize * (2 if array_api_compat.is_jax_namespace(xp) else 1)
    work = 0
    if not fused and n1 * n2 > 0:
        b1, b2 = min(block_size, n1), min(block_size, n2)
        per_block = 12 * b1 * b2 * itemsize * (1 if closed is not None else 1 + n_points // 3)
        per_block += (b1 + b2) * d * itemsize
        n_tasks = -(-n1 // block_size) * -(-n2 // block_size)
        work = per_block * n_workers(n_jobs, xp, n_tasks)
    dtype = "float32" if x.dtype == xp.float32 else "float64"
    check_bytes(
        out_bytes + work,
        f"The 'x1'/'x2' parameters ({n1} × {n2} rows, {n_out} output(s) in {dtype})",
        "fc",
        xp,
        x,
        "ways out: dtype='float32' (half the memory), get='ntk' only, a smaller block_size or n_jobs, or "
        "smaller inputs: compute the Gram in row blocks fc(x1[i:j], x2) and write each block out "
        "(e.g. with the CLI's --out)",
    )


def _block_values(n1_norm, u1, n2_norm, u2, i0, i1, j0, j1, d, Ws, bs, act, closed, n_points, wanted,
                  unbiased_relu, xp, coefs=None):
    want_ntk = "ntk" in wanted
    if coefs is not None and "_erf" in coefs:  # the proven erf bound (_rounding_erf)
        nngp, ntk, bn, bt = _rounding_erf.erf_block(n1_norm[i0:i1], u1[i0:i1, :], n2_norm[j0:j1], u2[j0:j1, :], d,
                                                    Ws, bs, want_ntk, xp, coefs["_erf"],
                                                    diag=n1_norm is n2_norm and i0 == j0 and i1 == j1)
        (reg1, ps1, pt1), (reg2, ps2, pt2) = coefs["_rows"]
        vals = {"nngp": nngp, "ntk": ntk}
        bounds = {"nngp": (bn, ps1, ps2), "ntk": (bt, pt1, pt2)}
        for g in wanted:
            B, P1, P2 = bounds[g]
            vals[f"{g}_bound"] = _rounding_erf.apply_irregular(vals[g], B, P1[i0:i1], P2[j0:j1], reg1[i0:i1],
                                                               reg2[j0:j1], coefs["_erf"], xp)
        return vals
    if coefs is not None and "_bias" in coefs:  # the proven bound of biased ReLU (_rounding_bias)
        nngp, ntk = fc_block(n1_norm[i0:i1], u1[i0:i1, :], n2_norm[j0:j1], u2[j0:j1, :], d, Ws, bs, act, closed,
                             n_points, want_ntk, xp)
        vals = {"nngp": nngp, "ntk": ntk}
        (sig1, tau1, reg1), (sig2, tau2, reg2), irr = coefs["_rows"]
        mask = ~(reg1[i0:i1][:, None] & reg2[j0:j1][None, :]) if irr else None
        for g in wanted:
            P1, P2 = (sig1, sig2) if g == "nngp" else (tau1, tau2)
            vals[f"{g}_bound"] = _rounding_bias.apply_bias(coefs["_bias"][g], vals[g], P1[i0:i1], P2[j0:j1],
                                                           mask, xp)
        return vals
    if coefs is not None:  # the proven bound (ReLU without biases; _bound_coefficients checked it)
        b1, b2 = n1_norm[i0:i1], n2_norm[j0:j1]
        nngp, ntk, (S, a1, a2) = relu_unbiased_block(b1, u1[i0:i1, :], b2, u2[j0:j1, :], d, Ws, "nngp" in wanted,
                                                     want_ntk, xp, with_scales=True)
        vals = {"nngp": nngp, "ntk": ntk}
        for g in wanted:
            vals[f"{g}_bound"] = _rounding.apply(coefs[g], S, a1, a2, xp)
        return vals
    if unbiased_relu:
        nngp, ntk = relu_unbiased_block(
            n1_norm[i0:i1], u1[i0:i1, :], n2_norm[j0:j1], u2[j0:j1, :], d, Ws, "nngp" in wanted, want_ntk, xp
        )
    else:
        nngp, ntk = fc_block(
            n1_norm[i0:i1], u1[i0:i1, :], n2_norm[j0:j1], u2[j0:j1, :], d, Ws, bs, act, closed, n_points,
            want_ntk, xp,
        )
    return {"nngp": nngp, "ntk": ntk}


def _fc_assembled(n1_norm, u1, n2_norm, u2, d, Ws, bs, act, closed, n_points, wanted, symmetric, unbiased_relu,
                  block_size, xp, coefs=None):
    """:func:`fc`'s outputs (a dict) for namespaces without item assignment (JAX): the same blocks, joined by
    concatenation."""
    n1, n2 = u1.shape[0], u2.shape[0]
    starts1 = list(range(0, n1, block_size))
    starts2 = list(range(0, n2, block_size))
    blocks = {}
    for i0 in starts1:
        for j0 in starts2:
            if symmetric and j0 < i0:
                continue
            vals = _block_values(n1_norm, u1, n2_norm, u2, i0, min(i0 + block_size, n1), j0,
                                 min(j0 + block_size, n2), d, Ws, bs, act, closed, n_points, wanted,
                                 unbiased_relu, xp, coefs)
            for v in vals.values():
                check_finite_kernel(v, "fc", xp)
            if symmetric and i0 == j0:  # exact symmetry: mirror the upper triangle
                vals = {g: (None if v is None else xp.triu(v) + xp.matrix_transpose(xp.triu(v, k=1)))
                        for g, v in vals.items()}
            blocks[i0, j0] = vals
    outs = {}
    for g in (wanted if coefs is None else wanted + tuple(f"{g}_bound" for g in wanted)):
        if not starts1 or not starts2:  # an empty Gram
            outs[g] = xp.zeros((n1, n2), dtype=u1.dtype, device=array_api_compat.device(u1))
            continue
        rows = []
        for i0 in starts1:
            row = [blocks[i0, j0][g] if (i0, j0) in blocks else xp.matrix_transpose(blocks[j0, i0][g])
                   for j0 in starts2]
            rows.append(xp.concat(row, axis=1) if len(row) > 1 else row[0])
        outs[g] = xp.concat(rows, axis=0) if len(rows) > 1 else rows[0]
    return outs


def n_workers(n_jobs, xp, n_tasks, caller="fc"):
    """Worker threads for ``n_tasks`` blocks: ``n_jobs`` (default: the CPUs this process may use), 1 off NumPy."""
    if n_jobs is not None:
        n_jobs = check_int(n_jobs, "n_jobs", caller=caller, low=1)
    if not array_api_compat.is_numpy_namespace(xp) or n_tasks < 2:
        return 1
    if n_jobs is None:
        import os

        try:
            n_jobs = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            n_jobs = os.cpu_count() or 1
    return max(1, min(n_jobs, n_tasks))


def fc_diagonal(x, *, depth=1, activation="relu", W_std=1.0, b_std=0.0, quadrature_points=128, dtype=None,
                error_bound=False):
    """Diagonal Σ(x, x) and Θ(x, x) of :func:`fc` in O(n·(d + depth)).

    The angle is exactly 0 in every layer, so for ReLU the closed form is
    Σ⁽ʰ⁾ = W_h²Σ⁽ʰ⁻¹⁾/2 + b_h², Θ⁽ʰ⁾ = Σ⁽ʰ⁾ + W_h²Θ⁽ʰ⁻¹⁾/2.
    ``error_bound=True`` is refused (NotImplementedError naming the parameter): the proven bounds of the
    diagonal are those of ``fc(x, error_bound=True)`` (its diagonal entries, the case x = x′).

    Returns
    -------
    Kernel
        ``.nngp`` and ``.ntk`` of shape (n,).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.kernels import fc, fc_diagonal
    >>> x = np.random.default_rng(0).standard_normal((4, 3))
    >>> k = fc_diagonal(x, depth=2)
    >>> bool(np.abs(k.ntk - np.diag(fc(x, depth=2).ntk)).max() < 1e-13)
    True
    >>> q = (x * x).sum(axis=1) / 3           # ReLU, W_std = 1: Θ⁽ᴸ⁾(x, x) = (L + 1)·q/2ᴸ, q = ‖x‖²/d
    >>> np.round(k.ntk / (3 * q / 4), 12).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    _rounding.refuse_error_bound(error_bound, "fc_diagonal", "the diagonal recursion (the diagonal of "
                                 "fc(x, error_bound=True) carries the proven bound)")
    xp, x, _, depth, act, closed, Ws, bs = prepare(x, None, depth, activation, W_std, b_std, dtype, "fc_diagonal",
                                                    x1_name="x")
    n_points = check_int(quadrature_points, "quadrature_points", caller="fc_diagonal", low=2, high=256)
    xn, _ = row_norms(x, xp)
    check_input_scale(xn, "x", "fc_diagonal", Ws[0] / math.sqrt(x.shape[1]), xp)
    if closed is None:
        check_quadrature_resolution(xn, "x", x.shape[1], Ws, bs, act, n_points, xp)
    nngp, ntk = diag_recursion(xn, x.shape[1], Ws, bs, act, closed, n_points, xp)
    check_finite_kernel(nngp, "fc_diagonal", xp, "'x', 'W_std' and 'b_std'")
    check_finite_kernel(ntk, "fc_diagonal", xp, "'x', 'W_std' and 'b_std'")
    return Kernel(nngp, ntk)
