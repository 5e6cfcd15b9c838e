r"""Closed-form kernels of the seeds, and the seeds' conventions as presets.

- Seed 000 eq. (63) (two-layer ReLU, W_std = 1, NTK parameterisation, d the
  input dimension):

  .. math:: Θ(x, x') = \frac{‖x‖‖x'‖}{2πd} h(u),\quad h(u) = 2u(π − \arccos u) + \sqrt{1 − u^2},

  u = cos∠(x, x').  It equals ``fc(depth=1, W_std=1).ntk`` (tested).
- Seed 002 §2 / App. B.1 (f = Σⱼ wⱼ[uⱼᵀx]₊, w ~ N(0, r_w²), u ~ N(0, r_u² I),
  no 1/√m): K = (r_w²/2)·K₁ + (r_u²/2)·(K₁ + K₂) with
  K₁ = xᵀx'(1 − θ/π) and K₂ = ‖x‖‖x'‖ sin θ / π (as printed there).
- Seed 004 eqs. (6)–(8) (Arora et al., c_σ = 2 for ReLU, Σ⁽⁰⁾ = xᵀx'):
  Θ⁽ᴸ⁾ = Σ_{h=1}^{L+1} Σ⁽ʰ⁻¹⁾ Π_{h'=h}^{L+1} Σ̇⁽ʰ'⁾, Σ̇⁽ᴸ⁺¹⁾ = 1.
  Θ_Arora = d·Θ_NT(W_std = 1 first layer, √2 after) = d·2ᴸ·Θ_NT(W_std = 1).

All use the stable angle of :mod:`._layers` (accurate for near-parallel and
antiparallel rows); Θ(x, 0) = 0.

Memory: they build the whole (n1, n2) Gram and its temporaries at once — at most 10 (``two_layer_relu_ntk``),
12 (``wei_k1_k2``, ``wei_kernel``) and 10 + 3·depth (``arora_ntk``) arrays of n1·n2 entries (measured with
tracemalloc, tested) — and ask the memory guard (:mod:`ntkref._lib.memory`) first.  Dask arrays are refused
naming the parameter and the equivalent ``kernels.fc`` call, which runs on Dask (lazily, one task per
block): the seed-000 NTK is ``fc(depth=1, W_std=1).ntk``, Arora's is d·``fc(W_std=[1, √2, …, √2]).ntk``,
Wei's K₁ = 2d(Θ − Σ) and K₂ = 2d(2Σ − Θ) with (Σ, Θ) = ``fc(depth=1, W_std=1)`` (tested).
"""
from __future__ import annotations

import math

import array_api_compat

from .._lib.backend import namespace
from .._lib.memory import check_memory
from .._lib.validation import InvalidParameterError, check_int, check_real
from ._fc import prepare
from ._layers import check_finite_kernel, check_input_scale, input_angles, relu_layer, row_norms
from ._rounding import refuse_error_bound

__all__ = ["two_layer_relu_ntk", "relu_h", "wei_kernel", "wei_k1_k2", "arora_ntk"]

_PI = math.pi


#: the kernels.fc call that computes each function's kernel on Dask arrays (message of the refusal)
_ON_DASK = {
    "two_layer_relu_ntk": "kernels.fc(x1, x2, depth=1, W_std=1.0, get='ntk').ntk is the same kernel",
    "wei_k1_k2": "with k = kernels.fc(x1, x2, depth=1, W_std=1.0), K1 = 2d·(k.ntk − k.nngp) and "
                 "K2 = 2d·(2·k.nngp − k.ntk) (d the number of features)",
    "wei_kernel": "with k = kernels.fc(x1, x2, depth=1, W_std=1.0), K = d·(r_w²·(k.ntk − k.nngp) + r_u²·k.nngp) "
                  "(d the number of features)",
    "arora_ntk": "d·kernels.fc(x1, x2, depth=depth, W_std=[1, √2, …, √2] (depth + 1 values), get='ntk').ntk is "
                 "the same kernel (d the number of features)",
}


def _refuse_dask(x1, x2, caller):
    """These closed forms build the whole Gram in one process: a Dask input is refused, naming the
    parameter and the kernels.fc call that runs on Dask (the core imports no Dask; array_api_compat only
    looks at the type)."""
    for name, x in (("x1", x1), ("x2", x2)):
        if x is not None and array_api_compat.is_dask_array(x):
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller} is a Dask array; {caller} builds the whole Gram in one "
                f"process and does not run on Dask arrays. Ways out: {_ON_DASK[caller]}, and kernels.fc runs "
                f"on Dask arrays (lazily, one task per block); or pass NumPy arrays ({name}.compute())."
            )


def _pair_setup(x1, x2, caller, per_feature=False, temporaries=10):
    """Rows' norms and angles; rows whose scale ‖x‖ (‖x‖/√d if ``per_feature``) squared would overflow are
    refused (InvalidParameterError naming x1/x2 and the largest admissible norm), as is a Gram whose
    ``temporaries`` arrays of n1·n2 entries would not fit in memory (before any is allocated)."""
    _refuse_dask(x1, x2, caller)
    xp, x1, x2, *_ = prepare(x1, x2, 1, "relu", 1.0, 0.0, None, caller)
    size1 = x1.shape[0]
    size2 = size1 if x2 is None else x2.shape[0]
    check_memory(temporaries * size1 * size2,
                 f"The ({size1}, {size2}) Gram of 'x1'/'x2' (with its temporaries)", caller, x1,
                 ways_out="use float32 inputs, or fewer rows per call: compute the Gram in row blocks "
                          f"{caller}(x1[i:j], x2) and write each block out")
    factor, what = (1 / math.sqrt(x1.shape[1]), "‖x‖/√d") if per_feature else (1.0, "‖x‖")
    n1, u1 = row_norms(x1, xp)
    check_input_scale(n1, "x1", caller, factor, xp, what)
    if x2 is None:
        n2, u2 = n1, u1
    else:
        n2, u2 = row_norms(x2, xp)
        check_input_scale(n2, "x2", caller, factor, xp, what)
    pair = input_angles(u1, u2, xp)
    return xp, x1, x2, n1, n2, pair


def _symmetrize(K, symmetric, xp):
    if not symmetric:
        return K
    return xp.triu(K) + xp.matrix_transpose(xp.triu(K, k=1))


def relu_h(u):
    """h(u) = 2u(π − arccos u) + √(1 − u²) of seed 000 eq. (63), for u ∈ [−1, 1].

    h is increasing on [u*, 1] and decreasing on [−1, u*] with
    u* ≈ −0.79410, h(u*) ≈ −0.4297378; h(−1) = 0, h(1) = 2π.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.kernels import relu_h
    >>> np.round(relu_h(np.array([-1.0, 0.0, 1.0])), 6).tolist()     # h(−1) = 0, h(0) = 1, h(1) = 2π
    [0.0, 1.0, 6.283185]
    >>> print(f"{float(relu_h(np.array(-0.79410))):.6f}")             # near the minimum h(u*)
    -0.429738
    """
    from .._lib.backend import namespace
    from .._lib.validation import check_array, InvalidParameterError

    xp = namespace(u)
    u = check_array(u, "u", caller="relu_h", xp=xp)
    if not bool(xp.all(xp.abs(u) <= 1)):
        raise InvalidParameterError("The 'u' parameter of relu_h must lie in [-1, 1].")
    theta = xp.acos(u)
    return 2 * u * (_PI - theta) + xp.sqrt((1 - u) * (1 + u))


def two_layer_relu_ntk(x1, x2=None, *, error_bound=False):
    """Seed 000 eq. (63): Θ(x, x') = ‖x‖‖x'‖·h(u)/(2πd), shape (n1, n2).

    Written as ‖x‖‖x'‖(2 cos θ (π − θ) + sin θ)/(2πd) with the stable angle.
    Equals ``fc(x1, x2, depth=1, W_std=1.0).ntk`` (neural-tangents' two-layer
    ReLU NTK without bias).  float64 accuracy: 1e-13·√(Θ(x,x)Θ(x',x')) per entry.
    ``error_bound=True`` is refused (NotImplementedError naming the parameter): the proven bound of this
    kernel is ``fc(x1, x2, depth=1, error_bound=True).ntk_bound``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.kernels import fc, two_layer_relu_ntk
    >>> x = np.random.default_rng(0).standard_normal((4, 3))
    >>> bool(np.abs(two_layer_relu_ntk(x) - fc(x, depth=1).ntk).max() < 1e-13)
    True
    >>> K = two_layer_relu_ntk(np.eye(3))     # h(1) = 2π, h(0) = 1: Θ(e₁, e₁) = 1/d, Θ(e₁, e₂) = 1/(2πd)
    >>> print(f"{K[0, 0]:.6f} {K[0, 1] * 2 * np.pi * 3:.6f}")
    0.333333 1.000000
    """
    refuse_error_bound(error_bound, "two_layer_relu_ntk", "the two-layer closed form (use fc(x, depth=1, "
                       "error_bound=True): the same kernel, with its proven bound)")
    xp, x1, x2, n1, n2, pair = _pair_setup(x1, x2, "two_layer_relu_ntk", per_feature=True, temporaries=10)
    d = x1.shape[1]
    sin_t = xp.sqrt(xp.clip(pair.omr * pair.opr, 0.0, None))
    theta = xp.atan2(sin_t, pair.rho)
    h = 2 * pair.rho * (_PI - theta) + sin_t
    K = (n1[:, None] / (2 * _PI * math.sqrt(d))) * (n2[None, :] / math.sqrt(d)) * h
    return _symmetrize(K, x2 is None, xp)


def wei_k1_k2(x1, x2=None, *, error_bound=False):
    """Seed 002's K₁ = xᵀx'(1 − θ/π) and K₂ = ‖x‖‖x'‖ sin θ/π (App. B.1), shapes (n1, n2).

    ``error_bound=True`` is refused (NotImplementedError naming the parameter: no proven bound yet).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.kernels import wei_k1_k2
    >>> K1, K2 = wei_k1_k2(np.array([[1.0, 0.0], [0.0, 2.0]]))     # θ = 0 on the diagonal, π/2 off it
    >>> np.round(K1, 12).tolist(), np.round(K2 * np.pi, 12).tolist()
    ([[1.0, 0.0], [0.0, 4.0]], [[0.0, 2.0], [2.0, 0.0]])
    """
    refuse_error_bound(error_bound, "wei_k1_k2", "K₁, K₂")
    return _wei_k1_k2(x1, x2, "wei_k1_k2")


def _wei_k1_k2(x1, x2, caller):
    xp, x1, x2, n1, n2, pair = _pair_setup(x1, x2, caller, temporaries=12)
    sin_t = xp.sqrt(xp.clip(pair.omr * pair.opr, 0.0, None))
    theta = xp.atan2(sin_t, pair.rho)
    norms = n1[:, None] * n2[None, :]
    K1 = norms * pair.rho * (1 - theta / _PI)
    K2 = norms * sin_t / _PI
    sym = x2 is None
    return _symmetrize(K1, sym, xp), _symmetrize(K2, sym, xp)


def wei_kernel(x1, x2=None, *, r_w=1.0, r_u=1.0, error_bound=False):
    """Seed 002's two-layer ReLU NTK: K = (r_w²/2)K₁ + (r_u²/2)(K₁ + K₂).

    For f(x) = Σⱼ wⱼ[uⱼᵀx]₊ with wⱼ ~ N(0, r_w²), uⱼ ~ N(0, r_u² I) and no
    1/√m, K/m is the expected tangent kernel per neuron:
    r_w²·E[[uᵀx]₊[uᵀx']₊]/r_u²·… — see the tests for the Monte Carlo check
    and the identity with :func:`fc` (K = r_w²·d·(Θ − Σ) + r_u²·d·Σ at W_std = 1).
    ``error_bound=True`` is refused (NotImplementedError naming the parameter: no proven bound yet).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.kernels import fc, wei_kernel
    >>> x = np.random.default_rng(0).standard_normal((4, 3))
    >>> K = wei_kernel(x, r_w=2.0, r_u=0.5)
    >>> k = fc(x, depth=1)                    # K = r_w²·d·(Θ − Σ) + r_u²·d·Σ, d = 3
    >>> bool(np.allclose(K, 4.0 * 3 * (k.ntk - k.nngp) + 0.25 * 3 * k.nngp, rtol=1e-12, atol=1e-12))
    True
    """
    refuse_error_bound(error_bound, "wei_kernel", "seed 002's kernel")
    r_w = check_real(r_w, "r_w", caller="wei_kernel", low=0.0)
    r_u = check_real(r_u, "r_u", caller="wei_kernel", low=0.0)
    K1, K2 = _wei_k1_k2(x1, x2, "wei_kernel")
    K = (r_w * r_w / 2) * K1 + (r_u * r_u / 2) * (K1 + K2)
    check_finite_kernel(K, "wei_kernel", namespace(K), "'x1'/'x2', 'r_w' and 'r_u'")
    return K


def arora_ntk(x1, x2=None, *, depth=1, error_bound=False):
    """Seed 004 eq. (8) for ReLU with c_σ = 2 and Σ⁽⁰⁾ = xᵀx' (no 1/d), ``depth`` = L ≥ 0 hidden layers.

    Θ⁽ᴸ⁾(x, x') = Σ_{h=1}^{L+1} Σ⁽ʰ⁻¹⁾(x, x') Π_{h'=h}^{L+1} Σ̇⁽ʰ'⁾(x, x'), with
    Σ⁽ʰ⁾ = 2E[σ(u)σ(v)], Σ̇⁽ʰ⁾ = 2E[σ'(u)σ'(v)], Σ̇⁽ᴸ⁺¹⁾ = 1 — evaluated in this
    sum-of-products form (not the recursion of :func:`fc`), so the identity
    Θ_Arora = d·Θ_NT(W_std = [1, √2, …, √2]) is a real test of both.

    Rows with ‖x‖ > √(largest float)/4 are refused (InvalidParameterError naming
    x1/x2 and the bound), as is a result that overflows.  ``depth=0`` is the linear model: Θ = Σ⁽⁰⁾ = xᵀx'.
    ``error_bound=True`` is refused (NotImplementedError naming the parameter): :func:`fc` with
    ``W_std=[1, √2, …, √2]`` and ``error_bound=True`` gives this kernel/(d·2ᴸ) with its proven bound.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.kernels import arora_ntk, fc
    >>> x = np.random.default_rng(0).standard_normal((4, 3))
    >>> bool(np.allclose(arora_ntk(x, depth=0), x @ x.T, rtol=1e-13, atol=1e-13))              # Σ⁽⁰⁾ = xᵀx′
    True
    >>> bool(np.allclose(arora_ntk(x, depth=2), 3 * 2**2 * fc(x, depth=2).ntk, rtol=1e-12, atol=1e-12))  # d·2ᴸ·Θ_NT
    True
    """
    refuse_error_bound(error_bound, "arora_ntk", "the sum-of-products form (fc(..., error_bound=True) with "
                       "W_std = [1, √2, …, √2] is d·2^-L times this kernel, with its proven bound)")
    depth = check_int(depth, "depth", caller="arora_ntk", low=0)
    xp, x1, x2, n1, n2, pair = _pair_setup(x1, x2, "arora_ntk", temporaries=10 + 3 * depth)
    s1, s2 = n1[:, None], n2[None, :]  # √Σ⁽⁰⁾(x, x) = ‖x‖
    sigmas = [(s1 * s2) * pair.rho]
    dots = []
    for _ in range(depth):
        e_ff, e_dd, pair, (a1, a2) = relu_layer(pair, s1, s2, xp)
        sigmas.append(2 * e_ff)
        dots.append(2 * e_dd)
        s1, s2 = a1 * math.sqrt(2.0), a2 * math.sqrt(2.0)  # c_σ E[σ(u)²] = q: the scale is preserved
    theta = xp.zeros_like(sigmas[0])
    for h in range(1, depth + 2):
        term = sigmas[h - 1]
        for hp in range(h, depth + 1):  # Σ̇⁽ᴸ⁺¹⁾ = 1 is omitted
            term = term * dots[hp - 1]
        theta = theta + term
    check_finite_kernel(theta, "arora_ntk", xp, "'x1'/'x2'")
    return _symmetrize(theta, x2 is None, xp)
