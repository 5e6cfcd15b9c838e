r"""Proven certificates of the kernel machines: g = Kα with a rigorous error bound (compensated products), and
the duality gap of seed 000 eq. (7) with a rigorous upper bound.

**Compensated mat-vec** (:func:`compensated_matvec`).  Error-free transformations after Ogita, Rump & Oishi,
"Accurate sum and dot product", SIAM J. Sci. Comput. 26 (2005): TwoProduct (Dekker/Veltkamp splitting with the
factor 2^27 + 1, no FMA) writes each product Kᵢⱼαⱼ = hᵢⱼ + eᵢⱼ exactly, and a pairwise tree of TwoSum (Knuth)
writes Σⱼ hᵢⱼ = Sᵢ + Σ(tree errors) exactly.  The errors (≤ 2n terms per row) are summed in plain floating
point and added to S once.  The result is g as if computed in twice the working precision, with the bound
(proved in :func:`compensated_matvec`, the a-posteriori form of ORO's Prop. 5.5 for the tree order)

.. math::  |\tilde g_i - (K\alpha)_i| \le \frac{u}{1-u}|\tilde g_i|
           + \gamma_{2n}\,u\,(1 + L(1+u)^L)(1+u)\,\frac{(\widehat{|K||\alpha|})_i + n\eta}{1-\gamma_n}
           + 5n\eta, \qquad L = \lceil\log_2 n\rceil,

u = 2⁻⁵³, η = 2⁻¹⁰⁷⁴ (the smallest subnormal), γ_k = ku/(1 − ku), and ``|K||α|`` the computed product of the
absolute values.  The ``5nη`` term is ORO's defect of TwoProduct under underflow (their §3).  Assumptions:
IEEE-754 binary64 arithmetic with round-to-nearest for + − ×, and conventional (not Strassen-like) sums in the
namespace's ``sum`` and ``@`` (any order).  The splitting overflows for entries ≥ 2⁹⁹⁵: then, and only then,
the product is the plain one with the classical bound γ_n·|K||α| + nη (still proven, not compensated).  A float32
K and a float32-valued α (converted exactly to float64) have exact float64 products (24 + 24 bits), so the
splitting is skipped.

**Proven duality gap** (:func:`proven_gap`).  For any dual point α′ = −s/λ (s given as floats) and g = Kα,

.. math::  P(\alpha) - D(\alpha') = \sum_i F_i(g_i, s_i) + \frac{\lambda}{2}(\alpha-\alpha')^\top K(\alpha-\alpha'),
           \qquad F_i = l(g_i, y_i) + l_i^*(s_i) - s_i g_i \ge 0

(the Fenchel–Young gaps; exact algebra).  Each Fᵢ is written as a sum of non-negative terms (hinge
(1−t)m₊ + t·m₋ with m = 1 − yg, t = λyα; squared (y − g − λα/2)²; squared hinge (m − t/2)² or t|m| + t²/4;
ε-insensitive (|r|−ε)(1−σ) + ε(|σ|−σ) or |σ|(ε−|r|) + |r|(|σ|−σ); logistic the sum of its four terms), so it is
computed to a small relative error; Fᵢ is convex in gᵢ, so its maximum over the enclosure g̃ᵢ ± δᵢ of the
compensated mat-vec is at an end point.  The last term is bounded by (λ/2)(Σ √Kᵢᵢ|dᵢ|)² (K ⪰ 0 ⇒
|Kᵢⱼ| ≤ √(KᵢᵢKⱼⱼ)), d = α − α′, which is O(u²) for the dual point α′ = α rounded into the dual domain.  The sum
is an upper bound on P(α) − P* (weak duality, K ⪰ 0).  Logistic uses exp, log and log1p: the bound assumes
they are accurate to 4 ulp (relative error ≤ 8u), as NumPy's loops are; the other losses use + − × only.

**Indefinite K** (``psd_margin`` = μ).  Floating-point Cholesky cannot prove a singular Gram PSD (a float XXᵀ
with d < n is, in exact arithmetic, usually slightly indefinite: αᵀKα = −311 was measured for the α of a
λ = 1e-9 hinge solve), so the PSD test proves only λ_min(K) > −μ, μ ≈ n·eps·‖K‖_F.  The identity above holds for
every symmetric K; with K + μI ⪰ 0 its last term is bounded by (λ/2)dᵀ(K + μI)d ≤ (λ/2)(Σ √(Kᵢᵢ + μ)|dᵢ|)², and
P(α) ≥ Σ l(f) − (λμ/2)‖α‖².  So for the GIVEN K: P(α) − D(α′) ≤ ``gap_upper`` and P(α) ≥ ``primal_low``, and
since P(α̂) ≥ D(α′) + (λ/2)(α̂ − α′)ᵀK(α̂ − α′) for every α̂ (Fenchel–Young),

.. math::  P(\alpha) - P(\hat\alpha) \le \mathrm{gap\_upper} + \frac{\lambda\mu}{2}\|\hat\alpha - \alpha'\|^2
           \quad\text{for every } \hat\alpha \in \mathbb R^n

(μ = 0: P(α) − P* ≤ gap_upper).  For an indefinite K the infimum P* of P over ℝⁿ is −∞ (the quadratic term
along a negative eigenvector wins), so no statement "P(α) − P* ≤ ε" can hold; the problem with K + μI in
place of K is not the one solved either (its optimum differs at first order in μ|α|, e.g. ~1e-6 on 1 700 MNIST
digits at λ = 0.1, so certifying α for it would fail every such solve).  μ = inf (nothing proven: the Lanczos
test, ``check_psd=False``, the Dask engine) ASSUMES K ⪰ 0 (μ = 0 in the formulas).
"""
from __future__ import annotations

import math

from .._lib.backend import device_of

U64 = 2.0 ** -53  # unit roundoff of binary64
ETA = 2.0 ** -1074  # smallest positive subnormal binary64
_SPLIT = 2.0 ** 27 + 1.0  # Veltkamp's factor for binary64
_SPLIT_MAX = 2.0 ** 995  # entries below this split without overflow
_BLOCK = 1 << 16  # entries per column block of the vectorised kernel (cache-sized temporaries)


def gamma(k, u=U64):
    """γ_k = k·u/(1 − k·u), rounded up (Python floats, then one relative ulp up)."""
    g = k * u / (1.0 - k * u)
    return g * (1.0 + 4.0 * u)


def up(x, k=4):
    """A float upper bound of a non-negative value computed with ≤ k roundings of relative size ≤ u each:
    x·(1 + 2(k+1)u) (x/(1 − γ_k) ≤ x(1 + 2ku) for ku ≤ 1/4, and the product's own rounding)."""
    return x * (1.0 + 2.0 * (k + 1) * U64)


def _split(a, xp):
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


def _two_product_err(a, b, a_hi, a_lo, b_hi, b_lo, h):
    """Dekker's error term of h = fl(a·b): a·b = h + err exactly (no underflow), ORO Alg. 3.3's order."""
    return a_lo * b_lo - (((h - a_hi * b_hi) - a_lo * b_hi) - a_hi * b_lo)


def _tree_sum(x, xp):
    """Σ over axis 0 of x by a pairwise tree of TwoSum: returns (S, E) with Σ x = S + (exact sum of the TwoSum
    errors), E the float sum of those errors (each level's errors summed by ``xp.sum``)."""
    E = None
    while x.shape[0] > 1:
        w = x.shape[0]
        m = w // 2
        a, b = x[:m, ...], x[m:2 * m, ...]
        s = a + b
        bb = s - a
        err = xp.sum((a - (s - bb)) + (b - bb), axis=0)
        E = err if E is None else E + err
        x = s if w == 2 * m else xp.concat([s, x[2 * m:, ...]], axis=0)
    S = x[0, ...]
    return S, (xp.zeros_like(S) if E is None else E)


def compensated_matvec(M, a, xp, *, exact_products=None, pair=False):
    r"""g = aᵀM (= Mᵀa; for a symmetric K and M = K, g = Kα) in float64 with a proven bound: (g, bound) with
    |gⱼ − Σᵢ aᵢMᵢⱼ| ≤ boundⱼ (real arithmetic on the given floats).

    M of shape (k, n) (any real float dtype, converted exactly to float64), a of shape (k,) float64.

    Proof.  With no overflow and the splitting safe (max|M|, max|a| < 2⁹⁹⁵): TwoProduct gives Mᵢⱼaᵢ = hᵢⱼ + eᵢⱼ
    exactly except for ≤ 5η per product under underflow (ORO 2005, §3); the TwoSum tree gives Σᵢ hᵢⱼ = Sⱼ + Σ
    (its errors) exactly (TwoSum is error-free for all finite floats).  |eᵢⱼ| ≤ u|hᵢⱼ|, and a TwoSum error is
    ≤ u·|its sum| ≤ u(1+u)^L·Σ|h| over its subtree, so the ≤ 2n error terms of column j have Σ|·| ≤
    u(1 + L(1+u)^L)Σᵢ|hᵢⱼ| ≤ u(1 + L(1+u)^L)(1+u)Aⱼ, Aⱼ = Σᵢ|Mᵢⱼ||aᵢ|; their float sum Eⱼ is off by ≤ γ_{2n}
    times that (any order); g = fl(S + E) is off from S + E by ≤ u|g|/(1 − u).  A ≤ (Â + nη)/(1 − γ_n) for the
    computed Â = fl(|M|ᵀ|a|).  The bound itself is evaluated in floats and rounded up (:func:`up`).

    ``pair=True``: returns (S, E, bound′) with |S + E − Σᵢ aᵢMᵢⱼ| ≤ bound′ⱼ (S + E in real arithmetic: the final
    rounding u|g| not yet committed), for a caller that sums several such pairs (the Dask engine's blocks).
    """
    k, n = M.shape
    if M.dtype != xp.float64:
        M = xp.astype(M, xp.float64)
    dev = device_of(M)
    if k == 0:
        z = xp.zeros((n,), dtype=xp.float64, device=dev)
        return (z, z, z) if pair else (z, z)
    absA = xp.abs(a) @ xp.abs(M)  # Â
    L = max(1, math.ceil(math.log2(k)))
    amax = float(xp.max(xp.abs(a)))
    mmax = float(xp.max(xp.abs(M)))
    c_prod = gamma(2 * k) * U64 * (1.0 + L * (1.0 + U64) ** L) * (1.0 + U64) / (1.0 - gamma(k))
    c_prod *= 1.0 + 8 * U64
    if not (amax < _SPLIT_MAX and mmax < _SPLIT_MAX):  # the splitting would overflow: the plain product, classical bound
        g = a @ M
        c = gamma(k) / (1.0 - gamma(k)) * (1.0 + 8 * U64)
        bound = up(c * absA + c * k * ETA + 2 * k * ETA, 4)
        return (g, xp.zeros_like(g), bound) if pair else (g, bound)
    if exact_products is None:
        exact_products = False
    if not exact_products:
        a_hi, a_lo = _split(a, xp)
        a_hi, a_lo = a_hi[:, None], a_lo[:, None]
    a2 = a[:, None]
    bs = max(1, _BLOCK // max(k, 1))
    parts_S, parts_E = [], []
    for j0 in range(0, n, bs):
        Mb = M[:, j0:min(j0 + bs, n)]
        h = Mb * a2
        S, E = _tree_sum(h, xp)
        if not exact_products:
            m_hi, m_lo = _split(Mb, xp)
            E = E + xp.sum(_two_product_err(Mb, a2, m_hi, m_lo, a_hi, a_lo, h), axis=0)
        parts_S.append(S)
        parts_E.append(E)
    S = parts_S[0] if len(parts_S) == 1 else xp.concat(parts_S)
    E = parts_E[0] if len(parts_E) == 1 else xp.concat(parts_E)
    if pair:
        return S, E, up(c_prod * (absA + k * ETA) + (5 * k + 16) * ETA, 4)
    g = S + E
    bound = (U64 / (1.0 - U64)) * xp.abs(g) + c_prod * (absA + k * ETA) + (5 * k + 16) * ETA
    return g, up(bound, 5)


# --------------------------------------------------------------------------- the proven duality gap


def _encl(c, r, xp):
    """Floats (lo, hi) with [c − r, c + r] ⊂ [lo, hi] (r ≥ 0 a bound computed in floats, rounded up first)."""
    r = up(r, 1)
    return xp.nextafter(c - r, xp.full_like(c, -math.inf)), xp.nextafter(c + r, xp.full_like(c, math.inf))


def _fy_hinge(m, t, xp):
    return up(xp.where(m >= 0, (1.0 - t) * m, t * (-m)), 2)


def _fy_squared_hinge(m, t, xp):
    q = m - t / 2
    return up(xp.where(m >= 0, q * q, t * (-m) + t * t / 4), 3)


def _fy_eps(r, w, eps, xp):
    rho = xp.abs(r)
    sigma = xp.where(r >= 0, w, -w)
    asg = xp.abs(sigma) - sigma  # exact: 0 or 2|σ|
    return up(xp.where(rho >= eps, (rho - eps) * (1.0 - sigma) + eps * asg,
                       xp.abs(sigma) * (eps - rho) + rho * asg), 4)


def _logistic_pieces(v, t, xp):
    """The four terms of the logistic Fenchel–Young gap at v = y·g: softplus(−v), t log t, (1−t) log(1−t), t·v."""
    A = xp.maximum(-v, 0.0) + xp.log1p(xp.exp(-xp.abs(v)))
    B = xp.where(t > 0, t * xp.log(xp.where(t > 0, t, 1.0)), 0.0)
    C = xp.where(t < 1, (1.0 - t) * xp.log1p(-xp.where(t < 1, t, 0.0)), 0.0)
    return A, B, C, t * v


def _fy_logistic(v, t, xp):
    A, B, C, D = _logistic_pieces(v, t, xp)
    err = 32 * U64 * (xp.abs(A) + xp.abs(B) + xp.abs(C) + xp.abs(D))  # 4-ulp libm (module docstring)
    return up(xp.maximum(A + B + C + D, 0.0) + err, 4)


def dual_point(alpha, y, loss, lam_sum, xp):
    """The dual point of the certificate as floats: t = λyα clipped to the domain of l* (hinge, logistic [0, 1];
    squared hinge [0, ∞)), or w = λα (squared; ε-insensitive clipped to [−1, 1]); α′ = y·t/λ or w/λ."""
    if loss.name in ("hinge", "logistic"):
        return xp.clip(lam_sum * (y * alpha), 0.0, 1.0)
    if loss.name == "squared_hinge":
        return xp.clip(lam_sum * (y * alpha), 0.0, None)
    w = lam_sum * alpha
    return xp.clip(w, -1.0, 1.0) if loss.name == "epsilon_insensitive" else w


_DOMAIN = {"hinge": (0.0, 1.0), "logistic": (0.0, 1.0), "squared_hinge": (0.0, math.inf),
           "epsilon_insensitive": (-1.0, 1.0), "squared": (-math.inf, math.inf)}


def sum_bound(x, xp):
    """A float R ≥ |Σᵢ xᵢ| (exact), R = 0 when the exact sum is 0 and the TwoSum tree commits no rounding.

    Proof: a pairwise tree of TwoSum (error-free for finite floats, Knuth) gives Σx = S + Σ(its errors) exactly;
    R = (|S| + Σ|errors| computed) rounded up (the float sums of ≤ n non-negative terms are within γ_n)."""
    n = x.shape[0]
    if n == 0:
        return 0.0
    abs_err, levels = 0.0, 0
    while x.shape[0] > 1:
        w = x.shape[0]
        m = w // 2
        a, b = x[:m], x[m:2 * m]
        s = a + b
        bb = s - a
        abs_err += float(xp.sum(xp.abs((a - (s - bb)) + (b - bb))))
        levels += 1
        x = s if w == 2 * m else xp.concat([s, x[2 * m:]], axis=0)
    S = abs(float(x[0]))
    if S == 0.0 and abs_err == 0.0:
        return 0.0
    return up((S + abs_err * (1.0 + gamma(n))) * (1.0 + gamma(n)), levels + 2)


def feasible_dual_point(t, y, loss, xp):
    r"""The dual point of the model with an intercept made exactly feasible (:func:`_shift_to_sum_zero`); where
    that finds no room (a solution with every point at an end of dom l*, whose float t is a rounding off that end:
    t = 1 − 2⁻⁵³ for a bound support vector), the same from t snapped to the ends it is within 2⁻³⁰ of.

    Returns (dt, ok) as :func:`_shift_to_sum_zero`, dt measured from the given t: the real point is
    τ′ = t_s − e·ρ·ω/Σω with t_s the snapped t, so |τ′ᵢ − tᵢ| ≤ |t_sᵢ − tᵢ| + ωᵢR/W (|t_s − t| is exact: Sterbenz's
    lemma for t ∈ [1/2, 2], or t itself for an end 0), rounded up for the one addition.  dt is None when no
    shift is needed."""
    dt, ok = _shift_to_sum_zero(t, y, loss, xp)
    if ok:
        return dt, ok
    lo, hi = _DOMAIN[loss.name]
    snapped = t
    for end in (lo, hi):
        if math.isfinite(end):
            near = xp.abs(t - end) <= 2.0 ** -30
            snapped = xp.where(near, xp.full_like(t, end), snapped)
    if not bool(xp.any(snapped != t)):
        return dt, ok
    dt2, ok2 = _shift_to_sum_zero(snapped, y, loss, xp)
    if not ok2:
        return None, False
    moved = xp.abs(snapped - t)
    return (moved if dt2 is None else up(moved + dt2, 2)), True


def _shift_to_sum_zero(t, y, loss, xp):
    r"""The dual point of the model with an intercept (f = Kα + b): the dual has the constraint Σα′ᵢ = 0, i.e.
    Σ eᵢτᵢ = 0 for τ = t (e = y; hinge, squared hinge, logistic) or τ = w (e = 1; squared, ε-insensitive).

    Returns (dt, ok): the REAL point τ′ = t − e·ρ·ω/Σω, ρ = Σ eᵢtᵢ (exact), ω = min(room, 1) (room = the float
    lower bound of the distance of tᵢ to the ends of dom l*), satisfies Σ eᵢτ′ᵢ = 0 exactly (e² = 1), and
    |τ′ᵢ − tᵢ| ≤ dtᵢ; it lies in dom l* when R ≤ W (R ≥ |ρ| by :func:`sum_bound`, W ≤ Σω the float sum
    rounded down), since then |τ′ᵢ − tᵢ| ≤ ωᵢ ≤ roomᵢ.  ``ok`` False: R > W (no room to restore Σ = 0 in the
    domain; no certificate from this t).  dt is None when R = 0 (t itself is feasible)."""
    e_t = y * t if loss.name in ("hinge", "squared_hinge", "logistic") else t
    R = sum_bound(e_t, xp)
    if R == 0.0:
        return None, True
    if not math.isfinite(R):
        return None, False
    lo, hi = _DOMAIN[loss.name]
    room_lo = t - lo if math.isfinite(lo) else xp.full_like(t, math.inf)
    room_hi = hi - t if math.isfinite(hi) else xp.full_like(t, math.inf)
    room = xp.minimum(room_lo, room_hi) * (1.0 - 2 * U64)  # each one rounding: a lower bound of the room
    omega = xp.minimum(room, 1.0)
    n = t.shape[0]
    W = float(xp.sum(omega)) * (1.0 - gamma(n)) * (1.0 - 2 * U64)
    if not R <= W:
        return None, False
    return up(omega * (R / W), 2), True


def _dual_box(t, dt, loss, xp):
    """Floats [t_lo, t_hi] ⊃ [t − dt, t + dt] ∩ dom l* (t itself where dt is None or 0)."""
    if dt is None:
        return t, t
    lo, hi = _DOMAIN[loss.name]
    t_lo = xp.where(dt > 0, xp.nextafter(t - dt, xp.full_like(t, -math.inf)), t)
    t_hi = xp.where(dt > 0, xp.nextafter(t + dt, xp.full_like(t, math.inf)), t)
    return xp.clip(t_lo, lo if math.isfinite(lo) else None, hi if math.isfinite(hi) else None), xp.clip(
        t_hi, lo if math.isfinite(lo) else None, hi if math.isfinite(hi) else None)


def dual_difference(alpha, y, loss, lam_sum, xp, dual_alpha=None):
    """dd = fl(α − e·fl(t/λ)), the float difference of α and the dual point of :func:`proven_gap` (t from
    ``dual_alpha`` or α), for a caller that computes K·dd with :func:`compensated_matvec` (``quad_product``)."""
    t = dual_point(alpha if dual_alpha is None else dual_alpha, y, loss, lam_sum, xp)
    q = t / lam_sum
    return alpha - y * q if loss.name in ("hinge", "squared_hinge", "logistic") else alpha - q


def down(x, k=4):
    """A float lower bound of a real value (of either sign) computed as the float x with ≤ k roundings of
    relative size ≤ u each: x shrunk towards −∞ by 2(k+1)u|x| (NaN stays NaN)."""
    return x - 2.0 * (k + 1) * U64 * abs(x)


def rounding_of(gap, upper):
    """The ``gap_rounding`` of a certificate: a float e with max(gap, 0) + e ≥ upper (rounded up, with 4u·upper
    to spare for the caller's own sum); NaN when gap or upper is NaN (Python's max(0.0, nan) is 0.0: a NaN
    must never read as a zero rounding, so the callers' finiteness test refuses it)."""
    if math.isnan(gap) or math.isnan(upper):
        return math.nan
    return max(0.0, upper - max(gap, 0.0)) * (1 + 4 * U64) + 4 * U64 * upper


def margin_used(psd_margin):
    """The μ the certificate accounts for: the proven ``psd_margin`` (λ_min(K) > −μ), or 0.0 where nothing is
    proven (inf: the certificate then ASSUMES K ⪰ 0, module docstring)."""
    mu = float(psd_margin)
    if math.isnan(mu) or mu < 0.0:
        raise ValueError(f"psd_margin must be >= 0 or inf; got {psd_margin!r}")
    return mu if math.isfinite(mu) else 0.0


def proven_gap(K, alpha, y, loss, lam_sum, xp, *, g=None, delta=None, support=True, b=None, dual_alpha=None,
               diag=None, quad_product=None, psd_margin=math.inf):
    r"""The certificate of α for eq. (7) with proven bounds (module docstring): a dict with

    ``g`` (compensated Kα) and ``delta`` (|g − Kα| ≤ delta), ``gap`` (Σ Fᵢ at g, the computed gap),
    ``gap_upper`` ≥ P(α) − D(α′) ≥ P(α) − P* (K ⪰ 0), ``primal`` (computed P(α)), ``primal_low`` ≤ P(α),
    ``dual`` (computed D(α′)).  α, y float64 (y = ±1 for the classification losses, exact), K any float dtype.
    ``support``: g from the rows of α's support only (K symmetric).  ``g``/``delta`` given: K is used for its
    diagonal only (or pass ``diag``, K's diagonal, and K=None).

    ``b`` (a float): the model with an intercept, P(α, b) = (λ/2)αᵀKα + Σ l((Kα)ᵢ + b): the same identity holds with
    f = g + b in place of g for every dual point with Σα′ᵢ = 0 (the term Σ sᵢb = −λbΣα′ᵢ vanishes), which is then a
    lower bound of min P(α, b) (the dual of the intercept model is that of (7) with the constraint Σα′ = 0, whose
    multiplier is b); α′ is :func:`feasible_dual_point`'s real point, within dt of the float t, and Fᵢ, convex in
    fᵢ and in τᵢ separately, is bounded by its maximum over the four corners of the box enclosure (a function
    convex in each variable of a box attains its maximum at a vertex).  ``dual_alpha``: take the float dual point
    from this vector instead of α (e.g. α projected onto {Σ = 0}).  A point that cannot be made feasible gives
    ``gap_upper`` = inf.  ``quad_product`` = (h, δh), a compensated K·dd (dd from :func:`dual_difference`): the
    term (λ/2)dᵀKd is then bounded through it (tight for any dual point), not by (λ/2)(Σ√Kᵢᵢ|dᵢ|)² (tight only
    for |d| = O(u), the dual point α rounded into dom l*).

    ``psd_margin`` = μ (what the PSD test proved: λ_min(K) > −μ; module docstring, "Indefinite K"): the bounds
    are made valid for the given K with K + μI ⪰ 0 — √(Kᵢᵢ + μ) in the bound of dᵀKd ≤ dᵀ(K + μI)d and
    αᵀKα ≥ −μ‖α‖² in ``primal_low``; μ = inf (nothing proven) ASSUMES K ⪰ 0 (μ = 0 in the formulas)."""
    mu = margin_used(psd_margin)
    n = alpha.shape[0]
    if g is None:
        if support:
            sv = xp.nonzero(alpha != 0)[0]
            if sv.shape[0] == n:
                M, a = K, alpha
            else:
                M, a = xp.take(K, sv, axis=0), xp.take(alpha, sv)
        else:
            M, a = K, alpha
        exact = K.dtype == xp.float32 and bool(xp.all(xp.astype(xp.astype(a, xp.float32), xp.float64) == a))
        g, delta = compensated_matvec(M, a, xp, exact_products=exact)
    name = loss.name
    t = dual_point(alpha if dual_alpha is None else dual_alpha, y, loss, lam_sum, xp)
    dt, feasible = None, True
    if b is None:
        f, delta_g = g, delta
    else:
        f = g + b  # |fl(g + b) − (g + b)| ≤ u|f|/(1 − u)
        delta_g, delta = delta, up(delta + U64 * xp.abs(f), 2)
        dt, feasible = feasible_dual_point(t, y, loss, xp)
    t_lo, t_hi = _dual_box(t, dt, loss, xp)
    if name in ("hinge", "squared_hinge", "logistic"):
        v = y * f  # exact: y = ±1
        if name == "logistic":
            lo, hi = _encl(v, delta, xp)
            fy = lambda e, tt: _fy_logistic(e, tt, xp)  # noqa: E731
            center = _fy_logistic(v, t, xp)
            A_hi = _logistic_pieces(hi, t, xp)[0]
            loss_low = A_hi * (1 - 32 * U64)  # softplus(−v) decreases in v
            loss_val = xp.logaddexp(xp.zeros_like(v), -v)
        else:
            m = 1.0 - v
            lo, hi = _encl(m, delta + 2 * U64 * xp.abs(m), xp)
            fm = _fy_hinge if name == "hinge" else _fy_squared_hinge
            fy = lambda e, tt: fm(e, tt, xp)  # noqa: E731
            center = fm(m, t, xp)
            mlow = xp.maximum(lo, 0.0)
            loss_low = mlow if name == "hinge" else mlow * mlow * (1 - 2 * U64)
            mp = xp.maximum(m, 0.0)
            loss_val = mp if name == "hinge" else mp * mp
        q = t / lam_sum
        dd = alpha - y * q
    else:
        w = t
        r0 = y - f
        if name == "squared":
            r = r0 - w / 2
            wide = 0.0 if dt is None else dt / 2  # r = y − f − w/2 is linear in w
            lo, hi = _encl(r, delta + 2 * U64 * (xp.abs(r0) + xp.abs(r)) + wide, xp)
            fy = lambda e, tt: up(e * e, 1)  # noqa: E731
            center = r * r
            lo0, hi0 = _encl(r0, delta + 2 * U64 * xp.abs(r0), xp)
            rmin = xp.maximum(xp.maximum(lo0, -hi0), 0.0)
            loss_low = rmin * rmin * (1 - 2 * U64)
            loss_val = r0 * r0
        else:
            eps = float(loss.epsilon)
            lo, hi = _encl(r0, delta + 2 * U64 * xp.abs(r0), xp)
            fy = lambda e, tt: _fy_eps(e, tt, eps, xp)  # noqa: E731
            center = _fy_eps(r0, w, eps, xp)
            rmin = xp.maximum(xp.maximum(lo, -hi), 0.0)
            loss_low = xp.maximum(rmin - eps, 0.0) * (1 - 2 * U64)
            loss_val = xp.maximum(xp.abs(r0) - eps, 0.0)
        q = w / lam_sum
        dd = alpha - q
    fy_up = xp.maximum(fy(lo, t_lo), fy(hi, t_lo))
    if dt is not None:  # the corners of the (f, τ) box
        fy_up = xp.maximum(fy_up, xp.maximum(fy(lo, t_hi), fy(hi, t_hi)))
    # |d| = |α − α′| ≤ (|fl(α − yq)| + u|q|)/(1 − u) (+ dt/λ); (λ/2)·dᵀKd ≤ (λ/2)·dᵀ(K + μI)d
    # ≤ (λ/2)(Σ √(Kᵢᵢ + μ)|dᵢ|)² (K + μI ⪰ 0 ⇒ |Kᵢⱼ + μδᵢⱼ| ≤ √((Kᵢᵢ + μ)(Kⱼⱼ + μ)))
    if diag is None:
        diag = xp.linalg.diagonal(K)
    diag = diag if diag.dtype == xp.float64 else xp.astype(diag, xp.float64)
    sq_up = up(xp.sqrt(up(xp.maximum(diag, 0.0) + mu, 1)), 1) if mu > 0 else up(xp.sqrt(xp.maximum(diag, 0.0)), 1)
    if quad_product is None:
        d_up = up(xp.abs(dd) + U64 * xp.abs(q), 3)
        if dt is not None:
            d_up = up(d_up + dt / lam_sum, 3)
        s_d = up(float(xp.sum(sq_up * d_up)), n + 1)
        quad = up(0.5 * lam_sum * s_d * s_d, 3)
    else:  # d = dd + ε, |ε| ≤ u(|dd| + |q|)(1 + 2u) (+ dt/λ); dᵀKd = ddᵀK dd + 2εᵀK dd + εᵀKε
        h, dh = quad_product  # compensated K·dd and its bound (dual_difference's dd)
        e_up = up(U64 * (xp.abs(dd) + xp.abs(q)), 3)
        if dt is not None:
            e_up = up(e_up + dt / lam_sum, 3)
        dh_terms = xp.abs(dd) * h
        main = float(xp.sum(dd * h)) + up(gamma(n + 1) * float(xp.sum(xp.abs(dh_terms)))
                                          + float(xp.sum(xp.abs(dd) * dh)), n + 2)
        cross = up(2.0 * float(xp.sum(e_up * (xp.abs(h) + dh))), n + 2)
        s_e = up(float(xp.sum(sq_up * e_up)), n + 1)
        quad = up(0.5 * lam_sum * max(up(main + cross + s_e * s_e, 3), 0.0), 3)
    eta_terms = 64.0 * n * ETA  # underflow of the ≤ ~8 products per coordinate (absolute η/2 each)
    gap_upper = up(float(xp.sum(fy_up)), n + 1) + quad + eta_terms
    gap_upper = up(gap_upper, 3) if feasible else math.inf
    gap = float(xp.sum(center))
    # P(α) = (λ/2)αᵀg + Σ l(f): computed, and a proven lower bound (the loss at the enclosure; αᵀKα ≥ the
    # enclosure of fl(Σαg), and ≥ −μ‖α‖² since K + μI ⪰ 0 — ≥ 0 for μ = 0)
    ag = float(xp.sum(alpha * g))
    primal = 0.5 * lam_sum * ag + float(xp.sum(loss_val))
    ag_err = up(float(xp.sum(xp.abs(alpha) * delta)) + gamma(n + 1) * float(xp.sum(xp.abs(alpha * g))), n + 3)
    quad_low = down(ag - ag_err, 1)
    floor = 0.0
    if mu > 0:  # −μ‖α‖², ‖α‖² = a²·Σ(α/a)² with a = max|α| (no overflow of the squares; each step rounded up)
        a_max = float(xp.max(xp.abs(alpha))) if n else 0.0
        if a_max > 0:
            floor = -up((mu * a_max) * a_max * float(xp.sum((alpha / a_max) ** 2)), n + 6)
    quad_low = quad_low if quad_low > floor else floor  # (a NaN quad_low gives the proven floor)
    reg_low = down(0.5 * lam_sum * quad_low, 2)
    loss_sum_low = float(xp.sum(loss_low)) * (1 - gamma(n + 2))
    primal_low = down(loss_sum_low + reg_low, 2)
    if math.isnan(loss_sum_low) or math.isnan(gap_upper) or math.isnan(gap):
        primal_low = math.nan  # never hidden by the callers' max(1, ·)
    elif mu == 0.0:
        primal_low = max(primal_low, 0.0)  # P ≥ 0 for K ⪰ 0 (proven, or assumed: psd_margin = inf)
    return {"g": g, "delta": delta_g, "gap": gap, "gap_upper": gap_upper, "primal": primal,
            "primal_low": primal_low, "t": t}


def certified(upper, primal_low, tol):
    """Whether a proven gap bound ``upper`` certifies tol: upper ≤ tol·max(1, primal_low) (rounded down, 4u); a
    NaN anywhere is False."""
    if math.isnan(upper) or math.isnan(primal_low):
        return False
    return upper <= tol * max(1.0, primal_low) * (1.0 - 4 * U64)


def hard_margin_gap(K, alpha, y, xp, *, g=None, delta=None):
    """The hard-margin certificate with a proven bound: gap = αᵀKα − yᵀα = Σ τᵢ(vᵢ − 1), τ = yα ≥ 0 (the dual
    point α itself; infeasible ⇒ inf), v = y·Kα.  Returns (g, gap computed, proven upper bound of the gap).
    ``g``/``delta`` given (a compensated Kα and its bound, e.g. from the Dask engine): K is not used."""
    n = alpha.shape[0]
    if g is None:
        sv = xp.nonzero(alpha != 0)[0]
        M, a = (K, alpha) if sv.shape[0] == n else (xp.take(K, sv, axis=0), xp.take(alpha, sv))
        exact = K.dtype == xp.float32 and bool(xp.all(xp.astype(xp.astype(a, xp.float32), xp.float64) == a))
        g, delta = compensated_matvec(M, a, xp, exact_products=exact)
    tau = y * alpha
    if not bool(xp.all(tau >= 0)):
        return g, math.inf, math.inf
    v = y * g
    _, v_hi = _encl(v, delta, xp)
    terms = tau * (v_hi - 1.0)  # τ(v − 1) is increasing in v
    s = float(xp.sum(terms))
    mag = float(xp.sum(xp.abs(terms)))
    upper = s + up(gamma(n + 3) * mag + 2 * U64 * abs(s), 3) + 8.0 * n * ETA
    return g, float(xp.sum(tau * (v - 1.0))), upper
