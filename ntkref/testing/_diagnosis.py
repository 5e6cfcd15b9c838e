r"""The kernel checkers' diagnosis: :mod:`ntkref._diagnosis` applied to one example of a search.

:class:`KernelDiagnoser` decides the kind and hint of a failing example of :func:`ntkref.testing.check_kernel` or
:func:`ntkref.testing.check_cntk` by cause (the taxonomy of :mod:`ntkref._diagnosis`): it evaluates the candidate
and the reference on the example *augmented* with the same rows rescaled to unit norm (images: unit largest pixel)
and a few generic rows of the same shape (a fixed seed), so that

- a constant factor or a named slip (NNGP for NTK, depth ± 1, no bias term, GAP vs Flatten, a W_std) is matched
  on many entries of different scale, whatever the size of the example (one row has one entry, where any error is
  "a factor");
- a value wrong at an extreme scale is called ``non_finite`` (lost to underflow/overflow) only if the candidate is
  right on the same directions at normal scale;
- the precision band uses the conditioning κ of the kernel map at each input: for FC kernels the correlations ρ_l
  of the pre-activations of every layer (ntkref's NNGP at depths 0 … L−1), κ = max_l min(1/√(1 − ρ_l²), eps^-½);
  for the CNTK (patch correlations, not computed) the worst case κ = eps^-½; for a user ``reference=`` the
  correlation of the inputs and of the reference kernel itself.

This full diagnosis runs on the *unshrunk* failing example; during shrinking (assert mode) the checker *pins* it
(:meth:`KernelDiagnoser.pin`): a shrink step keeps the failure only if the same explanation (the same slip, the
same constant factor) still explains it, or — for the other kinds — its entries fall in the same class, so the
minimal example is a failure of the kind and cause first found.  The candidate is never called on the augmented
rows when a user ``reference=`` is given (it is not probed with made-up inputs), nor where it raises on them
(the example alone is then diagnosed).
"""
from __future__ import annotations

import math

import numpy as np  # host-side test tooling: inputs and reports are NumPy arrays by design

from .. import _diagnosis as dg

_N_GENERIC = 3
_GENERIC_SEED = 20240  # fixed: the augmentation is part of the diagnosis, not of the search


def _unit_rows(x):
    """Each nonzero row (FC) or image (CNTK) rescaled to unit norm / unit largest pixel."""
    flat = x.reshape(x.shape[0], -1).astype(np.float64)
    norm = np.linalg.norm(flat, axis=1) if x.ndim == 2 else np.max(np.abs(flat), axis=1)
    keep = norm > 0
    out = flat[keep] / norm[keep, None]
    return out.reshape((-1,) + x.shape[1:])


class KernelDiagnoser:
    """Kinds and hints for one kernel checker (module docstring).

    ``build(params, which)`` returns a reference callable ``(x1, x2) -> (K, d1, d2, bound)`` (host arrays) for
    ntkref's kernel with other parameters; ``None`` for a user ``reference=`` (no alternatives, no augmentation).
    """

    def __init__(self, comparison, *, family, params, which, build=None, dtype="float64", layout=None):
        self.cmp = comparison
        self.family = family
        self.params = dict(params)
        self.which = which
        self.dtype = dtype
        self.layout = layout
        self.custom = build is None
        self.pinned = None
        self.alternatives = []
        self.layers = []
        if build is not None:
            specs = (dg.fc_alternatives if family == "fc" else dg.cntk_alternatives)(self.params, which)
            self.alternatives = [(a, build(a.params, a.which)) for a in specs]
            if family == "fc":
                self.layers = [build({**self.params, "depth": ell}, "nngp") for ell in range(self.params["depth"])]
        self.build = build

    # ---------------------------------------------------------------- per-entry scales
    def _n_terms(self, x1):
        if self.custom:
            return int(np.prod(x1.shape[1:])) + 2
        if self.family == "fc":
            return x1.shape[1] + self.params["depth"] + 2
        ch = x1.shape[1] if self.layout != "NHWC" else x1.shape[-1]
        return ch * self.params.get("filter_size", 3) ** 2 + self.params["depth"] + 2

    def band_and_extreme(self, x1, x2, K, R, d1, d2):
        eps = dg.eps_of(self.dtype, getattr(K, "dtype", np.float64))
        if self.custom:
            f1 = x1.reshape(x1.shape[0], -1).astype(np.float64)
            f2 = f1 if x2 is None else x2.reshape(x2.shape[0], -1).astype(np.float64)
            raw = dg.correlation(f1 @ f2.T, np.sum(f1 * f1, axis=1), np.sum(f2 * f2, axis=1))
            kappa = dg.conditioning([raw, dg.correlation(R, d1, d2)], eps)
        elif self.family == "fc":
            rhos = []
            for ref in self.layers:
                Kl, l1, l2, _ = ref(x1, x2)
                rhos.append(dg.correlation(Kl, l1, l2))
            kappa = dg.conditioning(rhos, eps, shape=R.shape)
        else:
            kappa = np.full(R.shape, 1.0 / math.sqrt(eps))
        band = dg.precision_band(np.broadcast_to(kappa, R.shape), self._n_terms(x1), eps)

        def sq(x):
            f = x.reshape(x.shape[0], -1).astype(np.float64)
            return np.sum((f / np.maximum(np.max(np.abs(f), axis=1, keepdims=True), 1e-300)) ** 2, axis=1) * \
                np.max(np.abs(f), axis=1) ** 2  # ‖x‖² without overflow in the sum

        extreme = dg.extreme_entries(d1, d2, self._cand_dtype(K), sq(x1), sq(x1 if x2 is None else x2))
        return band, extreme

    def _cand_dtype(self, K):
        dt = np.dtype(self.dtype)
        kd = getattr(K, "dtype", dt)
        return kd if np.issubdtype(kd, np.floating) and np.finfo(kd).eps > np.finfo(dt).eps else dt

    # ---------------------------------------------------------------- the slips, on given inputs
    def _alternatives_on(self, x1, x2, only=None):
        out = []
        for alt, ref in self.alternatives:
            if only is not None and alt.label not in only:
                continue
            try:
                Ka, a1, a2, _ = ref(x1, x2)
            except Exception:  # an alternative outside the reference's domain (e.g. depth 0 for a CNTK) is no slip
                out.append((alt, None, None))
                continue
            out.append((alt, Ka, _scale(a1, a2)))
        return out

    def _factor_alternatives(self, x1, x2):
        """W_std slips that produce a constant factor c (homogeneous kernels: c = (W′/W)^(2(L+1)))."""
        if self.custom or self.params.get("W_std") is None or self.family == "fc" and self.params.get(
                "activation") != "relu":
            return None
        W = self.params["W_std"]
        if not isinstance(W, (int, float)):
            return None

        def trials(c):
            if not c > 0:
                return []
            out = []
            w2 = W * c ** (1.0 / (2 * (self.params["depth"] + 1)))
            try:
                Ka, a1, a2, _ = self.build({**self.params, "W_std": w2}, self.which)(x1, x2)
            except Exception:
                return []
            out.append((f"W_std {w2:.9g}", f"W_std = {w2:.9g} instead of {W!r} (a W_std slip gives this factor "
                        "on a homogeneous kernel)", Ka, _scale(a1, a2)))
            return out

        return trials

    def _factors(self, x1):
        if self.family == "fc":
            return dg.known_factors("fc", self.params.get("depth", 0), d=x1.shape[1])
        shape = x1.shape[1:] if self.layout != "NHWC" else (x1.shape[3], x1.shape[1], x1.shape[2])
        return dg.known_factors("cntk", self.params.get("depth", 1), image_shape=shape)

    # ---------------------------------------------------------------- diagnosis
    def _augment(self, x1, x2):
        rng = np.random.default_rng(_GENERIC_SEED)

        def more(x):
            g = rng.standard_normal((_N_GENERIC,) + x.shape[1:])
            return np.concatenate([x, _unit_rows(x), g]).astype(x.dtype)

        return more(x1), None if x2 is None else more(x2)

    def full(self, x1, x2, K, R, d1, d2, verdict):
        """The diagnosis of a failing example: ``(diagnosis, kinds of the example's entries, substitute)``.

        ``substitute`` is ``None``, or — when the augmented set shows a more telling kind than the example's own
        entries (a float32-internal library returns inf at 1e150 and is wrong by 1e-7 at unit scale: the bug is a
        ``formula``) — ``(x1a, x2a, Ka, Ra, verdict, kinds)`` of the augmented set, a real counterexample of that
        kind to report instead (reduced to its rows by the checker).
        """
        n1, n2 = K.shape
        sets = [(x1, x2)]
        if not self.custom:
            sets.insert(0, self._augment(x1, x2))
        for a1, a2 in sets:
            try:
                if a1 is x1:
                    Ka, Ra, e1, e2 = K, R, d1, d2
                else:
                    Ka = self.cmp.call_candidate(a1, a2)
                    Ra, e1, e2, _ = self.cmp.reference(a1, a2)
                    if Ka.shape != Ra.shape:
                        continue
                v = verdict(Ka, Ra, e1, e2, a2 is None)
                band, extreme = self.band_and_extreme(a1, a2, Ka, Ra, e1, e2)
                d = dg.classify(Ka, Ra, v["scale"], tol=v["tol"], band=band, extreme=extreme, atol=self.cmp.atol,
                                alternatives=self._alternatives_on(a1, a2), factors=self._factors(a1),
                                factor_alternatives=self._factor_alternatives(a1, a2), outside=v["outside"])
            except Exception:  # the candidate refuses the augmented rows: diagnose the example alone
                continue
            kinds = d.kinds[:n1, :n2].copy()
            d.detail["entries"] = int(Ka.size)
            d.detail["augmented"] = a1 is not x1
            present = set(np.unique(kinds[v_outside(verdict, K, R, d1, d2, x2)]).tolist()) if a1 is not x1 else {d.kind}
            substitute = None
            if d.kind and d.kind not in present:
                substitute = (a1, a2, Ka, Ra, v, d.kinds)
            return d, kinds, substitute
        raise AssertionError("unreachable: the example itself is always diagnosable")  # pragma: no cover

    def pinned_kinds(self, x1, x2, K, R, d1, d2, v):
        """Kinds of a shrink step's entries under the pinned diagnosis (module docstring)."""
        pin = self.pinned
        band, extreme = self.band_and_extreme(x1, x2, K, R, d1, d2)
        established = None
        if pin.kind == "convention":
            if pin.factor is not None and pin.factor_names:
                # a named factor is a function of the shape (d, C, H·W): its value for this example's shape
                best = None
                for name, value, _ in self._factors(x1):
                    if name not in pin.factor_names:
                        continue
                    kinds = dg.kinds_given(K, R, v["scale"], tol=v["tol"], band=band, extreme=extreme,
                                           atol=self.cmp.atol, outside=v["outside"],
                                           established=(R * value, abs(value) * v["scale"]))
                    if best is None or np.count_nonzero(kinds == "convention") > np.count_nonzero(best == "convention"):
                        best = kinds
                if best is not None:
                    return best
            if pin.factor is not None:
                established = (R * pin.factor, np.abs(pin.factor) * v["scale"])
            else:
                for alt, Ka, sa in self._alternatives_on(x1, x2, only=pin.explained_by[:1]):
                    if Ka is not None:
                        established = (Ka, sa)
        return dg.kinds_given(K, R, v["scale"], tol=v["tol"], band=band, extreme=extreme, atol=self.cmp.atol,
                              outside=v["outside"], established=established)

    def pin(self, diagnosis):
        self.pinned = diagnosis


def v_outside(verdict, K, R, d1, d2, x2):
    return verdict(K, R, d1, d2, x2 is None)["outside"]


def _scale(a1, a2):
    return np.sqrt(np.maximum(np.asarray(a1, dtype=np.float64), 0.0))[:, None] * \
        np.sqrt(np.maximum(np.asarray(a2, dtype=np.float64), 0.0))[None, :]
