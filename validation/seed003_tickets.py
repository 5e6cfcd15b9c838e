"""Seed 003, Chapter 3: dynamics-preserving adversarial winning tickets (AWT) and the toy example of Table 3.1.

Three experiments, host-side NumPy (networks and data in HOST):

A. **Table 3.1, analytic.**  (3.15) evaluated at the table's own cosines with ε = 2 (ℓ2, not stated in the
   dissertation) and the p_m term: the Bayes, SVM and AWT "Robustness" entries are reproduced to 3 decimals,
   the Adv.Tr. entry (0.823) and the "Accuracy" row are not the analytic values (documented discrepancies).
B. **Table 3.1, empirical.**  5000 × 100 Gaussian-mixture sample (‖μ‖ = 3, σ = 1): the SVM direction (hinge,
   C = 1, exact dual), dense adversarial training of θ·x (exact ℓ2 inner maximisation of the squared loss,
   ε = 2), and AWT: a 10 % mask (10 coordinates) found by minimising (3.20) for the linear model at a random
   θ₀ ~ N(0, I) (relaxed mask search, γ = 1, on the first 500 points), then sparse adversarial training on
   the mask.  Algorithm 2 as printed (magnitude re-masking) and a random 10 % mask are reported next to it.
   Angles are loose targets (they depend on the sample and on unstated hyper-parameters): SVM angle in
   [0.4, 0.7], AWT angle < SVM angle.  The analytic robust accuracy of the AWT direction is checked against
   an exact ℓ2 attack on a fresh sample (Monte Carlo).
C. **End to end with a ReLU net.**  A one-hidden-layer ReLU net (NTK parameterisation) on a 20-dimensional
   Gaussian mixture: dense adversarial training (logistic loss, ℓ2 PGD, ε = 1) against the AWT sparse net
   (relaxed search of (3.13), then adversarial training of f_{m⊙θ₀} from θ₀ with the same budget), the
   magnitude mask (the search's starting point) and random masks of the same density; natural and PGD robust
   test accuracy, and robust accuracy against density (figure).
"""
from __future__ import annotations

import math
import time

import numpy as np

from ntkref import adversarial as adv
from ntkref import sparsity as sp
from ntkref.nets import FullyConnected

from .common import HOST, Claim, Section

# Table 3.1 as printed: (Accuracy, Angle, Cosine, Robustness)
PAPER_T31 = {"Bayes": (0.999, 0.0, 1.0, 0.843), "SVM": (0.995, 0.555, 0.850, 0.714),
             "Adv.Tr.": (0.995, 0.202, 0.980, 0.823), "AWT": (0.995, 0.118, 0.993, 0.838)}
EPS_T31 = 2.0


def _unit_with_cos(c, d=100):
    return np.r_[c, math.sqrt(max(0.0, 1.0 - c * c)), np.zeros(d - 2)]


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
    x, y, mu = sp.gaussian_mixture(n, d, seed=cfg["seed"], xp=HOST)
    out = {}
    t = time.perf_counter()
    out["Bayes"] = _direction_row(mu, mu, eps)
    theta_svm = sp.svm_direction(x, y, C=cfg["svm_C"])
    out["SVM"] = _direction_row(theta_svm, mu, eps)
    log(f"  SVM (C = {cfg['svm_C']}, n = {n}): angle {out['SVM']['angle']:.3f}  ({time.perf_counter() - t:.1f} s)")
    theta_at = sp.adversarial_linear_direction(x, y, eps)
    out["Adv.Tr."] = _direction_row(theta_at, mu, eps)
    model = sp.LinearModel(d)
    p0 = model.init(cfg["seed"] + 1, xp=HOST)
    xs, ys = x[:cfg["search_n"]], y[:cfg["search_n"]]
    search_kw = dict(eps=eps, gamma=cfg["gamma"], norm="l2", attack="fgsm", mask_every=5)
    masks = {}
    res = sp.awt_search(model, p0, xs, ys, 0.1, method="relaxed", steps=cfg["search_steps"], **search_kw)
    masks["AWT"] = res.mask[0][:, 0]
    res2 = sp.awt_search(model, p0, xs, ys, 0.1, method="algorithm2", steps=cfg["search_steps"], lr=0.05,
                         **search_kw)
    masks["AWT (Algorithm 2)"] = res2.mask[0][:, 0]
    masks["random 10 %"] = sp.random_mask(p0, 0.1, cfg["seed"] + 2)[0][:, 0]
    objectives = {"AWT": res.objective.total, "AWT (Algorithm 2)": res2.objective.total}
    for name, m in masks.items():
        theta = sp.adversarial_linear_direction(x, y, eps, mask=m)
        row = _direction_row(theta, mu, eps)
        row["keeps_signal_coordinate"] = bool(m[0] == 1)
        row["awt_objective"] = objectives.get(name, sp.linear_awt_objective(p0[0][0][:, 0], m, xs, ys, eps=eps,
                                                                             gamma=cfg["gamma"]).total)
        out[name] = row
        if name == "AWT":
            # Monte Carlo check of (3.15) for this direction: exact ℓ2 attack on a fresh sample
            xt, yt, _ = sp.gaussian_mixture(cfg["mc_n"], d, seed=cfg["seed"] + 7, xp=HOST)
            xa = xt - eps * yt[:, None] * theta[None, :] / np.linalg.norm(theta)
            mc = float(np.mean(yt * (xa @ theta) > 0))
            se = math.sqrt(row["robust_accuracy"] * (1 - row["robust_accuracy"]) / cfg["mc_n"])
            row["mc_robust_accuracy"], row["mc_se"] = mc, se
    log(f"  AWT mask {np.flatnonzero(masks['AWT']).tolist()}, Algorithm-2 mask "
        f"{np.flatnonzero(masks['AWT (Algorithm 2)']).tolist()}  ({time.perf_counter() - t:.1f} s)")
    return out


def _mlp_tickets(cfg, log):
    d, eps = cfg["d"], cfg["eps"]
    x, y, mu = sp.gaussian_mixture(cfg["n_train"], d, seed=10, xp=HOST)
    xt, yt, _ = sp.gaussian_mixture(cfg["n_test"], d, seed=11, xp=HOST)
    net = FullyConnected(d, cfg["width"], depth=1)
    p0 = net.init(0, xp=HOST)
    train_kw = dict(eps=eps, lr=cfg["lr"], steps=cfg["steps"], norm="l2", attack_steps=cfg["attack_steps"])
    search_kw = dict(eps=eps, gamma=cfg["gamma"], norm="l2", attack_steps=cfg["attack_steps"])
    xs, ys = x[:cfg["search_n"]], y[:cfg["search_n"]]

    def evaluate(params, mask):
        pe = params if mask is None else sp.apply_mask(params, mask)
        nat = float(np.mean(np.sign(net.apply(pe, xt)) == yt))
        g = adv.loss_input_gradient(net, pe, "logistic")
        xa = adv.pgd(g, xt, yt, eps=eps, step_size=2.5 * eps / 20, steps=20, norm="l2")
        return nat, float(np.mean(np.sign(net.apply(pe, xa)) == yt))

    def train_eval(mask):
        params = sp.masked_adversarial_training(net, p0, mask, x, y, "logistic", **train_kw)
        return evaluate(params, mask)

    t = time.perf_counter()
    dense = train_eval(None)
    log(f"  dense AT: natural {dense[0]:.3f}, robust {dense[1]:.3f}  ({time.perf_counter() - t:.1f} s)")
    rows = []
    for density in cfg["densities"]:
        row = {"density": density}
        res = sp.awt_search(net, p0, xs, ys, density, method="relaxed", steps=cfg["search_steps"], mask_every=5,
                            **search_kw)
        row["awt_objective"] = res.objective.total
        row["awt_natural"], row["awt_robust"] = train_eval(res.mask)
        mm = sp.magnitude_mask(p0, density)
        row["magnitude_objective"] = sp.awt_objective(net, p0, mm, xs, ys, **search_kw).total
        row["magnitude_natural"], row["magnitude_robust"] = train_eval(mm)
        if cfg["algorithm2"] and abs(density - 0.1) < 1e-12:
            res2 = sp.awt_search(net, p0, xs, ys, density, method="algorithm2", steps=cfg["search_steps"],
                                 mask_every=5, lr=0.05, **search_kw)
            row["alg2_objective"] = res2.objective.total
            row["alg2_natural"], row["alg2_robust"] = train_eval(res2.mask)
        robj, rnat, rrob = [], [], []
        for s in cfg["random_seeds"]:
            rm = sp.random_mask(p0, density, 100 + s)
            robj.append(sp.awt_objective(net, p0, rm, xs, ys, **search_kw).total)
            nat, rob = train_eval(rm)
            rnat.append(nat)
            rrob.append(rob)
        row.update(random_objective=robj, random_natural=rnat, random_robust=rrob)
        rows.append(row)
        log(f"  density {density}: AWT obj {row['awt_objective']:.3f} (random min {min(robj):.3f}), robust AWT "
            f"{row['awt_robust']:.3f} / magnitude {row['magnitude_robust']:.3f} / random mean {np.mean(rrob):.3f}  "
            f"({time.perf_counter() - t:.1f} s)")
    return {"dense_natural": dense[0], "dense_robust": dense[1], "rows": rows}


def run(log, plt=None, outdir=None, *, quick=False):
    t0 = time.perf_counter()
    cfg_b = dict(n=2000 if quick else 5000, seed=0, svm_C=1.0, gamma=1.0, search_n=300 if quick else 500,
                 search_steps=20 if quick else 40, mc_n=20_000 if quick else 200_000)
    cfg_c = dict(d=20, eps=1.0, width=64, lr=1.0, gamma=1.0, attack_steps=5,
                 n_train=1000, n_test=1000 if quick else 4000, steps=200,
                 search_n=128, search_steps=30,
                 densities=(0.1,) if quick else (0.03, 0.1, 0.3), random_seeds=(0, 1) if quick else (0, 1, 2),
                 algorithm2=not quick)
    claims, lines = [], []
    S = "seed003 Ch. 3"

    log("seed003 Table 3.1 (analytic, ε = 2, ℓ2, p_m included)")
    a = _table31_analytic()
    ok = [name for name in ("Bayes", "SVM", "AWT") if round(a[name]["robustness_with_pm"], 3) == a[name]["paper_robustness"]]
    claims.append(Claim(S, "Table 3.1 Robustness of Bayes/SVM/AWT = (3.15) at the printed cosines with ε = 2 (ℓ2), p_m "
                        "included (ε is not stated in the seed)", len(ok) == 3,
                        ", ".join(f"{k}: {a[k]['robustness_with_pm']:.4f} vs {a[k]['paper_robustness']}"
                                  for k in ("Bayes", "SVM", "AWT"))))
    at = a["Adv.Tr."]
    claims.append(Claim(S, "Seed discrepancy reproduced: Table 3.1's Adv.Tr. Robustness 0.823 is not (3.15) at its "
                        "cosine 0.980 (analytic 0.828)", round(at["robustness_with_pm"], 3) == 0.828,
                        f"analytic {at['robustness_with_pm']:.4f}, printed {at['paper_robustness']}"))
    acc_mismatch = [k for k in ("Adv.Tr.", "AWT") if round(a[k]["natural_accuracy"], 3) != a[k]["paper_accuracy"]]
    claims.append(Claim(S, "Seed discrepancy reproduced: Table 3.1's Accuracy 0.995 for Adv.Tr./AWT is not "
                        "Φ(‖μ‖cos γ/σ) (0.998/0.999)", len(acc_mismatch) == 2,
                        ", ".join(f"{k}: Φ = {a[k]['natural_accuracy']:.4f}" for k in PAPER_T31)))

    log(f"seed003 Table 3.1 (empirical, n = {cfg_b['n']}, d = 100)")
    b = _table31_empirical(cfg_b, log)
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
    claims.append(Claim(S, "Finding: for the linear model Algorithm 2 as printed (magnitude re-masking; ∇_w of the "
                        "kernel distance is 0) does not keep the signal coordinate, the relaxed search does",
                        b["AWT"]["keeps_signal_coordinate"] and not b["AWT (Algorithm 2)"]["keeps_signal_coordinate"],
                        f"relaxed keeps x₁: {b['AWT']['keeps_signal_coordinate']}, Algorithm 2 keeps x₁: "
                        f"{b['AWT (Algorithm 2)']['keeps_signal_coordinate']}"))

    log(f"seed003 AWT end to end (ReLU net, d = {cfg_c['d']}, width {cfg_c['width']}, densities {cfg_c['densities']})")
    c = _mlp_tickets(cfg_c, log)
    row10 = next(r for r in c["rows"] if abs(r["density"] - 0.1) < 1e-12)
    claims.append(Claim(S, "The mask search lowers the AWT objective (3.13) below every random mask of the same "
                        "density", all(r["awt_objective"] < min(r["random_objective"]) for r in c["rows"]),
                        "; ".join(f"{r['density']}: {r['awt_objective']:.3f} vs random ≥ {min(r['random_objective']):.3f}"
                                  for r in c["rows"])))
    claims.append(Claim(S, "At 10 % density the AWT sparse net is more robust (PGD) than random sparse nets of the "
                        "same density (their mean) after the same adversarial training",
                        row10["awt_robust"] > float(np.mean(row10["random_robust"])),
                        f"AWT {row10['awt_robust']:.3f}, random {', '.join(f'{v:.3f}' for v in row10['random_robust'])}, "
                        f"dense {c['dense_robust']:.3f}"))
    if not quick:
        claims.append(Claim(S, "The dense adversarially trained net is the most robust (sparse nets approach it as "
                            "density grows)", all(c["dense_robust"] >= r["awt_robust"] - 0.01 for r in c["rows"]),
                            ", ".join(f"{r['density']}: {r['awt_robust']:.3f}" for r in c["rows"]),
                            checked_in_quick=False))

    # ------------------------------------------------------------------ markdown
    lines += ["### Table 3.1 — analytic (3.15) at the printed cosines, ε = 2 (ℓ2)", "",
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
        lines.append(f"| {r['density']} | {r['awt_objective']:.3f} | {r['magnitude_objective']:.3f} | "
                     f"{np.mean(r['random_objective']):.3f} | {r['awt_robust']:.3f} | {r['magnitude_robust']:.3f} | "
                     f"{np.mean(r['random_robust']):.3f} | {r['awt_natural']:.3f} | {np.mean(r['random_natural']):.3f} |")
    if "alg2_robust" in row10:
        lines += ["", f"Algorithm 2 as printed at density 0.1: (3.13) {row10['alg2_objective']:.3f}, natural "
                  f"{row10['alg2_natural']:.3f}, robust {row10['alg2_robust']:.3f}."]
    lines.append("")
    for cl in claims:
        lines.append(f"- {'✅' if cl.holds else '❌'} {cl.text} — {cl.detail}")

    figs = []
    if plt is not None and outdir is not None:
        fig, ax = plt.subplots(figsize=(5.5, 4))
        dens = [r["density"] for r in c["rows"]]
        ax.semilogx(dens, [r["awt_robust"] for r in c["rows"]], "o-", label="AWT (relaxed search)")
        ax.semilogx(dens, [r["magnitude_robust"] for r in c["rows"]], "s--", label="magnitude of θ₀")
        ax.semilogx(dens, [np.mean(r["random_robust"]) for r in c["rows"]], "^:", label="random (mean)")
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
