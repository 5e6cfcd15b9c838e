r"""Bias-free ReLU networks, positively homogeneous in their parameters (seed 002).

Seed 002 (Wei, Lee, Liu, Ma, *Regularization Matters*) works with networks
**without biases and without the 1/√m factor** of the NTK parameterisation:

- eq. (2.2) / §2, two layers: :math:`f(x;Θ)=\sum_{j=1}^m w_j[u_j^\top x]_+`, Θ = (U, w);
- eq. (4.2), depth q: :math:`f(x;Θ)=W_q φ(W_{q-1} φ(\cdots φ(W_1 x)\cdots))`, φ = ReLU.

With one sample a row (``x`` of shape (n, d)) the layers act from the right,
:math:`h_0 = x,\ z_ℓ = h_{ℓ-1} W_ℓ,\ h_ℓ = [z_ℓ]_+`, so ``W_ℓ`` has shape
(fan_in, fan_out) — the transpose of the paper's :math:`W_ℓ ∈ \mathbb R^{m_ℓ×m_{ℓ-1}}`.
For q = 2, ``W_1`` = Uᵀ (d, m) and ``W_2`` = w (m, 1).

Because ReLU is 1-positive-homogeneous, f is q-positive-homogeneous in Θ:
f(x; cΘ) = c^q f(x; Θ) for c > 0 (§4.1).  The norm is the Frobenius norm
over all layers, :math:`\|Θ\|_F^2=\sum_ℓ\|W_ℓ\|_F^2` (§4.1, r = 2 there).

**ReLU derivative at 0.**  The paper's gradient is
:math:`∇_θ f = (w\,\mathbb 1(x^\top u ≥ 0)\,x,\ [x^\top u]_+)` (§2), i.e. the
derivative 𝟙(z ≥ 0) — unlike :class:`ntkref.nets.FullyConnected` (𝟙(z > 0)).
Both are elements of the Clarke subdifferential; they differ only where a
pre-activation is exactly 0, which happens on seed 002's distribution 𝒟
(e.g. u = ±e₁ on class −1 points).  Away from such ties the backward pass is
the exact gradient (tested against central finite differences).

Also here (all exact identities, tested):

- :func:`balanced_two_layer` — Prop. B.10's conversion of an ℓ1-SVM measure
  μ = Σ_k μ_k δ_{ū_k} into a two-layer net with u_k = √|μ_k| ū_k,
  w_k = sign(μ_k)√|μ_k|, for which f = ⟨μ, φ_relu(x)⟩ and ‖Θ‖_F² = 2‖μ‖₁;
  :func:`two_layer_measure` is the inverse map μ = Σ_j w_j‖u_j‖ δ_{ū_j}
  (‖Θ‖_F² ≥ 2‖μ‖₁ by AM–GM, equality iff |w_j| = ‖u_j‖).  Seed 002's footnote
  6 says "every unit-norm parameter Θ corresponds to a μ with ‖μ‖ = 2"
  *[erratum]*: it is ‖μ‖₁ ≤ 1/2 (= 1/2 for balanced nets), whence the factor
  ½ in γ*,m = γ_ℓ1/2.
- :func:`zero_pad` — Thm 4.3's embedding of a narrower architecture into a
  wider one (new units with zero weights): same function, same norm.
- :func:`rebalance` — Prop. D.1's W̃_j = (Π_k‖W_k‖_F)^{1/q} W_j / (‖W_j‖_F‖Θ‖_F)
  *[erratum: the seed prints the exponent 1/k and the bound "≤ 1/k"; it is
  1/q]*: all layers get the same norm ≤ 1/√q and f(·; Θ̃) = f(·; Θ/‖Θ‖_F).
- :func:`width4_net` — the width-4 network of §2 / proof of Thm 2.1 (B.2),
  f(x) = [x₁]₊ + [−x₁]₊ − [x₂]₊ − [−x₂]₊ = |x₁| − |x₂|, with y·f = 1 on every
  point of 𝒟 and ‖Θ‖_F² = 8 (normalized margin 1/8).
"""
from __future__ import annotations

import math
import numbers

import numpy as np  # host-side seeded draws in init() only

from .._lib.backend import device_of, namespace
from .._lib.validation import InvalidParameterError, check_array, check_int, check_real
from .._lib.memory import check_memory
from ._common import check_activation_memory, check_parameter_memory, host_draw, init_target, input_on

__all__ = [
    "HomogeneousNet",
    "balanced_two_layer",
    "rebalance",
    "two_layer_measure",
    "width4_net",
    "zero_pad",
]


class HomogeneousNet:
    r"""Bias-free depth-q ReLU network f(x) = W_q[W_{q−1}…[W_1 x]₊…]₊ (seed 002 eqs. (2.2), (4.2)).

    Parameters
    ----------
    d_in : int ≥ 1
        Input dimension d.
    width : int or sequence of q − 1 ints
        Hidden widths m_1, …, m_{q−1} (one int: all hidden layers alike).
    depth : int ≥ 1
        q, the number of weight layers (q = 2: the two-layer net of §2;
        q = 1: the linear model x ↦ x W_1, 1-homogeneous).
    n_outputs : int ≥ 1
        Output dimension (l for the multi-class loss (C.1)).

    Notes
    -----
    ``params`` is a list of q weight matrices, ``params[ℓ]`` of shape
    (fan_in, fan_out); no biases and no 1/√fan_in factor, so that
    f(x; cΘ) = c^q f(x; Θ) for every c > 0 (attribute ``homogeneity`` = q).
    The ReLU derivative at 0 is taken as 1 (𝟙(z ≥ 0), the paper's convention).
    All arithmetic is in the parameters' namespace and dtype; float64 results
    are exact to rounding (a few ulps × depth), float32 to ~1e-6 relative.
    """

    def __init__(self, d_in, width, depth=2, *, n_outputs=1):
        caller = "HomogeneousNet"
        self.d_in = check_int(d_in, "d_in", caller=caller, low=1)
        self.depth = check_int(depth, "depth", caller=caller, low=1)
        self.n_outputs = check_int(n_outputs, "n_outputs", caller=caller, low=1)
        n_hidden = self.depth - 1
        if isinstance(width, numbers.Integral) and not isinstance(width, bool):
            widths = [width] * n_hidden
        else:
            try:
                widths = list(width)
            except TypeError:
                raise InvalidParameterError(
                    f"The 'width' parameter of {caller} must be an int or {n_hidden} ints. Got {width!r}."
                ) from None
            if len(widths) != n_hidden:
                raise InvalidParameterError(
                    f"The 'width' parameter of {caller} must be an int or {n_hidden} ints (depth − 1). Got {width!r}."
                )
        self.widths = tuple(check_int(w, "width", caller=caller, low=1) for w in widths)
        self.fan_in = (self.d_in,) + self.widths
        self.fan_out = self.widths + (self.n_outputs,)
        self.shapes = tuple(zip(self.fan_in, self.fan_out))

    @property
    def homogeneity(self):
        """q: f(x; cΘ) = c^q f(x; Θ) for c > 0."""
        return self.depth

    @property
    def n_params(self):
        return sum(i * o for i, o in self.shapes)

    def __repr__(self):
        return (f"HomogeneousNet(d_in={self.d_in}, width={list(self.widths)}, depth={self.depth}, "
                f"n_outputs={self.n_outputs})")

    # ------------------------------------------------------------------ init
    def init(self, seed, *, scale=1.0, xp=None, dtype=None, device=None):
        """Draw every weight i.i.d. N(0, scale²) with ``numpy.random.default_rng(seed)``.

        The draw is made on the host in float64, layer by layer in order, each
        matrix in row-major order (reproducible across backends), then moved to
        ``xp`` (default: the ``NTKREF_BACKEND`` namespace) on ``device`` (default:
        ``NTKREF_DEVICE`` for the default namespace) in ``dtype`` (real floating,
        default float64).  Returns a list of q matrices (fan_in, fan_out).
        """
        scale = check_real(scale, "scale", caller="HomogeneousNet.init", low=0.0)
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        xp, dtype, device = init_target(xp, dtype, device, "HomogeneousNet.init")
        check_parameter_memory(self.n_params, max(i * o for i, o in self.shapes), xp, dtype, device,
                               "HomogeneousNet.init", f"'d_in' = {self.d_in} and 'width' = {list(self.widths)}")
        return [host_draw(rng, shape, xp, dtype, device, scale) for shape in self.shapes]

    # ---------------------------------------------------------------- checks
    def _check_params(self, params, caller, name="params"):
        if not isinstance(params, (list, tuple)) or len(params) != self.depth:
            got = len(params) if isinstance(params, (list, tuple)) else type(params).__name__
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller} must be a list of {self.depth} weight matrices. Got {got}."
            )
        xp = namespace(*params)
        out = []
        for ell, (W, shape) in enumerate(zip(params, self.shapes)):
            W = check_array(W, f"{name}[{ell}]", caller=caller, ndim=2, xp=xp,
                            dtype=out[0].dtype if out else None)
            if tuple(W.shape) != shape:
                raise InvalidParameterError(
                    f"The '{name}[{ell}]' parameter of {caller} must have shape {shape}; got {tuple(W.shape)}."
                )
            out.append(W)
        return xp, out

    def _check(self, params, x, caller, backward=True):
        xp, params = self._check_params(params, caller)
        x = check_array(input_on(x, params[0]), "x", caller=caller, ndim=2, xp=xp, dtype=params[0].dtype)
        if x.shape[1] != self.d_in:
            raise InvalidParameterError(
                f"The 'x' parameter of {caller} has {x.shape[1]} features; the network expects d_in = {self.d_in}."
            )
        # h (fan-in), z and relu's temporary (fan-out) per layer, for every row; backward: δ and vjp's gradient
        n_back = x.shape[0] * sum(self.fan_out) + self.n_params if backward else 0
        check_activation_memory(x.shape[0] * (sum(self.fan_in) + 2 * sum(self.fan_out)) + n_back, x.shape[0], caller, x,
                                f"'width' = {list(self.widths)}")
        return xp, params, x

    # --------------------------------------------------------------- forward
    def _forward(self, params, x, xp):
        hs, zs = [x], []
        h = x
        for ell, W in enumerate(params):
            z = h @ W
            zs.append(z)
            if ell < self.depth - 1:
                h = xp.maximum(z, xp.zeros_like(z))
                hs.append(h)
        return hs, zs

    def apply(self, params, x):
        """Outputs f(x; Θ): shape (n,) if ``n_outputs == 1`` else (n, n_outputs)."""
        xp, params, x = self._check(params, x, "HomogeneousNet.apply", backward=False)
        _, zs = self._forward(params, x, xp)
        out = zs[-1]
        return out[:, 0] if self.n_outputs == 1 else out

    def _backward(self, params, hs, zs, top, xp):
        """δ_ℓ = ∂⟨top, f⟩/∂z_ℓ for ℓ = 1..q (list, first layer first), ReLU' = 𝟙(z ≥ 0)."""
        delta = top
        deltas = [delta]
        for ell in range(self.depth - 1, 0, -1):
            back = delta @ xp.matrix_transpose(params[ell])
            delta = back * xp.astype(zs[ell - 1] >= 0, back.dtype)
            deltas.append(delta)
        return deltas[::-1]

    def vjp(self, params, x, cotangent):
        r"""Σᵢ ⟨cᵢ, ∇_Θ f(xᵢ; Θ)⟩ as a list of matrices shaped like ``params`` (the backward pass).

        ``cotangent`` has shape (n,) for ``n_outputs == 1``, (n, n_outputs)
        otherwise.  With δ_q = c and δ_ℓ = (δ_{ℓ+1} W_{ℓ+1}ᵀ) ⊙ 𝟙(z_ℓ ≥ 0),
        the gradient of layer ℓ is h_{ℓ−1}ᵀ δ_ℓ.
        """
        caller = "HomogeneousNet.vjp"
        xp, params, x = self._check(params, x, caller)
        n = x.shape[0]
        if self.n_outputs == 1:
            c = check_array(input_on(cotangent, x), "cotangent", caller=caller, ndim=1, xp=xp, shape=(n,), dtype=x.dtype)
            c = c[:, None]
        else:
            c = check_array(input_on(cotangent, x), "cotangent", caller=caller, ndim=2, xp=xp, shape=(n, self.n_outputs),
                            dtype=x.dtype)
        hs, zs = self._forward(params, x, xp)
        deltas = self._backward(params, hs, zs, c, xp)
        return [xp.matrix_transpose(h) @ d for h, d in zip(hs, deltas)]

    def _outputs_and_pullback(self, params, x, caller="HomogeneousNet"):
        """(f, pullback): one checked forward pass and a closure c ↦ vjp(params, x, c) reusing it (for training)."""
        xp, params, x = self._check(params, x, caller)
        hs, zs = self._forward(params, x, xp)
        out = zs[-1][:, 0] if self.n_outputs == 1 else zs[-1]

        def pullback(cotangent):
            c = cotangent[:, None] if self.n_outputs == 1 else cotangent
            deltas = self._backward(params, hs, zs, c, xp)
            return [xp.matrix_transpose(h) @ d for h, d in zip(hs, deltas)]

        return out, pullback

    def jacobian(self, params, x):
        """∇_Θ f(xᵢ; Θ) for every sample, shape (n, n_params) (``n_outputs == 1`` only).

        Parameter order: W_1 row-major, then W_2, …, W_q (that of :meth:`flatten`).
        """
        caller = "HomogeneousNet.jacobian"
        if self.n_outputs != 1:
            raise InvalidParameterError(f"{caller} needs n_outputs == 1 (got {self.n_outputs}); use vjp per output.")
        xp, params, x = self._check(params, x, caller)
        n = x.shape[0]
        check_memory(2 * n * self.n_params, f"The ({n}, {self.n_params}) Jacobian of 'x'", caller, x,
                     ways_out="use vjp (no Jacobian), float32, or fewer rows of x per call")
        hs, zs = self._forward(params, x, xp)
        top = xp.ones((n, 1), dtype=x.dtype, device=device_of(x))
        deltas = self._backward(params, hs, zs, top, xp)
        return xp.concat([xp.reshape(h[:, :, None] * d[:, None, :], (n, h.shape[1] * d.shape[1])) for h, d in zip(hs, deltas)], axis=1)

    # ------------------------------------------------------------------ norm
    def norm(self, params):
        """‖Θ‖_F = (Σ_ℓ ‖W_ℓ‖_F²)^{1/2} over all layers, a 0-d array."""
        xp, params = self._check_params(params, "HomogeneousNet.norm")
        return _fro_norm(params, xp)

    def layer_norms(self, params):
        """‖W_ℓ‖_F for ℓ = 1..q, an array of shape (q,)."""
        xp, params = self._check_params(params, "HomogeneousNet.layer_norms")
        return xp.stack([_fro_norm([W], xp) for W in params])

    # ------------------------------------------------------- flat parameters
    def flatten(self, params):
        """Concatenate the layers (row-major) into one vector of length n_params."""
        xp, params = self._check_params(params, "HomogeneousNet.flatten")
        return xp.concat([xp.reshape(W, (-1,)) for W in params])

    def unflatten(self, vector):
        """Inverse of :meth:`flatten`."""
        xp = namespace(vector)
        vector = check_array(vector, "vector", caller="HomogeneousNet.unflatten", ndim=1, xp=xp,
                             shape=(self.n_params,))
        out, offset = [], 0
        for shape in self.shapes:
            size = shape[0] * shape[1]
            out.append(xp.reshape(vector[offset:offset + size], shape))
            offset += size
        return out


def _pow2_scale(arrays, xp):
    """A power of two near the largest |entry| of ``arrays`` (1 if all are zero), a 0-d array: dividing by it is
    exact and brings the entries to O(1), so that sums of squares neither overflow nor underflow."""
    big = None
    for W in arrays:
        if math.prod(W.shape):
            m = xp.max(xp.abs(W))
            big = m if big is None else xp.maximum(big, m)
    ref = arrays[0]
    if big is None:
        return xp.asarray(1.0, dtype=ref.dtype, device=device_of(ref))
    big = xp.where(big > 0, big, xp.ones_like(big))
    return xp.pow(xp.asarray(2.0, dtype=ref.dtype, device=device_of(ref)), xp.floor(xp.log2(big)))


def _fro_norm(arrays, xp):
    """(Σ‖W‖_F²)^{1/2} = s·(Σ‖W/s‖_F²)^{1/2} (s a power of two): finite for every finite input whose norm is."""
    s = _pow2_scale(arrays, xp)
    return s * xp.sqrt(sum(xp.sum((W / s) * (W / s)) for W in arrays))


# --------------------------------------------------------------------------- constructions
def _check_matrices(params, caller, xp):
    out = []
    for i, W in enumerate(params):
        out.append(check_array(W, f"params[{i}]", caller=caller, ndim=2, xp=xp, dtype=out[0].dtype if out else None))
    for i in range(1, len(out)):
        if out[i].shape[0] != out[i - 1].shape[1]:
            raise InvalidParameterError(
                f"The 'params' parameter of {caller} has inconsistent shapes: params[{i - 1}] is "
                f"{tuple(out[i - 1].shape)}, params[{i}] is {tuple(out[i].shape)}."
            )
    return out


def balanced_two_layer(directions, mu, *, width=None, drop_zeros=False):
    r"""Prop. B.10 (seed 002 App. B.4): the balanced two-layer net of a measure μ = Σ_k μ_k δ_{ū_k}.

    u_k = √|μ_k| ū_k and w_k = sign(μ_k)√|μ_k|, so that
    f(x; Θ) = Σ_k μ_k [ū_kᵀx]₊ = ⟨μ, φ_relu(x)⟩ and ‖Θ‖_F² = Σ_k (‖u_k‖² + w_k²) = 2‖μ‖₁
    (for unit ū_k).  Hence normalized margin(Θ) = min_i y_i⟨μ, φ_relu(x_i)⟩/(2‖μ‖₁):
    the ℓ1-SVM margin (B.14) halved.

    Parameters
    ----------
    directions : array (K, d)
        The directions ū_k, one per row (unit rows for the norm identity; any
        rows are accepted: then f = Σ_k μ_k[ū_kᵀx]₊ still holds and
        ‖Θ‖_F² = Σ_k|μ_k|(‖ū_k‖² + 1)).
    mu : array (K,)
        The weights μ_k.
    width : int, optional
        Pad with zero units to this width (≥ the number of units kept).
    drop_zeros : bool
        Keep only the units with μ_k ≠ 0 (the LP's support).

    Returns
    -------
    net, params : HomogeneousNet(d, m, depth=2) and [W_1 (d, m), W_2 (m, 1)].
    """
    caller = "balanced_two_layer"
    xp = namespace(directions, mu)
    U = check_array(directions, "directions", caller=caller, ndim=2, xp=xp)
    mu = check_array(input_on(mu, U), "mu", caller=caller, ndim=1, xp=xp, shape=(U.shape[0],), dtype=U.dtype)
    if drop_zeros:
        keep = xp.nonzero(mu != 0)[0]
        U = xp.take(U, keep, axis=0)
        mu = xp.take(mu, keep)
    k = U.shape[0]
    if k == 0:
        raise InvalidParameterError(f"{caller}: mu has no nonzero entry; there is no network to build.")
    root = xp.sqrt(xp.abs(mu))
    W1 = xp.matrix_transpose(U * root[:, None])
    W2 = (xp.sign(mu) * root)[:, None]
    params = [W1, W2]
    m = k
    if width is not None:
        m = check_int(width, "width", caller=caller, low=k)
        params = zero_pad(params, [m])
    return HomogeneousNet(U.shape[1], m, depth=2), params


def two_layer_measure(params):
    r"""The measure of a two-layer net: μ = Σ_j w_j‖u_j‖ δ_{ū_j} (seed 002 App. B.4).

    Returns ``(directions (m, d), mu (m,))`` with ū_j = u_j/‖u_j‖ (0 for a zero
    unit) and μ_j = w_j‖u_j‖, so that f(x; Θ) = Σ_j μ_j [ū_jᵀx]₊ and
    ‖Θ‖_F² ≥ 2‖μ‖₁ (AM–GM, equality iff |w_j| = ‖u_j‖ for all j).
    ``params`` = [W_1 (d, m), W_2 (m, 1)].
    """
    caller = "two_layer_measure"
    if not isinstance(params, (list, tuple)) or len(params) != 2:
        raise InvalidParameterError(f"The 'params' parameter of {caller} must be [W_1 (d, m), W_2 (m, 1)].")
    xp = namespace(*params)
    W1 = check_array(params[0], "params[0]", caller=caller, ndim=2, xp=xp)
    W2 = check_array(params[1], "params[1]", caller=caller, ndim=2, xp=xp, shape=(W1.shape[1], 1), dtype=W1.dtype)
    U = xp.matrix_transpose(W1)
    s = _pow2_scale([U], xp)  # ‖u_j‖ = s‖u_j/s‖: no overflow of Σu² for large finite weights
    Us = U / s
    scaled = xp.sqrt(xp.sum(Us * Us, axis=1))
    safe = xp.where(scaled > 0, scaled, xp.ones_like(scaled))
    return Us / safe[:, None], (W2[:, 0] * scaled) * s


def zero_pad(params, width):
    r"""Thm 4.3 (seed 002 §4.1): embed Θ into a wider architecture by adding zero-weight units.

    ``width`` is one int per hidden layer (or one int for all), each ≥ the
    current width.  New units have zero incoming and outgoing weights, so f and
    ‖Θ‖_F — hence the normalized margin — are unchanged: γ*,ℳ ≤ γ*,ℳ′ for ℳ ≤ ℳ′.
    Works for any depth; returns a new list of matrices.
    """
    caller = "zero_pad"
    if not isinstance(params, (list, tuple)) or len(params) < 1:
        raise InvalidParameterError(f"The 'params' parameter of {caller} must be a non-empty list of matrices.")
    xp = namespace(*params)
    params = _check_matrices(params, caller, xp)
    n_hidden = len(params) - 1
    if isinstance(width, numbers.Integral) and not isinstance(width, bool):
        widths = [width] * n_hidden
    elif isinstance(width, (list, tuple)):
        widths = list(width)
    else:
        raise InvalidParameterError(f"The 'width' parameter of {caller} must be an int or {n_hidden} ints. Got {width!r}.")
    if len(widths) != n_hidden:
        raise InvalidParameterError(f"The 'width' parameter of {caller} must be an int or {n_hidden} ints.")
    widths = [check_int(w, "width", caller=caller, low=params[i].shape[1]) for i, w in enumerate(widths)]
    out = []
    for ell, W in enumerate(params):
        rows = widths[ell - 1] if ell > 0 else W.shape[0]
        cols = widths[ell] if ell < n_hidden else W.shape[1]
        if cols > W.shape[1]:
            W = xp.concat([W, xp.zeros((W.shape[0], cols - W.shape[1]), dtype=W.dtype, device=device_of(W))], axis=1)
        if rows > W.shape[0]:
            W = xp.concat([W, xp.zeros((rows - W.shape[0], W.shape[1]), dtype=W.dtype, device=device_of(W))], axis=0)
        out.append(W)
    return out


def rebalance(params):
    r"""Prop. D.1's rebalancing (seed 002 App. D.1): equal layer norms, same function as Θ/‖Θ‖_F.

    .. math:: \tilde W_j = \frac{(\prod_{k=1}^q\|W_k\|_F)^{1/q}}{\|W_j\|_F\,\|Θ\|_F}\,W_j,

    so ‖W̃_j‖_F² = (Π_k‖W_k‖_F²)^{1/q}/Σ_k‖W_k‖_F² ≤ 1/q (AM–GM) for every j, i.e.
    f(·; Θ̃) ∈ 𝓕_q of Lemma D.3, and f(·; Θ̃) = f(·; Θ/‖Θ‖_F) by q-homogeneity.

    *[Erratum]* The seed prints the exponent as 1/k and the bound as "≤ 1/k";
    both are 1/q (with 1/k the layer norms are not equal and the function
    changes; tested).  All layers must be nonzero.
    """
    caller = "rebalance"
    if not isinstance(params, (list, tuple)) or len(params) < 1:
        raise InvalidParameterError(f"The 'params' parameter of {caller} must be a non-empty list of matrices.")
    xp = namespace(*params)
    params = _check_matrices(params, caller, xp)
    q = len(params)
    # per layer W = s·V (s a power of two, V = O(1)): ‖W‖ = s‖V‖ in logs, so that no norm over- or underflows
    scales = [_pow2_scale([W], xp) for W in params]
    vs = [W / s for W, s in zip(params, scales)]
    sq = [xp.sum(V * V) for V in vs]
    if any(not bool(s > 0) for s in sq):
        raise InvalidParameterError(f"{caller}: every layer of 'params' must be nonzero.")
    log_norms = [0.5 * xp.log(s) + xp.log(c) for s, c in zip(sq, scales)]
    two = xp.stack([2.0 * ln for ln in log_norms])
    top = xp.max(two)
    log_total = 0.5 * (top + xp.log(xp.sum(xp.exp(two - top))))  # log ‖Θ‖_F (log-sum-exp)
    log_geo = sum(log_norms) / q  # log (Π‖W_k‖)^{1/q}, in logs: deep nets' products under/overflow
    # W̃_j = (W_j/‖W_j‖)·(Π‖W_k‖)^{1/q}/‖Θ‖, with W_j/‖W_j‖ = V_j/‖V_j‖
    return [V / xp.sqrt(s) * xp.exp(log_geo - log_total) for V, s in zip(vs, sq)]


def width4_net(d, *, xp=None, dtype=None, device=None):
    r"""The width-4 separating net of seed 002 §2 / proof of Thm 2.1 (App. B.2).

    f(x) = [x₁]₊ + [−x₁]₊ − [x₂]₊ − [−x₂]₊ = |x₁| − |x₂|: u ∈ {e₁, −e₁, e₂, −e₂},
    w = (1, 1, −1, −1).  On every point of 𝒟 (eq. (2.1)) y·f(x) = 1 exactly, and
    ‖Θ‖_F² = 4 + 4 = 8, so its normalized margin is 1/8 (= the population max
    margin on 𝒟, inventory B7).  Returns ``(net, params)``, created in ``xp``
    on ``device`` in ``dtype`` (defaults as for :meth:`HomogeneousNet.init`).
    """
    d = check_int(d, "d", caller="width4_net", low=2)
    xp, dtype, device = init_target(xp, dtype, device, "width4_net")
    U = [[0.0] * 4 for _ in range(d)]  # W_1 = Uᵀ, columns e₁, −e₁, e₂, −e₂
    U[0][0], U[0][1], U[1][2], U[1][3] = 1.0, -1.0, 1.0, -1.0
    w = [[1.0], [1.0], [-1.0], [-1.0]]
    return HomogeneousNet(d, 4, depth=2), [
        xp.asarray(U, dtype=dtype, device=device),
        xp.asarray(w, dtype=dtype, device=device),
    ]
