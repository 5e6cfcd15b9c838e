"""Seed 003, Chapter 3: dynamics-preserving adversarial winning tickets (AWT) and the toy example of Table 3.1.

Three experiments; data and initial weights are drawn on the host (NumPy), the solvers, searches and trainings run
on the backend of ``NTKREF_BACKEND``/``NTKREF_DEVICE`` (``validation.common.on_backend``), and the closed forms of
Table 3.1 are evaluated on host copies (``host``):

A. **Table 3.1, analytic.**  (3.15) evaluated at the table's own cosines with the p_m term, ℓ2 attack.  ε is not
   stated in the dissertation: the **Bayes entry calibrates it** (0.843 ± 5e-4 ⇔ ε ∈ [1.9967, 2.0008]; the round
   value ε = 2 is used), so the Bayes entry is not a check; the SVM and AWT "Robustness" entries are the checks
   (to the printed rounding 5e-4 plus the effect of the cosines' and ε's rounding).  The Adv.Tr. entry (0.823)
   and the "Accuracy" row of Adv.Tr./AWT are not the analytic values at the printed cosines (seed discrepancies,
   reported as claims that hold iff the difference exceeds that same rounding tolerance).
B. **Table 3.1, empirical.**  n × 100 Gaussian-mixture sample (‖μ‖ = 3, σ = 1; n = 5000 full, 2000 quick): the
   SVM direction (hinge, C = 1, exact dual), dense adversarial training of θ·x (exact ℓ2 inner maximisation of
   the squared loss, ε = 2), and AWT: a 10 % mask (10 coordinates) found by minimising (3.20) for the linear
   model at a random θ₀ ~ N(0, I) (relaxed mask search, γ = 1, on the first 500 (full) / 300 (quick) points),
   then sparse adversarial training on the mask.  Algorithm 2 as printed (magnitude re-masking) and a random
   10 % mask are reported next to it.  Whether each search keeps the signal coordinate x₁ is repeated over 20
   (full) / 10 (quick) draws of θ₀ (one-sided exact sign test on the paired outcomes).  Angles are loose
   targets (they depend on the sample and on unstated hyper-parameters): SVM angle in [0.4, 0.7], AWT angle <
   SVM angle.  The analytic robust accuracy of the AWT direction is checked against an exact ℓ2 attack on a
   fresh sample (Monte Carlo, 20 000 quick / 200 000 full points).
C. **End to end with a ReLU net.**  A one-hidden-layer ReLU net (NTK parameterisation) on a 20-dimensional
   Gaussian mixture: dense adversarial training (logistic loss, ℓ2 PGD, ε = 1) against the AWT sparse net
   (relaxed search of (3.13), then adversarial training of f_{m⊙θ₀} from θ₀ with the same budget), the
   magnitude mask (the search's starting point) and random masks of the same density; natural and PGD robust
   test accuracy, and robust accuracy against density (figure).  Claims compare nets by the paired difference
   of per-test-point robust outcomes (SE = sd/√n_test).  Table 3.2's central statement — AWT close to the
   dense net (87.51 vs 91.14 % robust at 8.7 % density, a gap of 3.63 points) — is **not reproduced here**
   (documented difference; e.g. quick: 0.78 vs 0.97 at 10 %): with the deviations below (in particular plain GD
   with a fixed 200-step budget for a sparse net trained from θ₀, γ = 1, a width-64 net on synthetic data) the
   10 % ticket stays well below the dense net; its rise with density is checked.  The AWT-vs-random comparison
   at 10 % (the seed's Fig. 3.5/3.7 statement for low densities) holds in quick mode (2 masks, 0.78 vs 0.55) but
   not in the full run (documented difference): of 3 random masks, one (seed 2) trains to 0.974 robust accuracy,
   above the ticket's 0.789, so the mean advantage (+0.09) is within 2 SE once the mask-to-mask spread is
   counted.  At 30 % random masks match the ticket, as the seed itself reports for densities above 0.2.

Deviations from the seed's stated settings (§3.4, §3.7 "Configuration"):
- data: synthetic Gaussian mixtures (B: d = 100, ‖μ‖ = 3 as in Table 3.1; C: d = 20) instead of MNIST /
  CIFAR-10 for the Table 3.2 / Fig. 3.3 experiments; C uses 1000 training and 1000 (quick) / 4000 (full) test
  points;
- network (C): one hidden layer of width 64, NTK parameterisation (the seed's MLP architecture is not stated);
- attack: ℓ2 with ε = 2 (B, calibrated) / ε = 1 (C) instead of ℓ∞ with ε = 0.3 (MNIST); PGD-5 (step 2.5ε/5)
  in phase two and in the search, PGD-20 (step 2.5ε/20) at test, instead of 100 test iterations with step
  2.5ε/100; the linear-model search of B uses FGSM;
- kernel-distance weight γ = 1 instead of 1e-3;
- optimiser: full-batch gradient descent, lr 1.0, 200 steps (phase two) and the relaxed search's 30 (C) /
  20–40 (B) steps on 128 (C) / 300–500 (B) points, instead of Adam (lr 5e-4 phase one, 1e-3 phase two,
  batch 64, 20 and 100 epochs);
- densities (C): 0.03, 0.1, 0.3 (full) / 0.1, 0.3 (quick; magnitude and random baselines at 0.1 only) instead
  of 1.8 %, 3.6 %, 8.7 %, 16.9 %, 51.3 %;
- Table 3.1's training procedures for SVM / Adv.Tr. / AWT are not stated: exact dual SVM (C = 1) and exact
  adversarial training of the linear model are used.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ntkref import adversarial as adv
from ntkref import sparsity as sp
from ntkref.nets import FullyConnected

from .common import HOST, Claim, Section, host, on_backend

# Table 3.1 as printed: (Accuracy, Angle, Cosine, Robustness)
PAPER_T31 = {"Bayes": (0.999, 0.0, 1.0, 0.843), "SVM": (0.995, 0.555, 0.850, 0.714),
             "Adv.Tr.": (0.995, 0.202, 0.980, 0.823), "AWT": (0.995, 0.118, 0.993, 0.838)}
EPS_T31 = 2.0


def _unit_with_cos(c, d=100):
    return np.r_[c, math.sqrt(max(0.0, 1.0 - c * c)), np.zeros(d - 2)]


ROUND_T31 = 5e-4  # half a unit of Table 3.1's last printed digit


def _robustness(cos, eps):
    """(3.15) with p_m at a unit direction of cosine ``cos`` to μ = 3e₁ (σ = 1, ℓ2 attack of radius ε)."""
    return float(sp.linear_gmm_adversarial_accuracy(_unit_with_cos(min(cos, 1.0)), np.r_[3.0, np.zeros(99)], 1.0,
                                                    eps))


def _calibrated_eps_interval():
    """The ε for which (3.15) at the Bayes direction gives Table 3.1's 0.843 ± 5e-4 (decreasing in ε)."""
    from scipy.optimize import brentq  # host-side root finder on a scalar function

    target = PAPER_T31["Bayes"][3]
    hi = brentq(lambda e: _robustness(1.0, e) - (target - ROUND_T31), 0.5, 3.0)
    lo = brentq(lambda e: _robustness(1.0, e) - (target + ROUND_T31), 0.5, 3.0)
    return lo, hi


def _rounding_tolerance(fn, cos, eps_range):
    """Printed rounding (5e-4) plus the largest change of ``fn(cos, ε)`` when the printed cosine moves by its own
    rounding (±5e-4) and ε over the calibrated interval: a printed entry differs from the analytic value only if
    the gap exceeds this."""
    ref = fn(cos, EPS_T31)
    moves = [abs(fn(cos + dc, e) - ref) for dc in (-ROUND_T31, 0.0, ROUND_T31) for e in (*eps_range, EPS_T31)]
    return ROUND_T31 + max(moves)


def _table31_analytic():
    mu = np.r_[3.0, np.zeros(99)]
    rows = {}
    for name, (acc, ang, cos, rob) in PAPER_T31.items():
        th = _unit_with_cos(cos)
        rows[name] = {
            "paper_accuracy": acc, "paper_angle": ang, "paper_cosine": cos, "paper_robustness": rob,
            "arccos_of_cosine": math.acos(cos),
            "natural_accuracy": float(sp.linear_gmm_accuracy(th, mu)),
            "robustness_with_pm": float(sp.linear_gmm_adversarial_accuracy(th, mu, 1.0, EPS_T31)),
            "robust_accuracy": float(sp.linear_gmm_adversarial_accuracy(th, mu, 1.0, EPS_T31, include_pm=False)),
        }
    return rows


def _direction_row(theta, mu, eps):
    """Angle, cosine and the closed forms (3.15) of a direction, evaluated on host copies of ``theta`` and ``mu``."""
    theta, mu = host(theta), host(mu)
    if not np.any(theta != 0):
        # exact adversarial training on a support without the signal coordinate can give θ* = 0 exactly (certified
        # by adversarial_linear_direction's duality gap): the zero classifier has no direction, angle undefined
        nan = float("nan")
        return {"angle": nan, "cosine": nan, "natural_accuracy": nan, "robustness_with_pm": nan,
                "robust_accuracy": nan, "nonzeros": 0}
    return {"angle": float(sp.direction_angle(theta, mu)),
            "cosine": float(theta @ mu / (np.linalg.norm(theta) * np.linalg.norm(mu))),
            "natural_accuracy": float(sp.linear_gmm_accuracy(theta, mu)),
            "robustness_with_pm": float(sp.linear_gmm_adversarial_accuracy(theta, mu, 1.0, eps)),
            "robust_accuracy": float(sp.linear_gmm_adversarial_accuracy(theta, mu, 1.0, eps, include_pm=False)),
            "nonzeros": int(np.count_nonzero(theta))}


def _table31_empirical(cfg, log):
    n, d, eps = cfg["n"], 100, EPS_T31
    x, y, mu = on_backend(sp.gaussian_mixture(n, d, seed=cfg["seed"], xp=HOST))  # host draw, then moved
    out = {}
    t = time.perf_counter()
    out["Bayes"] = _direction_row(mu, mu, eps)
    theta_svm = sp.svm_direction(x, y, C=cfg["svm_C"])
    out["SVM"] = _direction_row(theta_svm, mu, eps)
    log(f"  SVM (C = {cfg['svm_C']}, n = {n}): angle {out['SVM']['angle']:.3f}  ({time.perf_counter() - t:.1f} s)")
    theta_at = sp.adversarial_linear_direction(x, y, eps)
    out["Adv.Tr."] = _direction_row(theta_at, mu, eps)
    model = sp.LinearModel(d)
    p0 = on_backend(model.init(cfg["seed"] + 1, xp=HOST))
    xs, ys = x[:cfg["search_n"], :], y[:cfg["search_n"]]
    search_kw = dict(eps=eps, gamma=cfg["gamma"], norm="l2", attack="fgsm", mask_every=5)
    masks = {}
    res = sp.awt_search(model, p0, xs, ys, 0.1, method="relaxed", steps=cfg["search_steps"], **search_kw)
    masks["AWT"] = res.mask[0][:, 0]
    res2 = sp.awt_search(model, p0, xs, ys, 0.1, method="algorithm2", steps=cfg["search_steps"], lr=0.05,
                         **search_kw)
    masks["AWT (Algorithm 2)"] = res2.mask[0][:, 0]
    masks["random 10 %"] = sp.random_mask(p0, 0.1, cfg["seed"] + 2)[0][:, 0]
    objectives = {"AWT": float(res.objective.total), "AWT (Algorithm 2)": float(res2.objective.total)}
    for name, m in masks.items():
        theta = host(sp.adversarial_linear_direction(x, y, eps, mask=m))
        row = _direction_row(theta, mu, eps)
        row["keeps_signal_coordinate"] = bool(m[0] == 1)
        row["awt_objective"] = objectives.get(name, float(sp.linear_awt_objective(p0[0][0][:, 0], m, xs, ys, eps=eps,
                                                                                   gamma=cfg["gamma"]).total))
        out[name] = row
        if name == "AWT":
            # Monte Carlo check of (3.15) for this direction: exact ℓ2 attack on a fresh sample
            xt, yt, _ = sp.gaussian_mixture(cfg["mc_n"], d, seed=cfg["seed"] + 7, xp=HOST)
            xa = xt - eps * yt[:, None] * theta[None, :] / np.linalg.norm(theta)
            mc = float(np.mean(yt * (xa @ theta) > 0))
            se = math.sqrt(row["robust_accuracy"] * (1 - row["robust_accuracy"]) / cfg["mc_n"])
            row["mc_robust_accuracy"], row["mc_se"] = mc, se
    log(f"  AWT mask {np.flatnonzero(host(masks['AWT'])).tolist()}, Algorithm-2 mask "
        f"{np.flatnonzero(host(masks['AWT (Algorithm 2)'])).tolist()}  ({time.perf_counter() - t:.1f} s)")
    # does each search keep x₁?  repeated over independent θ₀ (the single draw above is one Bernoulli outcome)
    keeps = []
    for s in cfg["keep_seeds"]:
        q0 = on_backend(model.init(1000 + s, xp=HOST))
        r1 = sp.awt_search(model, q0, xs, ys, 0.1, method="relaxed", steps=cfg["search_steps"], **search_kw)
        r2 = sp.awt_search(model, q0, xs, ys, 0.1, method="algorithm2", steps=cfg["search_steps"], lr=0.05,
                           **search_kw)
        keeps.append((bool(r1.mask[0][0, 0] == 1), bool(r2.mask[0][0, 0] == 1)))
    out["_keeps"] = keeps
    log(f"  keeps x₁ over {len(keeps)} θ₀: relaxed {sum(k[0] for k in keeps)}, Algorithm 2 "
        f"{sum(k[1] for k in keeps)}  ({time.perf_counter() - t:.1f} s)")
    return out


def _mlp_tickets(cfg, log):
    d, eps = cfg["d"], cfg["eps"]
    x, y, mu = on_backend(sp.gaussian_mixture(cfg["n_train"], d, seed=10, xp=HOST))  # host draws, then moved
    xt, yt_h, _ = sp.gaussian_mixture(cfg["n_test"], d, seed=11, xp=HOST)
    xt, yt = on_backend((xt, yt_h))
    net = FullyConnected(d, cfg["width"], depth=1)
    p0 = on_backend(net.init(0, xp=HOST))
    train_kw = dict(eps=eps, lr=cfg["lr"], steps=cfg["steps"], norm="l2", attack_steps=cfg["attack_steps"])
    search_kw = dict(eps=eps, gamma=cfg["gamma"], norm="l2", attack_steps=cfg["attack_steps"])
    xs, ys = x[:cfg["search_n"], :], y[:cfg["search_n"]]

    def evaluate(params, mask):
        pe = params if mask is None else sp.apply_mask(params, mask)
        nat = float(np.mean(np.sign(host(net.apply(pe, xt))) == yt_h))
        g = adv.loss_input_gradient(net, pe, "logistic")
        xa = adv.pgd(g, xt, yt, eps=eps, step_size=2.5 * eps / 20, steps=20, norm="l2")
        robust_points = (np.sign(host(net.apply(pe, xa))) == yt_h).astype(float)
        points["last"] = robust_points
        return nat, float(np.mean(robust_points))

    def train_eval(mask):
        params = sp.masked_adversarial_training(net, p0, mask, x, y, "logistic", **train_kw)
        return evaluate(params, mask)

    points = {}  # "last": per-test-point PGD outcomes (1 = robust) of the latest evaluation

    t = time.perf_counter()
    dense = train_eval(None)
    dense_points = points["last"]
    log(f"  dense AT: natural {dense[0]:.3f}, robust {dense[1]:.3f}  ({time.perf_counter() - t:.1f} s)")
    rows = []
    for density in log.progress(cfg["densities"], "AWT densities", unit="density"):
        row = {"density": density}
        res = sp.awt_search(net, p0, xs, ys, density, method="relaxed", steps=cfg["search_steps"], mask_every=5,
                            **search_kw)
        row["awt_objective"] = float(res.objective.total)
        row["awt_natural"], row["awt_robust"] = train_eval(res.mask)
        row["_awt_points"] = points["last"]
        rows.append(row)
        if density not in cfg["baseline_densities"]:
            log(f"  density {density}: AWT obj {row['awt_objective']:.3f}, robust AWT {row['awt_robust']:.3f}  "
                f"({time.perf_counter() - t:.1f} s)")
            continue
        mm = sp.magnitude_mask(p0, density)
        row["magnitude_objective"] = float(sp.awt_objective(net, p0, mm, xs, ys, **search_kw).total)
        row["magnitude_natural"], row["magnitude_robust"] = train_eval(mm)
        if cfg["algorithm2"] and abs(density - 0.1) < 1e-12:
            res2 = sp.awt_search(net, p0, xs, ys, density, method="algorithm2", steps=cfg["search_steps"],
                                 mask_every=5, lr=0.05, **search_kw)
            row["alg2_objective"] = float(res2.objective.total)
            row["alg2_natural"], row["alg2_robust"] = train_eval(res2.mask)
        robj, rnat, rrob, rpts = [], [], [], []
        for s in cfg["random_seeds"]:
            rm = sp.random_mask(p0, density, 100 + s)
            robj.append(float(sp.awt_objective(net, p0, rm, xs, ys, **search_kw).total))
            nat, rob = train_eval(rm)
            rnat.append(nat)
            rrob.append(rob)
            rpts.append(points["last"])
        row.update(random_objective=robj, random_natural=rnat, random_robust=rrob,
                   _random_points=np.mean(rpts, axis=0))
        log(f"  density {density}: AWT obj {row['awt_objective']:.3f} (random min {min(robj):.3f}), robust AWT "
            f"{row['awt_robust']:.3f} / magnitude {row['magnitude_robust']:.3f} / random mean {np.mean(rrob):.3f}  "
            f"({time.perf_counter() - t:.1f} s)")
    return {"dense_natural": dense[0], "dense_robust": dense[1], "rows": rows, "_dense_points": dense_points}


def _paired(a, b):
    """Mean and SE (sd/√n) of the per-test-point difference a − b."""
    d = np.asarray(a, float) - np.asarray(b, float)
    return float(np.mean(d)), float(np.std(d, ddof=1) / math.sqrt(d.size))


def _sign_test_p(wins, losses):
    """One-sided exact sign test: P(Bin(wins + losses, ½) ≥ wins)."""
    n = wins + losses
    return sum(math.comb(n, k) for k in range(wins, n + 1)) / 2.0**n if n else 1.0


def run(log, plt=None, outdir=None, *, quick=False):
    t0 = time.perf_counter()
    cfg_b = dict(n=2000 if quick else 5000, seed=0, svm_C=1.0, gamma=1.0, search_n=300 if quick else 500,
                 search_steps=20 if quick else 40, mc_n=20_000 if quick else 200_000,
                 keep_seeds=tuple(range(10 if quick else 20)))
    cfg_c = dict(d=20, eps=1.0, width=64, lr=1.0, gamma=1.0, attack_steps=5,
                 n_train=1000, n_test=1000 if quick else 4000, steps=200,
                 search_n=128, search_steps=30,
                 densities=(0.1, 0.3) if quick else (0.03, 0.1, 0.3), baseline_densities=(0.1,) if quick else
                 (0.03, 0.1, 0.3), random_seeds=(0, 1) if quick else (0, 1, 2),
                 algorithm2=not quick)
    claims, lines = [], []
    S = "seed003 Ch. 3"

    log("seed003 Table 3.1 (analytic, ε = 2, ℓ2, p_m included)")
    a = _table31_analytic()
    eps_lo, eps_hi = _calibrated_eps_interval()
    assert eps_lo <= EPS_T31 <= eps_hi, (eps_lo, eps_hi)  # the round ε used is one the Bayes entry allows
    tol = {k: _rounding_tolerance(_robustness, PAPER_T31[k][2], (eps_lo, eps_hi)) for k in ("SVM", "Adv.Tr.", "AWT")}
    ok = [k for k in ("SVM", "AWT") if abs(a[k]["robustness_with_pm"] - a[k]["paper_robustness"]) <= tol[k]]
    claims.append(Claim(S, "Table 3.1 Robustness of SVM and AWT = (3.15) at the printed cosines (ℓ2, p_m included) "
                        f"with ε calibrated on the Bayes entry (ε ∈ [{eps_lo:.4f}, {eps_hi:.4f}], ε = 2 used), to the "
                        "printed rounding", len(ok) == 2,
                        ", ".join(f"{k}: {a[k]['robustness_with_pm']:.4f} vs {a[k]['paper_robustness']} "
                                  f"(|Δ| {abs(a[k]['robustness_with_pm'] - a[k]['paper_robustness']):.1e}, tol "
                                  f"{tol[k]:.1e})" for k in ("SVM", "AWT"))
                        + f"; Bayes (calibrates ε, not a check): {a['Bayes']['robustness_with_pm']:.4f}"))
    at = a["Adv.Tr."]
    at_gap = abs(at["robustness_with_pm"] - at["paper_robustness"])
    at_printed_angle = _robustness(math.cos(at["paper_angle"]), EPS_T31)
    claims.append(Claim(S, "Seed discrepancy reproduced: Table 3.1's Adv.Tr. Robustness 0.823 is not (3.15) at its "
                        "cosine 0.980 (the gap exceeds the printed rounding + the effect of rounding the cosine and ε)",
                        at_gap > tol["Adv.Tr."],
                        f"analytic {at['robustness_with_pm']:.4f}, printed {at['paper_robustness']}: |Δ| {at_gap:.1e} vs "
                        f"tol {tol['Adv.Tr.']:.1e}; at the printed angle 0.202 (cos {math.cos(at['paper_angle']):.4f}) "
                        f"(3.15) = {at_printed_angle:.4f}"))

    def acc(c, e):
        return float(sp.linear_gmm_accuracy(_unit_with_cos(min(c, 1.0)), np.r_[3.0, np.zeros(99)]))

    acc_tol = {k: _rounding_tolerance(acc, PAPER_T31[k][2], (eps_lo, eps_hi)) for k in ("Adv.Tr.", "AWT")}
    acc_mismatch = [k for k in ("Adv.Tr.", "AWT") if abs(a[k]["natural_accuracy"] - a[k]["paper_accuracy"]) > acc_tol[k]]
    claims.append(Claim(S, "Seed discrepancy reproduced: Table 3.1's Accuracy 0.995 for Adv.Tr./AWT is not "
                        "Φ(‖μ‖cos γ/σ) at the printed cosines (gap > printed rounding + cosine rounding)",
                        len(acc_mismatch) == 2,
                        ", ".join(f"{k}: Φ = {a[k]['natural_accuracy']:.4f}" for k in PAPER_T31)
                        + "; tol " + ", ".join(f"{k} {v:.1e}" for k, v in acc_tol.items())))

    log(f"seed003 Table 3.1 (empirical, n = {cfg_b['n']}, d = 100)")
    b = _table31_empirical(cfg_b, log)
    keeps = b.pop("_keeps")
    claims.append(Claim(S, "SVM deflection angle in [0.4, 0.7] (paper 0.555)", 0.4 <= b["SVM"]["angle"] <= 0.7,
                        f"angle {b['SVM']['angle']:.3f}"))
    claims.append(Claim(S, "AWT angle < SVM angle and AWT robustness ≥ SVM robustness",
                        b["AWT"]["angle"] < b["SVM"]["angle"]
                        and b["AWT"]["robustness_with_pm"] >= b["SVM"]["robustness_with_pm"],
                        f"angles {b['AWT']['angle']:.3f} < {b['SVM']['angle']:.3f}; robustness "
                        f"{b['AWT']['robustness_with_pm']:.4f} vs {b['SVM']['robustness_with_pm']:.4f}"))
    claims.append(Claim(S, "AWT with 10 % of the weights is as robust as dense adversarial training (within 0.01)",
                        b["AWT"]["robustness_with_pm"] >= b["Adv.Tr."]["robustness_with_pm"] - 0.01,
                        f"AWT {b['AWT']['robustness_with_pm']:.4f}, Adv.Tr. {b['Adv.Tr.']['robustness_with_pm']:.4f}"))
    claims.append(Claim(S, "(3.15) agrees with an exact ℓ2 attack on a fresh sample (AWT direction, 5 SE)",
                        abs(b["AWT"]["mc_robust_accuracy"] - b["AWT"]["robust_accuracy"]) < 5 * b["AWT"]["mc_se"],
                        f"MC {b['AWT']['mc_robust_accuracy']:.4f} vs analytic {b['AWT']['robust_accuracy']:.4f} "
                        f"(SE {b['AWT']['mc_se']:.4f})"))
    wins = sum(r and not g for r, g in keeps)  # relaxed keeps x₁, Algorithm 2 does not
    losses = sum(g and not r for r, g in keeps)
    p_sign = _sign_test_p(wins, losses)
    claims.append(Claim(S, "Finding: for the linear model Algorithm 2 as printed (magnitude re-masking; ∇_w of the "
                        "kernel distance is 0) keeps the signal coordinate x₁ less often than the relaxed search "
                        f"(over {len(keeps)} draws of θ₀; one-sided exact sign test on the paired outcomes, p < 0.05)",
                        p_sign < 0.05,
                        f"keeps x₁: relaxed {sum(r for r, _ in keeps)}/{len(keeps)}, Algorithm 2 "
                        f"{sum(g for _, g in keeps)}/{len(keeps)}; discordant pairs {wins} vs {losses}, p = {p_sign:.2g} "
                        f"(table's θ₀: relaxed {b['AWT']['keeps_signal_coordinate']}, Algorithm 2 "
                        f"{b['AWT (Algorithm 2)']['keeps_signal_coordinate']})"))

    log(f"seed003 AWT end to end (ReLU net, d = {cfg_c['d']}, width {cfg_c['width']}, densities {cfg_c['densities']})")
    c = _mlp_tickets(cfg_c, log)
    dense_pts = c.pop("_dense_points")
    row10 = next(r for r in c["rows"] if abs(r["density"] - 0.1) < 1e-12)
    dm, se_pts = _paired(row10["_awt_points"], row10["_random_points"])
    # two sources of noise: the test points (paired SE) and the draw of the random masks (their spread / √k)
    se_masks = float(np.std(row10["random_robust"], ddof=1) / math.sqrt(len(row10["random_robust"])))
    se = math.hypot(se_pts, se_masks)
    claims.append(Claim(S, "At 10 % density the AWT sparse net is more robust (PGD) than random sparse nets of the "
                        "same density (their mean) after the same adversarial training, by more than 2 SE (test "
                        "points and mask draws)", dm - 2 * se > 0,
                        f"AWT {row10['awt_robust']:.3f}, random {', '.join(f'{v:.3f}' for v in row10['random_robust'])}: "
                        f"Δ = {dm:+.3f} ± {se:.3f} (test-point SE {se_pts:.3f}, mask SE {se_masks:.3f}); dense "
                        f"{c['dense_robust']:.3f}.  Documented: in the full run (3 masks) one random mask trains to "
                        "dense-level robustness and the advantage is not significant at the mask level",
                        known_difference=True))
    steps = [(r0["density"], r1["density"], *_paired(r1["_awt_points"], r0["_awt_points"]))
             for r0, r1 in zip(c["rows"], c["rows"][1:])]
    lo_hi = _paired(c["rows"][-1]["_awt_points"], c["rows"][0]["_awt_points"])
    claims.append(Claim(S, "Table 3.2 trend: the AWT net's robust accuracy rises with density (highest vs lowest "
                        "density by more than 2 paired SE, no step down by more than 2 SE)",
                        lo_hi[0] - 2 * lo_hi[1] > 0 and all(d_ + 2 * e_ > 0 for *_, d_, e_ in steps),
                        ", ".join(f"{r['density']}: {r['awt_robust']:.3f}" for r in c["rows"]) + "; steps "
                        + ", ".join(f"{d0}→{d1}: {d_:+.3f} ± {e_:.3f}" for d0, d1, d_, e_ in steps)
                        + f"; dense {c['dense_robust']:.3f}"))
    gap_dm, gap_se = _paired(dense_pts, row10["_awt_points"])
    paper_gap = (91.14 - 87.51) / 100  # Table 3.2: dense vs AWT at 8.7 % density
    claims.append(Claim(S, f"Table 3.2: at ≈ 10 % density the AWT net's robust accuracy is within the paper's gap "
                        f"({100 * paper_gap:.2f} points at 8.7 %) of the dense adversarially trained net (+ 2 paired SE)",
                        gap_dm <= paper_gap + 2 * gap_se,
                        f"dense {c['dense_robust']:.3f} − AWT {row10['awt_robust']:.3f} = {gap_dm:.3f} ± {gap_se:.3f} "
                        f"(paper 91.14 − 87.51 %); not reproduced with the module's deviations (plain GD, 200 steps, "
                        "γ = 1, width 64, synthetic data, ℓ2)", known_difference=True))
    for r in c["rows"]:
        r.pop("_awt_points", None)
        r.pop("_random_points", None)
    sanity = [f"{r['density']}: {r['awt_objective']:.3f} vs random ≥ {min(r['random_objective']):.3f}"
              for r in c["rows"] if "random_objective" in r]

    # ------------------------------------------------------------------ markdown
    lines += ["### Table 3.1 — analytic (3.15) at the printed cosines, ε = 2 (ℓ2)", "",
              f"ε is not stated in the seed: the Bayes entry 0.843 (± 5e-4) calibrates it to ε ∈ [{eps_lo:.4f}, "
              f"{eps_hi:.4f}] (ε = 2 used), so the Bayes row is not a check; SVM and AWT are the checks.  A printed "
              "entry counts as differing from (3.15) only if the gap exceeds 5e-4 plus the change of (3.15) when the "
              "printed cosine moves by ±5e-4 and ε over the calibrated interval.", "",
              "| | paper Accuracy | Φ(3 cos γ) | paper Angle | arccos(Cosine) | paper Robustness | p_m + Φ(3cos γ − 2) | Φ(3cos γ − 2) |",
              "|---|---|---|---|---|---|---|---|"]
    for k, r in a.items():
        lines.append(f"| {k} | {r['paper_accuracy']} | {r['natural_accuracy']:.4f} | {r['paper_angle']} | "
                     f"{r['arccos_of_cosine']:.4f} | {r['paper_robustness']} | {r['robustness_with_pm']:.4f} | "
                     f"{r['robust_accuracy']:.4f} |")
    lines += ["", "Note: the seed's claim that p_adv-acc (with p_m) is maximal at θ = μ is false (θ = −μ gives "
              "Φ(3) + Φ(−5) ≈ 0.9987: misclassified points count as robust); the robust accuracy Φ(·) without p_m is "
              "maximal at θ ∥ μ.", "",
              f"### Table 3.1 — empirical (n = {cfg_b['n']}, d = 100, ε = 2 ℓ2; SVM C = {cfg_b['svm_C']}; Adv.Tr. = exact "
              "AT of θ·x on ½(θ·x − y)²; AWT = relaxed search of (3.20) at θ₀ ~ N(0, I), γ = 1, then sparse AT)", "",
              "| | nonzeros | angle | cosine | Φ(3 cos γ) | robustness (p_m + Φ) | robust acc. Φ | keeps x₁ | (3.20) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for k, r in b.items():
        lines.append(f"| {k} | {r['nonzeros']} | {r['angle']:.3f} | {r['cosine']:.4f} | {r['natural_accuracy']:.4f} | "
                     f"{r['robustness_with_pm']:.4f} | {r['robust_accuracy']:.4f} | {r.get('keeps_signal_coordinate', '')} | "
                     f"{r['awt_objective']:.1f} |" if "awt_objective" in r else
                     f"| {k} | {r['nonzeros']} | {r['angle']:.3f} | {r['cosine']:.4f} | {r['natural_accuracy']:.4f} | "
                     f"{r['robustness_with_pm']:.4f} | {r['robust_accuracy']:.4f} | | |")
    lines += ["", "Paper: SVM angle 0.555, Adv.Tr. 0.202, AWT 0.118.  Exact adversarial training of the linear model "
              "gives a much smaller Adv.Tr. angle than the paper's (its training procedure is not stated).", "",
              f"### AWT end to end (one-hidden-layer ReLU net, width {cfg_c['width']}, d = {cfg_c['d']}, ℓ2 ε = "
              f"{cfg_c['eps']}, {cfg_c['steps']} full-batch AT steps, lr {cfg_c['lr']}, logistic loss, PGD-{cfg_c['attack_steps']}"
              f" in training and PGD-20 at test, {cfg_c['n_train']} train / {cfg_c['n_test']} test points)", "",
              f"Dense: natural {c['dense_natural']:.3f}, robust {c['dense_robust']:.3f}.", "",
              "| density | (3.13) AWT | (3.13) magnitude | (3.13) random (mean) | robust AWT | robust magnitude | "
              "robust random (mean) | natural AWT | natural random (mean) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in c["rows"]:
        if "random_robust" in r:
            lines.append(f"| {r['density']} | {r['awt_objective']:.3f} | {r['magnitude_objective']:.3f} | "
                         f"{np.mean(r['random_objective']):.3f} | {r['awt_robust']:.3f} | {r['magnitude_robust']:.3f} | "
                         f"{np.mean(r['random_robust']):.3f} | {r['awt_natural']:.3f} | {np.mean(r['random_natural']):.3f} |")
        else:
            lines.append(f"| {r['density']} | {r['awt_objective']:.3f} | – | – | {r['awt_robust']:.3f} | – | – | "
                         f"{r['awt_natural']:.3f} | – |")
    lines += ["", "Sanity check (not a claim: the search minimises (3.13) from the magnitude mask, random masks are not "
              "optimised): the searched mask's (3.13) is below every random mask's — " + "; ".join(sanity) + ".",
              "Table 3.2 (MNIST MLP, ℓ∞ ε = 0.3): dense 98.96/91.14; AWT 87.69/78.66 (1.8 %), 91.74/83.60 (3.6 %), "
              "94.48/87.51 (8.7 %), 96.58/89.30 (16.9 %), 99.13/91.21 (51.3 %).  The gap of the 10 % ticket to the "
              "dense net is much larger here (documented difference; deviations in the module docstring)."]
    if "alg2_robust" in row10:
        lines += ["", f"Algorithm 2 as printed at density 0.1: (3.13) {row10['alg2_objective']:.3f}, natural "
                  f"{row10['alg2_natural']:.3f}, robust {row10['alg2_robust']:.3f}."]
    lines.append("")
    for cl in claims:
        lines.append(f"- {'✅' if cl.holds else ('⚠️ (documented difference)' if cl.known_difference else '❌')} "
                     f"{cl.text} — {cl.detail}")

    figs = []
    if plt is not None and outdir is not None:
        fig, ax = plt.subplots(figsize=(5.5, 4))
        dens = [r["density"] for r in c["rows"]]
        ax.semilogx(dens, [r["awt_robust"] for r in c["rows"]], "o-", label="AWT (relaxed search)")
        base_rows = [r for r in c["rows"] if "random_robust" in r]
        bd = [r["density"] for r in base_rows]
        ax.semilogx(bd, [r["magnitude_robust"] for r in base_rows], "s--", label="magnitude of θ₀")
        ax.semilogx(bd, [np.mean(r["random_robust"]) for r in base_rows], "^:", label="random (mean)")
        ax.axhline(c["dense_robust"], color="k", lw=0.8, label="dense AT")
        ax.set_xticks(dens)
        ax.set_xticklabels([f"{v:g}" for v in dens])
        ax.minorticks_off()
        ax.set_xlabel("density")
        ax.set_ylabel("PGD robust test accuracy")
        ax.set_title("Seed 003 Ch. 3: adversarial winning tickets")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fn = "seed003_tickets.png"
        fig.savefig(outdir / fn, dpi=120)
        plt.close(fig)
        figs.append(fn)
    results = {"table31_analytic": a, "table31_empirical": b, "mlp": c, "config": {"B": cfg_b, "C": cfg_c}}
    return Section("seed003_tickets", "Seed 003 Ch. 3 — dynamics-preserving adversarial winning tickets and Table 3.1",
                   results, "\n".join(lines), figs, claims, time.perf_counter() - t0)


if __name__ == "__main__":  # pragma: no cover
    import argparse
    import pathlib

    from .common import Log, figure

    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = pathlib.Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    sec = run(Log(), figure() if out else None, out, quick=args.quick)
    print(sec.markdown)
    print(f"{sec.seconds:.1f} s")
