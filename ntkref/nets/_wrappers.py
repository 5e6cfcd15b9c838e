r"""Networks built from a network: the antisymmetric doubling (f₀ ≡ 0) and the linearisation.

- :class:`Antisymmetric` — f(w, x) = (f_A(w_A, x) − f_B(w_B, x))/√2 with w_B = w_A at
  initialisation, so f₀ ≡ 0 exactly while Θ̂(w₀) = (Θ̂_A + Θ̂_B)/2 = Θ̂_A(w_A,0): the
  "f₀ = 0" initialisation of seed 000 footnote 2 without subtracting anything.
- :class:`Scaled` — f_nn = κ·f (seed 004, Theorem 2): the tangent kernel is κ²Θ̂ and the initial
  output κf₀ → 0 as κ → 0, so gradient flow on the squared loss ends at the kernel-regression
  predictor k(x, X)Θ⁻¹y (tested against wide nets).
- :class:`Linearized` — f_lin(w, x) = f(w₀, x) + ∇_w f(w₀, x)·(w − w₀) (seed 000 App. D.4 and
  Theorem 3.4's mechanism): its tangent kernel is Θ̂(w₀) for every w, so gradient descent on it
  is *exactly* a kernel machine with K = Θ̂(w₀) (tested to rounding).

All three expose the interface of :class:`~ntkref.nets.FullyConnected` that training uses
(``init``, ``apply``, ``jacobian``, ``vjp``, ``empirical_ntk``, ``readout_layers``) and wrap a
:class:`~ntkref.nets.FullyConnected`, a :class:`~ntkref.nets.ConvNet` or another wrapper; their
``jacobian`` is always the (n, n_params) array in :func:`flatten_params` order.  Their
infinite-width tangent kernels, used by ``equivalence.compare(analytic=True)``: Antisymmetric and
Linearized (around an initialisation) keep the wrapped net's limit Θ, Scaled multiplies it by κ².
"""
from __future__ import annotations

import math

from .._lib.backend import namespace
from .._lib.validation import InvalidParameterError, check_array
from ._common import check_pairs
from ._fc import check_finite_ntk

__all__ = ["Antisymmetric", "Linearized", "Scaled", "flatten_params", "unflatten_params"]  # validate_params, flat_jacobian: internal


def _is_copies(params):
    """A tuple of parameter lists (an :class:`Antisymmetric` net's ``(params_A, params_B)``), not one list of pairs."""
    return (isinstance(params, tuple) and bool(params) and isinstance(params[0], (list, tuple))
            and bool(params[0]) and isinstance(params[0][0], (list, tuple)))


def flatten_params(params, xp=None):
    """Concatenate a list of (W, b) — or a tuple of such lists — into one vector (``jacobian``'s order:
    each W row-major, whatever its number of axes, then its b)."""
    if _is_copies(params):
        xp = namespace(params[0][0][0]) if xp is None else xp
        return xp.concat([flatten_params(p, xp) for p in params])
    check_pairs(params, "flatten_params")
    xp = namespace(params[0][0]) if xp is None else xp
    parts = []
    for W, b in params:
        parts.append(xp.reshape(W, (-1,)))
        if b is not None:
            parts.append(xp.reshape(b, (-1,)))
    return xp.concat(parts)


def _n_entries(like):
    if _is_copies(like):
        return sum(_n_entries(p) for p in like)
    return sum(math.prod(W.shape) + (0 if b is None else math.prod(b.shape)) for W, b in like)


def unflatten_params(vector, like):
    """Inverse of :func:`flatten_params` with the shapes of ``like`` (a list of (W, b) pairs, W of any number
    of axes — a :class:`~ntkref.nets.ConvNet`'s filters are 4-D — or a tuple of such lists)."""
    copies = like if _is_copies(like) else (like,)
    for p in copies:
        check_pairs(p, "unflatten_params", name="like")
    first = copies[0][0][0]
    xp = namespace(first)
    size = _n_entries(like)
    vector = check_array(vector, "vector", caller="unflatten_params", ndim=1, xp=xp, dtype=first.dtype, like=first)
    if vector.shape[0] != size:
        raise InvalidParameterError(
            f"The 'vector' parameter of unflatten_params has {vector.shape[0]} entries; the parameters 'like' "
            f"({sum(len(p) for p in copies)} layers) hold {size}.")
    outs, offset = [], 0
    for p in copies:
        out = []
        for W, b in p:
            n_w = math.prod(W.shape)
            Wn = xp.reshape(vector[offset : offset + n_w], W.shape)
            offset += n_w
            bn = None
            if b is not None:
                n_b = math.prod(b.shape)
                bn = xp.reshape(vector[offset : offset + n_b], b.shape)
                offset += n_b
            out.append((Wn, bn))
        outs.append(out)
    return tuple(outs) if _is_copies(like) else outs[0]


def flat_jacobian(net, params, x):
    """∇_w f(w, x) as an (n, n_params) array in :func:`flatten_params` order, for every network here
    (:class:`~ntkref.nets.ConvNet` returns per-layer blocks unless asked for ``flat=True``)."""
    from ._cnn import ConvNet

    if isinstance(net, ConvNet):
        return net.jacobian(params, x, flat=True)
    return net.jacobian(params, x)


def validate_params(net, params, caller, name="params"):
    """``params`` checked against ``net`` (structure, layer count, finite real arrays) with every error naming
    ``name``: the wrappers recurse, HomogeneousNet has its list of matrices, the others (W, b) pairs."""
    from ._homogeneous import HomogeneousNet

    if isinstance(net, (Antisymmetric, Scaled, Linearized)):
        return net._validate(params, caller, name)
    if isinstance(net, HomogeneousNet):
        return net._check_params(params, caller, name=name)[1]
    depth = getattr(net, "depth", None)
    return check_pairs(params, caller, None if depth is None else depth + 1, name=name)


def _check_net(net, caller):
    missing = [m for m in ("init", "apply", "jacobian", "vjp") if not callable(getattr(net, m, None))]
    if missing or not hasattr(net, "depth"):
        raise InvalidParameterError(
            f"The 'net' parameter of {caller} must be a network of ntkref.nets (with depth, init, apply, jacobian, "
            f"vjp); got {net!r}."
        )


def _copy_input_shape(wrapper, net):
    """The wrapped net's input description (``d_in`` of a fully connected net; ``in_channels`` and
    ``spatial_shape`` of a ConvNet), where it has one."""
    for attr in ("d_in", "in_channels", "spatial_shape"):
        if hasattr(net, attr):
            setattr(wrapper, attr, getattr(net, attr))


class Antisymmetric:
    """f = (f_A − f_B)/√2 with two copies of ``net``; ``init`` makes the copies equal, so f₀ ≡ 0.

    Parameters are a pair ``(params_A, params_B)``.
    """

    def __init__(self, net):
        _check_net(net, "Antisymmetric")
        self.net = net
        self.depth = net.depth
        _copy_input_shape(self, net)

    @property
    def n_params(self):
        return 2 * self.net.n_params

    def init(self, seed, *, xp=None, dtype=None, device=None):
        pa = self.net.init(seed, xp=xp, dtype=dtype, device=device)
        pb = [(W + 0, None if b is None else b + 0) for W, b in pa]  # an independent copy
        return (pa, pb)

    def _pair(self, params, caller, name="params"):
        if not isinstance(params, (list, tuple)) or len(params) != 2 or not all(
                isinstance(p, (list, tuple)) for p in params):
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller} must be a pair (params_A, params_B) of parameter lists, "
                f"as returned by init. Got {type(params).__name__} instead.")
        return params

    def _validate(self, params, caller, name="params"):
        pa, pb = self._pair(params, caller, name)
        return (validate_params(self.net, pa, caller, name), validate_params(self.net, pb, caller, name))

    def apply(self, params, x):
        pa, pb = self._pair(params, "Antisymmetric.apply")
        return (self.net.apply(pa, x) - self.net.apply(pb, x)) / math.sqrt(2.0)

    def jacobian(self, params, x):
        pa, pb = self._validate(params, "Antisymmetric.jacobian")
        xp = namespace(pa[0][0])
        return xp.concat([flat_jacobian(self.net, pa, x), -flat_jacobian(self.net, pb, x)], axis=1) / math.sqrt(2.0)

    def vjp(self, params, x, cotangent):
        pa, pb = self._pair(params, "Antisymmetric.vjp")
        c = 1 / math.sqrt(2.0)
        ga = self.net.vjp(pa, x, cotangent)
        gb = self.net.vjp(pb, x, cotangent)
        scale = lambda g, s: [(s * dW, None if db is None else s * db) for dW, db in g]  # noqa: E731
        return (scale(ga, c), scale(gb, -c))

    def empirical_ntk(self, params, x1, x2=None):
        pa, pb = self._pair(params, "Antisymmetric.empirical_ntk")
        # halves first: the sum of two kernels near the largest float would overflow
        out = self.net.empirical_ntk(pa, x1, x2) / 2 + self.net.empirical_ntk(pb, x1, x2) / 2
        return check_finite_ntk(out, "Antisymmetric.empirical_ntk")

    def readout_layers(self, params):
        """The readout (W, b) of each copy: the parameters that (7) regularises."""
        pa, pb = self._validate(params, "Antisymmetric.readout_layers")
        return [pa[-1], pb[-1]]


class Linearized:
    """First-order Taylor model of ``net`` around ``params0``; parameters have the shape of ``params0``."""

    def __init__(self, net, params0):
        _check_net(net, "Linearized")
        if not isinstance(params0, (list, tuple)):
            raise InvalidParameterError(
                f"The 'params0' parameter of Linearized must be a list of (W, b) pairs (or a tuple of such lists). "
                f"Got {type(params0).__name__} instead.")
        for p in (params0 if isinstance(params0, tuple) else (params0,)):
            check_pairs(p, "Linearized", None, name="params0")
            check_pairs(p, "Linearized", getattr(net, "depth", len(p) - 1) + 1, name="params0")
        self.net = net
        self.params0 = params0
        self.depth = net.depth
        _copy_input_shape(self, net)
        self._xp = namespace(params0[0][0][0] if isinstance(params0, tuple) else params0[0][0])
        self._w0 = flatten_params(params0, self._xp)

    @property
    def n_params(self):
        return self.net.n_params

    def init(self, seed=None, *, xp=None, dtype=None, device=None):
        """The expansion point itself (``seed`` is ignored: the model is defined around ``params0``), in
        ``dtype`` if given (a real floating dtype)."""
        from ._common import init_target

        if dtype is not None:
            _, dt, _ = init_target(self._xp, dtype, None, "Linearized.init")
            cast = lambda a: self._xp.astype(a, dt)  # noqa: E731
        else:
            cast = lambda a: a + 0  # noqa: E731
        copy = lambda p: [(cast(W), None if b is None else cast(b)) for W, b in p]  # noqa: E731
        return tuple(copy(p) for p in self.params0) if isinstance(self.params0, tuple) else copy(self.params0)

    def _check_params(self, params):
        """``params`` shaped like ``params0`` (finite, one (W, b) per layer): the methods whose value does not
        depend on them (the Jacobian, the NTK) still refuse invalid ones instead of ignoring them."""
        copies = params if isinstance(self.params0, tuple) else (params,)
        if isinstance(self.params0, tuple) and (not isinstance(params, tuple) or len(params) != len(self.params0)):
            raise InvalidParameterError(
                f"The 'params' parameter of Linearized must be a tuple of {len(self.params0)} parameter lists "
                f"like params0.")
        for p, p0 in zip(copies, self.params0 if isinstance(self.params0, tuple) else (self.params0,)):
            check_pairs(p, "Linearized", len(p0))
        return params

    def _validate(self, params, caller, name="params"):
        return self._check_params(params)

    def apply(self, params, x):
        xp = self._xp
        delta = flatten_params(self._check_params(params), xp) - self._w0
        return self.net.apply(self.params0, x) + flat_jacobian(self.net, self.params0, x) @ delta

    def jacobian(self, params, x):
        self._check_params(params)
        return flat_jacobian(self.net, self.params0, x)

    def vjp(self, params, x, cotangent):
        self._check_params(params)
        return self.net.vjp(self.params0, x, cotangent)

    def empirical_ntk(self, params, x1, x2=None):
        self._check_params(params)
        return self.net.empirical_ntk(self.params0, x1, x2)

    def readout_layers(self, params):
        self._check_params(params)
        return [p[-1] for p in params] if isinstance(params, tuple) else [params[-1]]


class Scaled:
    """f_nn(w, x) = κ·f(w, x) (seed 004's output scaling); parameters are those of ``net``."""

    def __init__(self, net, kappa):
        from .._lib.validation import check_real

        _check_net(net, "Scaled")
        self.net = net
        self.kappa = check_real(kappa, "kappa", caller="Scaled", low=0.0, closed="neither")
        self.depth = net.depth
        _copy_input_shape(self, net)

    @property
    def n_params(self):
        return self.net.n_params

    def init(self, seed, *, xp=None, dtype=None, device=None):
        return self.net.init(seed, xp=xp, dtype=dtype, device=device)

    def apply(self, params, x):
        return self.kappa * self.net.apply(params, x)

    def jacobian(self, params, x):
        return self.kappa * flat_jacobian(self.net, params, x)

    def vjp(self, params, x, cotangent):
        g = self.net.vjp(params, x, cotangent)
        scale = lambda gr: [(self.kappa * dW, None if db is None else self.kappa * db) for dW, db in gr]  # noqa: E731
        return tuple(scale(x) for x in g) if isinstance(g, tuple) else scale(g)

    def empirical_ntk(self, params, x1, x2=None):
        return check_finite_ntk((self.kappa**2) * self.net.empirical_ntk(params, x1, x2), "Scaled.empirical_ntk")

    def _validate(self, params, caller, name="params"):
        return validate_params(self.net, params, caller, name)

    def readout_layers(self, params):
        params = validate_params(self.net, params, "Scaled.readout_layers")
        return self.net.readout_layers(params) if hasattr(self.net, "readout_layers") else [params[-1]]
