r"""Pointwise losses l(z, y) of seed 000 Table 1 and their (sub)derivatives.

Seed 000 eq. (7): L(β) = (λ/2)‖β‖² + Σᵢ l(g(xᵢ), yᵢ) (a *sum* over samples);
the dynamics (8)–(9) use l'(z, y) = ∂l/∂z.  Each loss carries the constants
of Theorem 3.5: ρ, the Lipschitz constant in z, and β_l, the smoothness
constant (Lipschitz constant of l') — ``None`` where the loss has none.

==========================  ===========================  =======================================  =====  ======
name                        l(z, y)                      l'(z, y) (convention at kinks)           ρ      β_l
==========================  ===========================  =======================================  =====  ======
``hinge``                   max(0, 1 − yz)               −y·𝟙(yz < 1)  (strict, as seed 000)       1      None
``squared_hinge``           max(0, 1 − yz)²              −2y·max(0, 1 − yz)                        None   2
``epsilon_insensitive``     max(0, |y − z| − ε)          sign(z − y)·𝟙(|y − z| > ε)                1      None
``squared``                 (y − z)²                     2(z − y)                                  None   2
``logistic``                log(1 + e^{−yz})             −y / (1 + e^{yz})                         1      1/4
==========================  ===========================  =======================================  =====  ======

``hinge``, ``squared_hinge`` and ``logistic`` are classification losses:
their labels must be exactly ±1.  The hard-margin SVM of Table 1 is the
λ → 0 limit of the hinge loss (see :mod:`ntkref.machines`).

The squared loss here has no ½ (Table 1 writes (yᵢ − z)²), so its KRR
minimiser is α = (K + (λ/2) I)⁻¹ y, as in the official code.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ._lib.backend import device_of, is_array, namespace
from ._lib.validation import InvalidParameterError, check_array, check_labels, check_real

__all__ = ["Loss", "LossOverflowError", "get", "NAMES"]


class LossOverflowError(InvalidParameterError, FloatingPointError):
    """A loss value or derivative of finite z, y that is not a finite number of the dtype."""


@dataclass(frozen=True)
class Loss:
    """A pointwise loss with its derivative and Theorem-3.5 constants.

    Attributes
    ----------
    name : str
    lipschitz : float or None
        ρ with |l(z, y) − l(z', y)| ≤ ρ|z − z'|; None if not globally Lipschitz.
    smoothness : float or None
        β_l with |l'(z, y) − l'(z', y)| ≤ β_l|z − z'|; None if l' is discontinuous.
    classification : bool
        Whether labels must be ±1.
    epsilon : float
        The insensitivity ε (``epsilon_insensitive`` only, else 0).
    """

    name: str
    lipschitz: float | None
    smoothness: float | None
    classification: bool
    epsilon: float = 0.0
    convex: bool = field(default=True)

    def _caller(self, method):
        return f"Loss[{self.name}].{method}"

    def _args(self, z, y, method):
        xp = namespace(z, y)
        z_given, y_given = z, y
        z = check_array(z, "z", caller=self._caller(method), xp=xp)
        y = check_array(y, "y", caller=self._caller(method), xp=xp)
        # a Python scalar or list given with an array is created on the array's device (check_array
        # creates it on the default device)
        if is_array(z_given) and not is_array(y_given):
            y = xp.asarray(y, device=device_of(z))
        elif is_array(y_given) and not is_array(z_given):
            z = xp.asarray(z, device=device_of(y))
        _check_shapes(tuple(z.shape), tuple(y.shape), self._caller(method))
        if self.classification:
            y = xp.reshape(check_labels(xp.reshape(y, (-1,)), "y", caller=self._caller(method), xp=xp), y.shape)
        y = xp.astype(y, z.dtype) if y.dtype != z.dtype else y
        return xp, z, y

    def _finite(self, out, xp, method):
        """Finite or an error: the squared losses (and |y − z| − ε) of finite z, y can overflow."""
        if not bool(xp.all(xp.isfinite(out))):
            big = float(xp.finfo(out.dtype).max)
            what = "l(z, y)" if method == "value" else "l'(z, y)"
            raise LossOverflowError(
                f"{self._caller(method)}: {what} overflows for these 'z' and 'y' (largest finite {big:.3g} in "
                f"{'float32' if out.dtype == xp.float32 else 'float64'}; the {self.name} loss grows like "
                f"{'|y - z|' if self.name == 'epsilon_insensitive' else 'its argument squared'}). Rescale the "
                f"outputs and targets."
            )
        return out

    def value(self, z, y):
        """l(z, y) elementwise, broadcasting z against y.

        One of z, y must broadcast to the other's shape (a scalar label, or extra leading axes); an outer
        product such as z of shape (n, 1) with y of shape (n,) is refused, as are shapes that do not broadcast.
        A value that overflows (the squared and squared hinge losses at |y − z|, 1 − yz ≳ 1e154 in float64,
        |y − z| − ε beyond the largest float) is an error (:class:`LossOverflowError`), never inf.
        """
        xp, z, y = self._args(z, y, "value")
        return self._value(z, y, xp)

    def _value(self, z, y, xp):
        """:meth:`value` on validated arrays z, y of one namespace and dtype (the solvers' inner loops)."""
        if self.name == "hinge":
            return xp.maximum(1 - y * z, 0.0)
        if self.name == "squared_hinge":
            return self._finite(xp.maximum(1 - y * z, 0.0) ** 2, xp, "value")
        if self.name == "epsilon_insensitive":
            return self._finite(xp.maximum(xp.abs(y - z) - self.epsilon, 0.0), xp, "value")
        if self.name == "squared":
            return self._finite((y - z) ** 2, xp, "value")
        # logistic: log(1 + e^{-m}) without overflow for large |m|
        return xp.logaddexp(xp.zeros_like(z), -(y * z))

    def derivative(self, z, y):
        """l'(z, y) = ∂l/∂z elementwise; at kinks the convention of the table above.  Shapes as :meth:`value`;
        an overflow (the squared losses at |y − z| ≳ 1e308) is an error."""
        xp, z, y = self._args(z, y, "derivative")
        return self._derivative(z, y, xp)

    def _derivative(self, z, y, xp):
        """:meth:`derivative` on validated arrays z, y of one namespace and dtype (the solvers' inner loops)."""
        if self.name == "hinge":
            return xp.where(y * z < 1, -y, xp.zeros_like(z))
        if self.name == "squared_hinge":
            return self._finite(-2 * y * xp.maximum(1 - y * z, 0.0), xp, "derivative")
        if self.name == "epsilon_insensitive":
            r = z - y
            return xp.where(xp.abs(r) > self.epsilon, xp.sign(r), xp.zeros_like(r))
        if self.name == "squared":
            return self._finite(2 * (z - y), xp, "derivative")
        m = y * z
        # -y·σ(-m): evaluated so that neither branch overflows
        e = xp.exp(-xp.abs(m))
        sig_neg = xp.where(m >= 0, e / (1 + e), 1 / (1 + e))
        return -y * sig_neg

    def check_targets(self, y, name="y", caller=None):
        """Validate targets for this loss (±1 labels for classification losses)."""
        if self.classification:
            return check_labels(y, name, caller=caller)
        return check_array(y, name, caller=caller, ndim=1)


def _check_shapes(zs, ys, caller):
    """z and y broadcast, and one of them to the other's shape (no outer product), else an error naming both."""
    n = max(len(zs), len(ys))
    a, b = (1,) * (n - len(zs)) + zs, (1,) * (n - len(ys)) + ys
    ok = all(p == q or p == 1 or q == 1 for p, q in zip(a, b))
    out = tuple(max(p, q) if p != 0 and q != 0 else 0 for p, q in zip(a, b))
    if not ok or out not in (zs, ys):
        raise InvalidParameterError(
            f"The 'z' and 'y' parameters of {caller} must have the same shape, or one must broadcast to the "
            f"other's shape (a scalar, or extra leading axes); got z of shape {zs} and y of shape {ys}."
        )


NAMES = ("hinge", "squared_hinge", "epsilon_insensitive", "squared", "logistic")


def get(name, **options):
    """The loss called ``name`` (see the module table); ``epsilon`` for SVR.

    >>> get("hinge").lipschitz
    1.0
    """
    if isinstance(name, Loss):
        if options:
            raise InvalidParameterError("options cannot be given together with a Loss instance.")
        return name
    if name not in NAMES:
        raise InvalidParameterError(
            f"The 'name' parameter of losses.get (the 'loss' parameter of the functions that take a loss) must be "
            f"one of {', '.join(map(repr, NAMES))}, or a Loss. Got {name!r} instead."
        )
    allowed = {"epsilon"} if name == "epsilon_insensitive" else set()
    unknown = set(options) - allowed
    if unknown:
        raise InvalidParameterError(
            f"losses.get({name!r}) takes {'only epsilon' if allowed else 'no options'}; got {sorted(unknown)}."
        )
    if name == "hinge":
        return Loss("hinge", 1.0, None, True)
    if name == "squared_hinge":
        return Loss("squared_hinge", None, 2.0, True)
    if name == "epsilon_insensitive":
        eps = check_real(options.get("epsilon", 0.1), "epsilon", caller="losses.get", low=0.0)
        return Loss("epsilon_insensitive", 1.0, None, False, epsilon=eps)
    if name == "squared":
        return Loss("squared", None, 2.0, False)
    return Loss("logistic", 1.0, 0.25, True)
