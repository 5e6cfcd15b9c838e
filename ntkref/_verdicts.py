r"""Proven kernel verdicts: each entry of a candidate judged against the *exact* kernel, by ntkref's proven error
bound, and settled by ball arithmetic where the bound cannot decide.  Shared by :mod:`ntkref.testing` and
``ntkref compare`` (which must not import hypothesis).

The kernels judged are the FC NNGP/NTK of seed 004 eqs. (6)–(8) in neural-tangents' convention (seed 000
eq. (63) at depth 1), computed by :func:`ntkref.kernels.fc`.

**The question.**  For an entry (i, j) with candidate value C, let K* be the exact real-number kernel of the exact
float inputs and s* = √(K*(xᵢ,xᵢ)·K*(x′ⱼ,x′ⱼ)) its exact scale.  The candidate passes iff

    |C − K*| ≤ τ·s* + atol          (τ the user's tolerance of that entry; C not finite: fails).

**Step 1 — the proven bound** (basis ``"proven bound"``).  ``kernels.fc(..., error_bound=True)`` returns the float
reference R with B, |R − K*| ≤ B (the theorem and its assumptions: :mod:`ntkref.kernels._rounding`).  The
diagonals come the same way (the diagonal entries of symmetric ``fc`` calls on blocks of rows, each with its
bound), so K*(x,x) ∈ [lo, hi] and s* ∈ [s_lo, s_hi].  Then

    PASS is proven  if  |C − R| + B ≤ τ·s_lo + atol,
    FAIL is proven  if  |C − R| − B > τ·s_hi + atol   (or C is not finite),

since |C − K*| lies in [|C − R| − B, |C − R| + B].  Both sides are evaluated on the host in float64 with each
operation's result moved one float outward (``nextafter``): a round-to-nearest result is within half a spacing
of the exact one, so one step outward bounds it — assumptions: IEEE-754 binary64 with round-to-nearest, a correctly
rounded √ and gradual underflow (NumPy on the host), plus those of the bound B.

**Step 2 — the enclosure** (basis ``"enclosure"``).  An entry neither step decides lies within about B of the
threshold.  Its pair is evaluated in python-flint's ``arb`` ball arithmetic (:func:`ntkref.enclosures.fc_pairs`,
:func:`ntkref.enclosures.fc_diagonal`: balls that provably contain K* and K*(x,x), from the exact float
inputs), and v = |C − K*| − τ·s* − atol is evaluated in arb: PASS if v ≤ 0 for every point of the ball, FAIL if
v > 0 for every point (no assumption on floating point; a tie v = 0 is retried at a higher precision and
otherwise stays undecided).  At most ``max_enclosures`` entries per call (pure Python, ~10⁴ pairs/s).

**Step 3 — tested** (basis ``"tested bound"``, not proven).  Where no proven bound exists (activations and
biases the analysis does not cover — ``kernels.fc`` raises NotImplementedError naming ``error_bound`` —, the
CNTK, a user's reference), and for undecided entries when python-flint is missing (the ``rigorous`` extra) or
beyond the enclosure budget, the entry is judged by the tested rule |C − R| ≤ max(τ, b)·s + atol with b the
*observed* bound :func:`ntkref.kernels._accuracy.certified_bound` and s the float scale, and marked not proven.

Every entry carries ``proven`` (bool) and its ``basis`` (:data:`BASES`).  Host step: the enclosure runs on the
CPU; inputs are copied to the host explicitly (``to_numpy``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np  # host-side verdicts: reports are NumPy by design; inputs are moved explicitly

from . import enclosures, kernels  # enclosures: python-flint is imported at its first call
from ._lib.backend import to_numpy

__all__ = ["BASES", "MAX_ENCLOSURES", "FCProof", "prove_fc", "judge", "RIGOROUS_NOTE"]

BASES = ("proven bound", "enclosure", "tested bound")
"""The basis of a verdict: ntkref's proven bound decided it, the ball-arithmetic enclosure did, or the tested
(observed, not proven) bound did."""

MAX_ENCLOSURES = 20_000
"""Entries settled by ball arithmetic per call at most (pure Python, about 10⁴ pairs a second)."""

RIGOROUS_NOTE = ('install the \'rigorous\' extra (pip install -e ".[rigorous]", python-flint) to settle them by '
                 "ball arithmetic")

_DIAG_BLOCK = 256


def _host(a):
    return np.asarray(to_numpy(a), dtype=np.float64)  # an explicit host copy


def _up(x):
    return np.nextafter(x, np.inf)


def _down(x):
    return np.nextafter(x, -np.inf)


@dataclass
class FCProof:
    """ntkref's FC reference with its proven bounds on one input pair (host arrays).

    ``B``: |R − K*| ≤ B entrywise; ``lo1 ≤ K*(x1ᵢ, x1ᵢ) ≤ hi1`` and likewise ``lo2``/``hi2`` for the columns;
    ``x1``/``x2`` the exact inputs (``x2`` None: symmetric), ``which`` and ``params`` for the enclosure;
    ``zero1``/``zero2`` the rows that are exactly zero where :func:`_zero_rows_vanish` applies (else None).
    """

    B: np.ndarray
    lo1: np.ndarray
    hi1: np.ndarray
    lo2: np.ndarray
    hi2: np.ndarray
    x1: np.ndarray
    x2: np.ndarray | None
    which: str
    params: dict = field(default_factory=dict)
    zero1: np.ndarray | None = None
    zero2: np.ndarray | None = None


def _zero_rows_vanish(params):
    """Theorem: without biases (every b_std = 0) and with σ(0) = 0 (ReLU, erf), K*(0, x′) = 0 for every x′, both
    kernels: Σ⁽⁰⁾(0, x′) = W²·0·x′/d = 0 and Σ⁽⁰⁾(0, 0) = 0, so the layer-h pre-activation at x = 0 is 0 almost
    surely and Σ⁽ʰ⁺¹⁾(0, ·) = W²E[σ(0)σ(v)] = 0; Θ⁽⁰⁾ = Σ⁽⁰⁾ = 0 and Θ⁽ʰ⁾ = Σ⁽ʰ⁾ + Θ⁽ʰ⁻¹⁾Σ̇⁽ʰ⁾ = 0 (Σ̇ finite)."""
    bs = params.get("b_std", 0.0)
    bs = list(bs) if isinstance(bs, (list, tuple)) else [bs]
    act = params.get("activation", "relu")
    return all(float(b) == 0.0 for b in bs) and isinstance(act, str) and act in ("relu", "erf")


def _diag_interval(a, which, params, dtype):
    """[lo, hi] ∋ K*(x, x) for each row of ``a`` (device array): diagonals of symmetric ``fc`` blocks with bounds."""
    n = a.shape[0]
    lo, hi = np.empty(n), np.empty(n)
    bname = which + "_bound"
    for i0 in range(0, n, _DIAG_BLOCK):
        i1 = min(i0 + _DIAG_BLOCK, n)
        res = kernels.fc(a[i0:i1, ...], None, get=(which,), error_bound=True, dtype=dtype, **params)
        D = np.diagonal(_host(getattr(res, which))).copy()
        Bd = np.diagonal(_host(getattr(res, bname))).copy()
        lo[i0:i1] = np.maximum(_down(D - Bd), 0.0)
        hi[i0:i1] = _up(D + Bd)
    return lo, hi


def prove_fc(a1, a2, *, which, params, dtype=None, K=None, B=None):
    """(R, proof, why): ntkref's FC reference R (host) of ``which`` and its :class:`FCProof`, or (R, None, why)
    where no proven bound exists (``why`` says so: ``kernels.fc``'s NotImplementedError message).

    ``a1``, ``a2``: the inputs in the reference's namespace and device (``a2`` None: symmetric).  ``K``/``B``:
    the reference and its bound when already computed (e.g. by the CLI in blocks of rows), else computed here.
    """
    try:
        if K is None or B is None:
            res = kernels.fc(a1, a2, get=(which,), error_bound=True, dtype=dtype, **params)
            K, B = getattr(res, which), getattr(res, which + "_bound")
        K, B = _host(K), _host(B)
        lo1, hi1 = _diag_interval(a1, which, params, dtype)
        lo2, hi2 = (lo1, hi1) if a2 is None else _diag_interval(a2, which, params, dtype)
    except NotImplementedError as exc:
        R = _host(getattr(kernels.fc(a1, a2, get=(which,), dtype=dtype, **params), which)) if K is None else _host(K)
        return R, None, str(exc)
    x1 = np.asarray(to_numpy(a1))  # the exact float inputs the reference saw (host copies, for the enclosure)
    x2 = None if a2 is None else np.asarray(to_numpy(a2))
    zero1 = zero2 = None
    if _zero_rows_vanish(params):
        zero1 = ~np.any(x1.reshape(x1.shape[0], -1) != 0, axis=1)
        zero2 = zero1 if x2 is None else ~np.any(x2.reshape(x2.shape[0], -1) != 0, axis=1)
    return K, FCProof(B, lo1, hi1, lo2, hi2, x1, x2, which, dict(params), zero1, zero2), ""


def _bound_status(C, R, proof, tau, atol):
    """+1 proven pass, −1 proven fail, 0 undecided, per entry (module docstring, step 1)."""
    finite = np.isfinite(C)
    with np.errstate(all="ignore"):
        r1, r2 = np.maximum(_down(np.sqrt(proof.lo1)), 0.0), np.maximum(_down(np.sqrt(proof.lo2)), 0.0)
        s_lo = np.maximum(_down(r1[:, None] * r2[None, :]), 0.0)
        s_hi = _up(_up(np.sqrt(proof.hi1))[:, None] * _up(np.sqrt(proof.hi2))[None, :])
        inf_tau = np.isinf(tau)
        t = np.where(inf_tau, 0.0, tau)
        allow_lo = np.where(inf_tau, np.inf, _down(_down(t * s_lo) + atol))
        allow_hi = np.where(inf_tau, np.inf, _up(_up(t * s_hi) + atol))
        d = np.abs(C - R)
        d_hi, d_lo = _up(d), np.maximum(_down(d), 0.0)
        ok = finite & (_up(d_hi + proof.B) <= allow_lo)
        bad = ~finite | (_down(d_lo - proof.B) > allow_hi)
    status = np.where(ok, 1, np.where(bad, -1, 0)).astype(np.int8)
    if proof.zero1 is not None:  # K* = 0 and s* = 0 on a zero row (_zero_rows_vanish): |C| ≤ atol, exactly
        z = proof.zero1[:, None] | proof.zero2[None, :]
        with np.errstate(all="ignore"):
            status = np.where(z, np.where(finite & (np.isinf(tau) | (np.abs(C) <= atol)), 1, -1), status)
    return status


def _settle(C, locs, proof, tau, atol, prec=80):
    """+1/−1/0 for the entries ``locs`` (list of (i, j)) by ball arithmetic (module docstring, step 2).  Raises
    ImportError (naming the ``rigorous`` extra) without python-flint."""
    x1 = proof.x1
    x2 = x1 if proof.x2 is None else proof.x2
    ii = np.array([i for i, _ in locs], dtype=np.intp)
    jj = np.array([j for _, j in locs], dtype=np.intp)
    out = np.zeros(len(locs), dtype=int)
    todo = np.arange(len(locs))
    for p in (prec, 4 * prec, 16 * prec):
        if todo.size == 0:
            break
        kw = dict(get=(proof.which,), prec=p, **proof.params)
        pairs = getattr(enclosures.fc_pairs(x1[ii[todo]], x2[jj[todo]], **kw), proof.which).balls
        r1 = np.unique(ii[todo])
        r2 = np.unique(jj[todo])
        d1 = dict(zip(r1.tolist(), getattr(enclosures.fc_diagonal(x1[r1], **kw), proof.which).balls))
        d2 = dict(zip(r2.tolist(), getattr(enclosures.fc_diagonal(x2[r2], **kw), proof.which).balls))
        import flint  # installed: enclosures ran

        arb = flint.arb
        left = []
        with flint.ctx.workprec(p):
            for k, K in zip(todo.tolist(), pairs):
                i, j = int(ii[k]), int(jj[k])
                c = float(C[i, j])
                if not np.isfinite(c):
                    out[k] = -1
                    continue
                tk = float(tau[i, j])
                if np.isinf(tk):
                    out[k] = 1
                    continue
                s = (d1[i] * d2[j]).nonnegative_part().sqrt()
                v = abs(arb(c) - K) - arb(tk) * s - arb(float(atol))
                if v <= 0:
                    out[k] = 1
                elif v > 0:
                    out[k] = -1
                else:
                    left.append(k)
        todo = np.array(left, dtype=np.intp)
    return out


def judge(C, R, proof, *, user_tol, atol, tested_bound, scale, why="", max_enclosures=MAX_ENCLOSURES):
    """The verdict of every entry (module docstring): a dict of host arrays and notes.

    ``C``, ``R``: candidate and reference (host float64, same shape); ``proof``: :class:`FCProof` or None (then
    every entry is judged by the tested rule, with ``why`` as its note); ``user_tol``: τ per entry (broadcast);
    ``tested_bound``: the observed scaled bound b of the tested rule; ``scale``: the float scale of the tested
    rule.  Returns ``{"outside", "proven", "basis", "tol", "from_ntkref", "counts", "notes"}``: ``basis`` holds
    codes into :data:`BASES` (int8: 0 proven bound, 1 enclosure, 2 tested bound); ``tol`` is the
    tolerance the verdict of the entry used (τ where proven, max(τ, b) where tested) and ``from_ntkref`` where b
    was larger; ``counts`` {basis: n}; ``notes`` the reasons an entry is not proven.
    """
    C = np.asarray(C, dtype=np.float64)
    R = np.asarray(R, dtype=np.float64)
    tau = np.broadcast_to(np.asarray(user_tol, dtype=np.float64), R.shape)
    scale = np.broadcast_to(np.asarray(scale, dtype=np.float64), R.shape)
    b = float(tested_bound or 0.0)
    finite = np.isfinite(C)
    with np.errstate(all="ignore"):
        tested_tol = np.maximum(tau, b)
        # fail closed: a NaN comparison is False, so "not within" rather than "beyond" (a non-finite reference or
        # scale never passes a candidate)
        tested_out = ~finite | ~(np.abs(C - R) <= np.where(scale > 0, tested_tol * scale, 0.0) + atol)
    notes = []
    status = np.zeros(R.shape, dtype=np.int8)
    basis = np.full(R.shape, 2, dtype=np.int8)  # codes into BASES
    if proof is None:
        if why:
            notes.append(f"not proven (tested bound): {why}")
    else:
        status = _bound_status(C, R, proof, tau, atol)
        basis[status != 0] = 0
        undecided = np.argwhere(status == 0)
        if undecided.size:
            locs = [tuple(int(v) for v in loc) for loc in undecided]
            over = locs[max_enclosures:]
            locs = locs[:max_enclosures]
            no_flint = False
            try:
                got = _settle(C, locs, proof, tau, atol)
            except ImportError:
                no_flint = True
                notes.append(f"{len(locs) + len(over)} entr{'y' if len(locs) + len(over) == 1 else 'ies'} within "
                             "ntkref's proven bound of the threshold judged by the tested bound (not proven): "
                             + RIGOROUS_NOTE)
                got = np.zeros(len(locs), dtype=int)
            else:
                n_tie = int(np.sum(got == 0))
                if n_tie:
                    notes.append(f"{n_tie} entr{'y' if n_tie == 1 else 'ies'} exactly at the threshold (the ball "
                                 "arithmetic cannot separate them) judged by the tested bound (not proven)")
            for (i, j), g in zip(locs, got):
                status[i, j] = g
                if g != 0:
                    basis[i, j] = 1
            if over and not no_flint:
                notes.append(f"{len(over)} entr{'y' if len(over) == 1 else 'ies'} within ntkref's proven bound of the threshold beyond the "
                             f"enclosure budget ({max_enclosures} a call) judged by the tested bound (not proven)")
    proven = status != 0
    outside = np.where(proven, status < 0, tested_out)
    tol = np.where(proven, tau, tested_tol)
    from_ntkref = ~proven & (b > tau)
    counts = dict(zip(BASES, np.bincount(basis.ravel(), minlength=3).tolist()))
    return {"outside": outside, "proven": proven, "basis": basis, "tol": tol, "from_ntkref": from_ntkref,
            "counts": counts, "notes": notes}
