r"""Finite-width convolutional ReLU networks, without autograd (seed 004, CNN).

The finite network whose infinite-width tangent kernel is
:func:`ntkref.kernels.cntk` (seed 004, Section 4 CNN-V / CNN-GAP, NTK
parameterization of eq. (5) with c_σ moved into ``W_std``):

.. math::

    z_ℓ[p, o] = \frac{W_{std,ℓ}}{\sqrt{C_{ℓ-1} q^2}}
                \sum_{a,b=-r}^{r}\sum_{c} W_ℓ[o, c, a+r, b+r]\, h_{ℓ-1}[p + (a, b), c]
                + b_{std,ℓ}\, b_ℓ[o],\qquad h_ℓ = \mathrm{relu}(z_ℓ),

for ℓ = 1..L (``depth``), h₀ = x, SAME zero padding (h = 0 outside the
image), stride 1, r = (q−1)/2; this is cross-correlation with PyTorch's weight
layout (C_out, C_in, q, q).  Readout:

- ``"gap"``: f = (W_{std,L+1}/√C_L) · mean_p h_L[p, :] · w + b_{std,L+1} b;
- ``"flatten"``: f = (W_{std,L+1}/√(C_L·H·W)) · vec(h_L) · w + b_{std,L+1} b,
  vec in (C, H, W) order (PyTorch's ``flatten`` of NCHW).

All weights and biases are i.i.d. N(0, 1); ``b_std = 0`` means no bias
parameters.  Forward, Jacobian (per layer, by hand-written backpropagation
through the convolutions: im2col forward, transposed convolution backward),
the vector–Jacobian product (``vjp``, the backward pass used for training)
and the empirical tangent kernel
Θ̂(w; x, x′) = ⟨∇_w f(w, x), ∇_w f(w, x′)⟩ (seed 000 Def. 2.1, seed 004
eq. (1) without the expectation) are written out; relu′(0) = 0.  As every
width → ∞, Θ̂ → ``cntk(depth=L, readout, filter_size=q, W_std, b_std).ntk``
and the law of f → N(0, nngp) (tested by Monte Carlo).
"""
from __future__ import annotations

import math
import numbers

import numpy as np  # host-side random draws in init() only (reproducible across backends)

from .._lib.backend import device_of, namespace
from .._lib.validation import InvalidParameterError, check_array, check_int, check_option, check_real
from .._lib.memory import check_memory
from ._fc import check_finite_ntk
from ._common import check_activation_memory, check_pairs, check_parameter_memory, host_draw, init_target, input_on

__all__ = ["ConvNet"]

_CALLER = "ConvNet"


def _zero_pad(a, axis, width, xp):
    if width == 0:
        return a
    shape = list(a.shape)
    shape[axis] = width
    zeros = xp.zeros(tuple(shape), dtype=a.dtype, device=device_of(a))
    return xp.concat([zeros, a, zeros], axis=axis)


def _pad_hw(a, r, xp):
    """Zero-pad the two spatial axes (1, 2) of an (N, H, W, C) array by r."""
    return _zero_pad(_zero_pad(a, 1, r, xp), 2, r, xp)


def _per_layer(value, name, n):
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        vals = [value] * n
    else:
        vals = list(value)
        if len(vals) != n:
            raise InvalidParameterError(
                f"The {name!r} parameter of {_CALLER} must be a number or one value per layer "
                f"including the readout ({n}). Got {len(vals)} values."
            )
    return tuple(check_real(v, name, caller=_CALLER, low=0.0) for v in vals)


class ConvNet:
    """A ReLU CNN (q×q SAME convolutions, stride 1) with a scalar readout, NTK parameterization.

    Parameters
    ----------
    in_channels : int
        Channels C of the input images (N, C, H, W).
    channels : int or sequence of ``depth`` ints
        Width (number of channels) of every conv layer.
    depth : int ≥ 1
        Number of conv + ReLU layers L.
    filter_size : odd int ≥ 1
        q.
    readout : {"gap", "flatten"}
        Global average pooling then dense, or flatten then dense (fan-in C·H·W).
    W_std, b_std : float ≥ 0 or sequence of depth + 1 floats
        Per conv layer and readout; ``b_std = 0`` means no bias parameters.
    spatial_shape : (H, W), optional
        Image size; required for ``readout="flatten"`` (the readout's fan-in).

    Parameters of the network (``params``) are a list of ``(W, b)`` per layer:
    conv ``W`` of shape (C_out, C_in, q, q), ``b`` of shape (C_out,) or
    ``None``; the readout ``W`` of shape (fan_in, 1), ``b`` of shape (1,) or
    ``None`` — the layout of :class:`ntkref.nets.FullyConnected`.
    """

    def __init__(
        self,
        in_channels,
        channels,
        depth,
        *,
        filter_size=3,
        readout="gap",
        W_std=1.0,
        b_std=0.0,
        spatial_shape=None,
    ):
        self.in_channels = check_int(in_channels, "in_channels", caller=_CALLER, low=1)
        self.depth = check_int(depth, "depth", caller=_CALLER, low=1)
        if isinstance(channels, numbers.Integral) and not isinstance(channels, bool):
            widths = [channels] * self.depth
        else:
            if not isinstance(channels, (list, tuple)):
                raise InvalidParameterError(
                    f"The 'channels' parameter of {_CALLER} must be an int or {self.depth} ints. Got {channels!r}.")
            widths = list(channels)
            if len(widths) != self.depth:
                raise InvalidParameterError(
                    f"The 'channels' parameter of {_CALLER} must be an int or {self.depth} ints. Got {channels!r}."
                )
        self.channels = tuple(check_int(c, "channels", caller=_CALLER, low=1) for c in widths)
        self.filter_size = check_int(filter_size, "filter_size", caller=_CALLER, low=1)
        if self.filter_size % 2 == 0:
            raise InvalidParameterError(
                f"The 'filter_size' parameter of {_CALLER} must be odd (SAME padding); got {filter_size}."
            )
        self.readout = check_option(readout, "readout", ("gap", "flatten"), caller=_CALLER)
        self.W_std = _per_layer(W_std, "W_std", self.depth + 1)
        self.b_std = _per_layer(b_std, "b_std", self.depth + 1)
        if spatial_shape is not None:
            if len(tuple(spatial_shape)) != 2:
                raise InvalidParameterError(
                    f"The 'spatial_shape' parameter of {_CALLER} must be (H, W); got {spatial_shape!r}."
                )
            spatial_shape = tuple(check_int(s, "spatial_shape", caller=_CALLER, low=1) for s in spatial_shape)
        elif self.readout == "flatten":
            raise InvalidParameterError(
                f"The 'spatial_shape' parameter of {_CALLER} is required with readout='flatten' "
                "(the dense readout's fan-in is C·H·W)."
            )
        self.spatial_shape = spatial_shape
        self.fan_in = tuple(c * self.filter_size**2 for c in (self.in_channels,) + self.channels[:-1])
        if self.readout == "gap":
            self.fan_in += (self.channels[-1],)
        else:
            self.fan_in += (self.channels[-1] * spatial_shape[0] * spatial_shape[1],)

    def __repr__(self):
        return (
            f"ConvNet(in_channels={self.in_channels}, channels={list(self.channels)}, depth={self.depth}, "
            f"filter_size={self.filter_size}, readout={self.readout!r}, W_std={list(self.W_std)}, "
            f"b_std={list(self.b_std)}, spatial_shape={self.spatial_shape})"
        )

    # ------------------------------------------------------------ parameters
    def param_shapes(self):
        """Shapes of (W, b) per layer (b's shape ``None`` when there is no bias)."""
        q = self.filter_size
        shapes = []
        c_in = self.in_channels
        for ell, c_out in enumerate(self.channels):
            shapes.append(((c_out, c_in, q, q), (c_out,) if self.b_std[ell] > 0 else None))
            c_in = c_out
        shapes.append(((self.fan_in[-1], 1), (1,) if self.b_std[-1] > 0 else None))
        return shapes

    @property
    def n_params(self):
        return sum(math.prod(w) + (math.prod(b) if b is not None else 0) for w, b in self.param_shapes())

    def init(self, seed, *, xp=None, dtype=None, device=None):
        """Draw every weight and bias i.i.d. N(0, 1) from ``numpy.random.default_rng(seed)``.

        Host-side draw in float64 (reproducible across backends), copied
        explicitly to ``xp`` (default: the ``NTKREF_BACKEND`` namespace) on
        ``device`` (default: ``NTKREF_DEVICE`` for the default namespace) in
        ``dtype`` (real floating, default float64); order W₁, b₁, …, readout last.
        """
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        xp, dtype, device = init_target(xp, dtype, device, "ConvNet.init")
        check_parameter_memory(self.n_params, max(math.prod(w) for w, _ in self.param_shapes()), xp, dtype, device,
                               "ConvNet.init", f"'in_channels' = {self.in_channels}, 'channels' = "
                               f"{list(self.channels)} and 'filter_size' = {self.filter_size}")
        params = []
        for w_shape, b_shape in self.param_shapes():
            W = host_draw(rng, w_shape, xp, dtype, device)
            b = host_draw(rng, b_shape, xp, dtype, device) if b_shape is not None else None
            params.append((W, b))
        return params

    # ---------------------------------------------------------------- checks
    def _check(self, params, x, name="x"):
        check_pairs(params, _CALLER, self.depth + 1)
        x = input_on(x, params[0][0])
        xp = namespace(params[0][0], x)
        x = check_array(x, name, caller=_CALLER, ndim=4, xp=xp, dtype=params[0][0].dtype)
        if x.shape[1] != self.in_channels:
            raise InvalidParameterError(
                f"The {name!r} parameter of {_CALLER} has {x.shape[1]} channels; the network expects "
                f"in_channels = {self.in_channels} (images are (N, C, H, W))."
            )
        if self.spatial_shape is not None and tuple(x.shape[2:]) != self.spatial_shape:
            raise InvalidParameterError(
                f"The {name!r} parameter of {_CALLER} has spatial shape {tuple(x.shape[2:])}; the network "
                f"was built for {self.spatial_shape}."
            )
        for ell, ((W, b), (w_shape, b_shape)) in enumerate(zip(params, self.param_shapes())):
            if tuple(W.shape) != w_shape:
                raise InvalidParameterError(f"params[{ell}] weight has shape {tuple(W.shape)}; expected {w_shape}.")
            if (b is None) != (b_shape is None):
                raise InvalidParameterError(f"params[{ell}] bias must be {'None' if b_shape is None else 'present'}.")
            if b is not None and tuple(b.shape) != b_shape:
                raise InvalidParameterError(f"params[{ell}] bias has shape {tuple(b.shape)}; expected {b_shape}.")
        n = x.shape[0]
        check_activation_memory(n * self._per_image(x)[0], n, _CALLER, x,
                                f"'channels' = {list(self.channels)} and 'filter_size' = {self.filter_size}", name)
        return xp, x

    def _per_image(self, x):
        """Floats per image of (the forward pass, the backward pass's largest layer): per layer and pixel the
        padded input and its im2col columns (q²·C_in), z, h, relu's temporary and the backward signals (C_out)
        are kept; the backward pass adds, one layer at a time, the columns' transposed copy and the transposed
        convolution's padded q²·C_in signals."""
        height, width = x.shape[2], x.shape[3]
        q2 = self.filter_size**2
        padded = (height + 2 * (self.filter_size // 2)) * (width + 2 * (self.filter_size // 2))
        c_in = (self.in_channels,) + self.channels[:-1]
        forward = sum(padded * ci + height * width * (q2 * ci + 4 * co) for ci, co in zip(c_in, self.channels))
        return forward, 3 * padded * q2 * max(c_in)

    def _scale(self, ell):
        return self.W_std[ell] / math.sqrt(self.fan_in[ell])

    # --------------------------------------------------------------- forward
    def _columns(self, h, xp):
        """im2col: (N, H, W, q²·C), entry [p, (a, c, ch)] = h[p + (a − r, c − r), ch] (0 outside)."""
        q, r = self.filter_size, self.filter_size // 2
        height, width = h.shape[1], h.shape[2]
        padded = _pad_hw(h, r, xp)
        return xp.concat(
            [padded[:, a : a + height, c : c + width, :] for a in range(q) for c in range(q)], axis=-1
        )

    def _weight_columns(self, W, xp):
        """(C_out, C_in, q, q) → (q²·C_in, C_out), rows ordered (a, c, ch) like :meth:`_columns`."""
        c_out, c_in, q, _ = W.shape
        return xp.reshape(xp.permute_dims(W, (2, 3, 1, 0)), (q * q * c_in, c_out))

    def _forward(self, params, x, xp):
        """im2col inputs of every conv layer, pre-activations, and the readout features."""
        h = xp.permute_dims(x, (0, 2, 3, 1))  # channels last: (N, H, W, C)
        n = h.shape[0]
        columns, zs = [], []
        for ell in range(self.depth):
            W, b = params[ell]
            cols = self._columns(h, xp)
            n_, hh, ww, kk = cols.shape
            # 2-D matmul: stacked matmuls with a broadcast operand miss BLAS in NumPy
            z = self._scale(ell) * (xp.reshape(cols, (n_ * hh * ww, kk)) @ self._weight_columns(W, xp))
            z = xp.reshape(z, (n_, hh, ww, z.shape[-1]))
            if b is not None:
                z = z + self.b_std[ell] * b
            columns.append(cols)
            zs.append(z)
            h = xp.maximum(z, xp.zeros_like(z))
        if self.readout == "gap":
            features = xp.mean(h, axis=(1, 2))
        else:
            features = xp.reshape(xp.permute_dims(h, (0, 3, 1, 2)), (n, math.prod(h.shape[1:])))
        return columns, zs, features

    def apply(self, params, x):
        """Network outputs f(w, x), shape (N,), for images x of shape (N, C, H, W)."""
        xp, x = self._check(params, x)
        _, _, features = self._forward(params, x, xp)
        W, b = params[-1]
        f = self._scale(self.depth) * (features @ W)[:, 0]
        if b is not None:
            f = f + self.b_std[-1] * b[0]
        return f

    # -------------------------------------------------------------- backward
    def jacobian(self, params, x, *, flat=False):
        """∇_w f(w, x) for every image, by hand-written backpropagation.

        Returns a list of ``(dW, db)`` per layer, shaped like ``params`` with a
        leading axis of length N (``db`` is ``None`` without bias), or with
        ``flat=True`` an (N, n_params) array in the order W₁ (row-major), b₁,
        …, readout W, readout b.

        Backward pass: δz = δh ⊙ 1[z > 0]; ∂f/∂W = scale·colsᵀ δz per image;
        ∂f/∂h_{ℓ−1}[p′] = scale·Σ_{a,c} δz[p′ − (a−r, c−r)] W[:, :, a, c]
        (the transposed convolution, zero outside the image).
        """
        xp, x = self._check(params, x)
        check_memory(x.shape[0] * (2 * self.n_params + sum(self._per_image(x))),
                     f"The ({x.shape[0]}, {self.n_params}) Jacobian of 'x' (with the backward pass)",
                     f"{_CALLER}.jacobian", x, ways_out="use empirical_ntk (no Jacobian; vjp goes through "
                                                        "it), float32, or fewer images of x per call")
        columns, zs, features = self._forward(params, x, xp)
        q, r = self.filter_size, self.filter_size // 2
        n = x.shape[0]
        height, width = x.shape[2], x.shape[3]
        p = height * width
        dtype, device = features.dtype, device_of(features)
        grads = [None] * (self.depth + 1)
        W_out, b_out = params[-1]
        scale = self._scale(self.depth)
        grads[-1] = (
            scale * features[:, :, None],
            self.b_std[-1] * xp.ones((n, 1), dtype=dtype, device=device) if b_out is not None else None,
        )
        # ∂f/∂h_L, channels last (N, H, W, C)
        c_last = self.channels[-1]
        if self.readout == "gap":
            per_pixel = (scale / p) * W_out[:, 0]
            delta_h = xp.broadcast_to(per_pixel, (n, height, width, c_last))
        else:
            w_chw = xp.reshape(W_out[:, 0], (c_last, height, width))
            delta_h = xp.broadcast_to(scale * xp.permute_dims(w_chw, (1, 2, 0)), (n, height, width, c_last))
        for ell in range(self.depth - 1, -1, -1):
            W, b = params[ell]
            scale = self._scale(ell)
            z = zs[ell]
            delta_z = delta_h * xp.astype(z > 0, dtype)  # relu'(0) = 0
            c_out, c_in = W.shape[0], W.shape[1]
            cols = xp.reshape(columns[ell], (n, p, q * q * c_in))
            dz = xp.reshape(delta_z, (n, p, c_out))
            d_cols = scale * (xp.permute_dims(cols, (0, 2, 1)) @ dz)  # (N, q²·C_in, C_out)
            dW = xp.permute_dims(xp.reshape(d_cols, (n, q, q, c_in, c_out)), (0, 4, 3, 1, 2))
            db = self.b_std[ell] * xp.sum(delta_z, axis=(1, 2)) if b is not None else None
            grads[ell] = (dW, db)
            if ell > 0:
                # transposed convolution: column (a, c) of pixel p came from input pixel p + (a − r, c − r)
                g = xp.reshape(dz, (n * p, c_out)) @ xp.permute_dims(self._weight_columns(W, xp), (1, 0))
                g = _pad_hw(xp.reshape(g, (n, height, width, q * q * c_in)), r, xp)
                back = None
                for a in range(q):
                    for c in range(q):
                        k = (a * q + c) * c_in
                        part = g[:, 2 * r - a : 2 * r - a + height, 2 * r - c : 2 * r - c + width, k : k + c_in]
                        back = part if back is None else back + part
                delta_h = scale * back
        if not flat:
            return grads
        blocks = []
        for dW, db in grads:
            blocks.append(xp.reshape(dW, (n, math.prod(dW.shape[1:]))))
            if db is not None:
                blocks.append(xp.reshape(db, (n, math.prod(db.shape[1:]))))
        return xp.concat(blocks, axis=1)

    def vjp(self, params, x, cotangent):
        """Σᵢ cᵢ ∇_w f(w, xᵢ) as a params-shaped list of ``(dW, db)`` (the backward pass).

        Same contract as :meth:`ntkref.nets.FullyConnected.vjp`; the gradient of
        Σᵢ ℓ(f(xᵢ), yᵢ) is ``vjp(params, x, ℓ′)``.
        """
        grads = self.jacobian(params, x)
        xp = namespace(grads[0][0])
        c_vec = check_array(
            input_on(cotangent, grads[0][0]), "cotangent", caller=f"{_CALLER}.vjp", ndim=1, xp=xp, shape=(grads[0][0].shape[0],)
        )
        out = []
        for dW, db in grads:
            gW = xp.tensordot(c_vec, dW, axes=([0], [0]))
            gb = xp.tensordot(c_vec, db, axes=([0], [0])) if db is not None else None
            out.append((gW, gb))
        return out

    def empirical_ntk(self, params, x1, x2=None, *, per_layer=False):
        """Θ̂(w; x1, x2) = J(x1) J(x2)ᵀ (seed 000 Def. 2.1), shape (n1, n2).

        ``per_layer=True`` returns an array of shape (depth + 1, n1, n2): the
        contribution of each layer's parameters (conv layers, then readout),
        whose sum is Θ̂.  With ``x2=None`` the result is exactly symmetric.
        """
        _, a1 = self._check(params, x1, "x1")  # errors name x1/x2, not the jacobian's x
        a2 = a1 if x2 is None else self._check(params, x2, "x2")[1]
        n1, n2 = a1.shape[0], a2.shape[0]
        check_memory((self.depth + 3) * n1 * n2, f"The ({n1}, {n2}) empirical NTK of 'x1'/'x2' (per layer)",
                     f"{_CALLER}.empirical_ntk", a1)
        g1 = self.jacobian(params, x1)
        g2 = g1 if x2 is None else self.jacobian(params, x2)
        xp = namespace(g1[0][0])
        terms = []
        for (w1, b1), (w2, b2) in zip(g1, g2):
            n1, n2 = w1.shape[0], w2.shape[0]
            t = xp.reshape(w1, (n1, math.prod(w1.shape[1:]))) @ xp.permute_dims(xp.reshape(w2, (n2, math.prod(w2.shape[1:]))), (1, 0))
            if b1 is not None:
                t = t + xp.reshape(b1, (n1, math.prod(b1.shape[1:]))) @ xp.permute_dims(xp.reshape(b2, (n2, math.prod(b2.shape[1:]))), (1, 0))
            if x2 is None:
                t = (t + xp.permute_dims(t, (1, 0))) / 2.0
            terms.append(t)
        if per_layer:
            return check_finite_ntk(xp.stack(terms, axis=0), f"{_CALLER}.empirical_ntk")
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        return check_finite_ntk(total, f"{_CALLER}.empirical_ntk")
