"""Seed 003, Chapter 2: the NTK function-norm regulariser — wide nets approach NTK kernel ridge regression.

Two experiments; the data and initial weights are drawn on the host (NumPy) and every kernel, fit and training
runs on the backend of ``NTKREF_BACKEND``/``NTKREF_DEVICE`` (``validation.common.on_backend``):

A. **Theorem 2.2.1 by trend.**  A one-hidden-layer ReLU net in NTK parameterisation, made f₀ ≡ 0 by the
   antisymmetric doubling (:class:`ntkref.nets.Antisymmetric`, the exact form of the theorem's small-κ device),
   is trained by full-batch gradient descent on (2.4): (1/N)Σ(f − y)² + ζ f(X)ᵀΘ⁻¹f(X), with Θ either the
   empirical NTK at the current parameters held constant in the gradient (Algorithm 1 with 𝓘 = all points,
   eq. (2.17)) or the analytic NTK 𝒦 (eq. (2.4) as the theorem states it).  The gap to the NTK-KRR predictor
   f_ntr = 𝒦(x, X)(𝒦 + ζNI)⁻¹Y (2.5) at held-out points is plotted against the width m; the theory predicts
   O(m^{-1/2}).
B. **Few-sample MNIST 0 vs 1** (embedded digits, ±1 labels, squared loss): unregularised vs NTK-regularised
   training over a ζ sweep of (2.4) (Algorithm 1's τ = ζN/2 with unit noise,
   :func:`ntkref.regularizers.tau_from_zeta`), plus Algorithm 1's sub-batch estimator with |X_𝓘| = 10 as in
   the dissertation (same ζ; its τ, which multiplies the unscaled sub-batch term, is ζN²/(2b)); test error,
   test MSE, the trained net's function norm f(X)ᵀΘ̂⁻¹f(X) (Fig. 2.5's decrease with τ), and the NTK-KRR
   reference.
   All runs use the same number of gradient steps, so the unregularised net is early-stopped at that budget.

Claims of B and their statistical criterion.  Comparisons of two nets use the *paired* difference of their
per-test-point 0/1 errors (each averaged over the seeds): mean d̄ and SE = sd(d)/√n_test.
- §2.5.1 ("the regulariser improves generalisation on small data sets"): **every** ζ of the fixed grid (chosen
  before the run: the decades 1e-3 … 1e-1, full run also 1) must lower the test error by more than 2 SE.  No ζ is
  selected, neither on the test set nor on a validation split (the seed picks τ on 10 % of the training set;
  with N = 40 that split would be 4 points, too few to select anything), so no test-set information enters.
- Fig. 2.6 / §2.5.5 ("as long as |X_𝓘| is not too small, the performance will not significantly degrade"):
  the sub-batch run's test error must not exceed the full-norm run's (same ζ) by more than 2 SE.  **Not
  reproduced here (documented difference):** with b = 10 of N = 40 and the same ζ the sub-batch net is
  clearly worse than the full-norm net at ζ = 1e-2 (quick: 4.5 % vs 2.0 %, Δ = 2.5 ± 1.1 points, MSE 0.74 vs
  0.46; full: 3.0 % vs 0.6 %, Δ = 2.5 ± 0.6 points, MSE 0.71 vs 0.45); at ζ = 1e-3 (full only) the 5.3 % vs
  4.4 % difference is within 2 SE (Δ = 0.8 ± 0.6), so that instance holds.  The N/b-scaled block estimator of Approximation 1 is biased and noisy,
  so the same ζ is not the same regularisation strength; the dissertation's setting (10 points of a batch of
  128, a LeNet, τ tuned for that estimator) is not reproduced, and ζ is not re-tuned for the sub-batch run.
  That the sub-batch regulariser still beats no regularisation is a separate claim.

Deviations from the seed's stated settings (§2.5 "Configuration", §2.5.1, Fig. 2.5/2.6):
- network: a one-hidden-layer ReLU MLP in NTK parameterisation (width 128 quick / 512 full, antisymmetric
  doubling so f₀ ≡ 0) instead of the LeNet-style CNN (three conv layers 6/16/120 5×5, average pooling, FC 84);
- task: MNIST 0-vs-1, ±1 labels, squared loss (2.4), instead of 10-class MNIST; N = 40 training points (the
  seed's small-sample sizes are not stated in the text); 200 (quick) / 428 (full) test images, from the
  2128-image embedded MNIST 0/1 subset of :mod:`ntkref.data`;
- symmetric label noise (20 % of the training labels flipped) is *added*: on clean 0-vs-1 every method is
  within a few test points (the full run's clean-label table is shown without a claim);
- optimiser: full-batch gradient descent with a step from the kernel's spectrum (safety 0.5), 200 (quick) /
  300 (full) steps, instead of SGD lr 0.03, momentum 0.9, batch 128, decay ×0.3 every 10 epochs;
- τ/ζ: a fixed grid, no selection (see above) instead of selection on a 10 % validation split;
- sub-batch: 𝓘 is 10 points drawn from the whole training set (the "batch" is all N = 40 points) instead of 10
  points of a batch of 128;
- seeds: 1 (quick) / 2 (full) initialisations per ζ.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ntkref import kernels
from ntkref import regularizers as R
from ntkref.nets import Antisymmetric, FullyConnected

from .common import HOST, Claim, Section, host, on_backend


def _sphere(n, d, rng):
    x = rng.standard_normal((n, d))
    return math.sqrt(d) * x / np.linalg.norm(x, axis=1, keepdims=True)  # ‖x‖² = d: Σ⁰(x, x) = 1


def _lr(K, zeta, safety):
    lam = np.linalg.eigvalsh(K)
    n = K.shape[0]
    return safety * n / (lam[-1] + lam[0] + 2 * zeta * n)


def _paired(row, ref):
    """Paired difference of per-test-point errors (row − ref): mean and its SE sd(d)/√n."""
    d = np.asarray(row["_point_errors"]) - np.asarray(ref["_point_errors"])
    return float(np.mean(d)), float(np.std(d, ddof=1) / math.sqrt(d.size))


def _width_sweep(cfg, log):
    rng = np.random.default_rng(cfg["seed"])
    n, m_test, d, zeta = cfg["n"], cfg["n_test"], cfg["d"], cfg["zeta"]
    X, Xt = _sphere(n, d, rng), _sphere(m_test, d, rng)
    Y = np.sin(1.5 * X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] / d
    X_d, Xt_d, Y_d = on_backend((X, Xt, Y))
    K_d = kernels.fc(X_d, depth=1).ntk
    K, Kt = host(K_d), host(kernels.fc(Xt_d, X_d, depth=1).ntk)
    alpha = host(R.krr_fit(K_d, Y_d, zeta))
    f_ntr_train, f_ntr_test = K @ alpha, Kt @ alpha
    lr = _lr(K, zeta, 0.8)
    rows = []
    bar = log.progress(total=len(cfg["widths"]) * len(cfg["seeds"]) * 2, label="A: width sweep", unit="run")
    for width in cfg["widths"]:
        net = Antisymmetric(FullyConnected(d, width, depth=1))
        for mode in ("empirical", "analytic"):
            gaps_test, gaps_train = [], []
            for s in cfg["seeds"]:
                p0 = on_backend(net.init(1000 * s + width, xp=HOST))  # host draw: the same weights on every backend
                tr = R.train_regularized(net, p0, X_d, Y_d, zeta=zeta, lr=lr, steps=cfg["steps"], x_test=Xt_d,
                                         kernel=None if mode == "empirical" else K_d)
                gaps_train.append(np.max(np.abs(host(tr.f_train)[-1] - f_ntr_train)))
                gaps_test.append(np.max(np.abs(host(tr.f_test)[-1] - f_ntr_test)))
                bar.update()
            rows.append({"width": width, "mode": mode, "gap_test": float(np.mean(gaps_test)),
                         "gap_train": float(np.mean(gaps_train)), "gap_test_runs": [float(g) for g in gaps_test]})
    bar.close()
    # the run's own convergence: gap between the end of training and the limit of its linearised flow
    t_end = on_backend(np.asarray([lr * cfg["steps"]]))  # the flow's time T = η·steps, as a (1,) array on the backend
    flow_end = host(R.regularized_flow(K_d, Y_d, zeta, t_end, lr=lr).train)[0]
    slopes = {}
    for mode in ("empirical", "analytic"):
        w = np.array([r["width"] for r in rows if r["mode"] == mode], float)
        g = np.array([r["gap_test"] for r in rows if r["mode"] == mode])
        slopes[mode] = float(np.polyfit(np.log(w), np.log(g), 1)[0])
    return {"rows": rows, "slopes": slopes, "lr": lr, "zeta": zeta, "n": n, "d": d,
            "krr_vs_flow_at_T": float(np.max(np.abs(flow_end - f_ntr_train))),
            "f_ntr_scale": float(np.max(np.abs(f_ntr_test)))}


def _mnist(cfg, log):
    from .data import load_task

    task = load_task(n_train=cfg["n_train"], n_test=cfg["n_test"])
    X, Y, Xt, Yt = task.x_train, task.y_train.copy(), task.x_test, task.y_test
    n = X.shape[0]
    flip = np.random.default_rng(cfg["noise_seed"]).random(n) < cfg["label_noise"]
    Y[flip] *= -1  # symmetric label noise on the training set only: the regime where regularisation matters
    X_d, Y_d, Xt_d = on_backend((X, Y, Xt))
    K_d = kernels.fc(X_d, depth=1).ntk
    K, Kt = host(K_d), host(kernels.fc(Xt_d, X_d, depth=1).ntk)
    net = Antisymmetric(FullyConnected(X.shape[1], cfg["width"], depth=1))
    rows = []
    runs = [(z, None) for z in cfg["zetas"]] + [(z, cfg["subset"]) for z in cfg["subset_zetas"]]
    for zeta, subset in log.progress(runs, "B: MNIST τ sweep", unit="τ"):
        lr = _lr(K, zeta, 0.5)
        errs, mses, norms, gaps, point_errs = [], [], [], [], []
        for s in cfg["seeds"]:
            p0 = on_backend(net.init(s, xp=HOST))  # host draw: the same weights on every backend
            tr = R.train_regularized(net, p0, X_d, Y_d, zeta=zeta, lr=lr, steps=cfg["steps"], x_test=Xt_d,
                                     subset_size=subset, seed=s)
            ft = host(tr.f_test)[-1]
            point_errs.append((np.sign(ft) != Yt).astype(float))
            errs.append(float(np.mean(point_errs[-1])))
            mses.append(float(np.mean((ft - Yt) ** 2)))
            gaps.append(ft)
            p = tr.params
            norms.append(float(R.rkhs_norm_sq(net.apply(p, X_d), net.empirical_ntk(p, X_d))))
        krr_t = Kt @ host(R.krr_fit(K_d, Y_d, zeta)) if zeta > 0 else Kt @ np.linalg.solve(K, Y)
        rel_gap = float(np.sqrt(np.mean((np.mean(gaps, axis=0) - krr_t) ** 2) / np.mean(krr_t**2)))
        # Algorithm 1's τ multiplies the unscaled sub-batch term; train_regularized scales that term by N/b, so
        # the τ of a sub-batch run is N/b times the full-batch τ of the same ζ
        tau = R.tau_from_zeta(zeta, n, subset_size=subset)
        rows.append({"zeta": zeta, "tau": tau, "subset": subset, "lr": lr, "rel_gap_to_krr": rel_gap,
                     "test_error": float(np.mean(errs)), "test_mse": float(np.mean(mses)),
                     "norm_sq": float(np.mean(norms)),
                     "krr_test_error": float(np.mean(np.sign(krr_t) != Yt)),
                     "krr_test_mse": float(np.mean((krr_t - Yt) ** 2)),
                     # per-test-point error averaged over the seeds, for paired comparisons (dropped from the results)
                     "_point_errors": np.mean(point_errs, axis=0)})
    return {"rows": rows, "n_train": n, "n_test": Xt.shape[0], "width": cfg["width"], "steps": cfg["steps"],
            "source": task.source, "label_noise": cfg["label_noise"], "n_flipped": int(flip.sum())}


def run(log, plt=None, outdir=None, *, quick=False):
    t0 = time.perf_counter()
    if quick:
        cfg_a = dict(seed=0, n=12, n_test=8, d=4, zeta=0.05, widths=(64, 256, 1024), seeds=(0, 1), steps=150)
        cfg_b = dict(n_train=40, n_test=200, width=128, steps=200, seeds=(0,), zetas=(0.0, 1e-3, 1e-2, 1e-1),
                     subset=10, subset_zetas=(1e-2,), label_noise=0.2, noise_seed=0)
        cfg_clean = None
    else:
        cfg_a = dict(seed=0, n=16, n_test=16, d=4, zeta=0.05, widths=(64, 256, 1024, 4096, 16384),
                     seeds=(0, 1, 2), steps=200)
        cfg_b = dict(n_train=40, n_test=None, width=512, steps=300, seeds=(0, 1),
                     zetas=(0.0, 1e-3, 1e-2, 1e-1, 1.0), subset=10, subset_zetas=(1e-3, 1e-2),
                     label_noise=0.2, noise_seed=0)
        cfg_clean = dict(cfg_b, label_noise=0.0, seeds=(0,), subset_zetas=())
    log("seed 003 Ch. 2 — A: regularised wide nets vs NTK-KRR over width")
    a = _width_sweep(cfg_a, log)
    log("seed 003 Ch. 2 — B: few-sample MNIST 0/1, τ ablation")
    b = _mnist(cfg_b, log)
    clean = None
    if cfg_clean is not None:
        log("seed 003 Ch. 2 — B': the same on clean labels")
        clean = _mnist(cfg_clean, log)

    claims = []
    for mode in ("empirical", "analytic"):
        g = [r["gap_test"] for r in a["rows"] if r["mode"] == mode]
        claims.append(Claim(
            "Thm 2.2.1", f"the regularised net's gap to NTK-KRR at test points shrinks with width ({mode} Θ in the "
            "regulariser)", a["slopes"][mode] < -0.25 and g[-1] < g[0],
            f"mean max-gap {g[0]:.3g} (m = {cfg_a['widths'][0]}) → {g[-1]:.3g} (m = {cfg_a['widths'][-1]}); "
            f"log-log slope {a['slopes'][mode]:.2f} (theory −0.5); |f_ntr| ≤ {a['f_ntr_scale']:.3g}"))
    reg = [r for r in b["rows"] if r["subset"] is None]
    norms = [r["norm_sq"] for r in reg if r["zeta"] > 0]
    claims.append(Claim(
        "Fig. 2.5", "the trained net's NTK function norm f(X)ᵀΘ̂⁻¹f(X) decreases as τ grows",
        all(x2 < x1 for x1, x2 in zip(norms, norms[1:])),
        "norms " + ", ".join(f"{r['norm_sq']:.3g} (τ={r['tau']:.3g})" for r in reg)))
    base = reg[0]
    assert base["zeta"] == 0.0
    lowered = [(r, *_paired(r, base)) for r in reg[1:]]
    grid = ", ".join(f"{r['zeta']:g}" for r in reg[1:])
    claims.append(Claim(
        "§2.5.1 (few samples)", f"with few noisy samples (N = {b['n_train']}, {b['n_flipped']} labels flipped) the "
        f"NTK-norm regulariser lowers the test error of the net by more than 2 paired SE at every ζ of the fixed grid "
        f"{{{grid}}} (no ζ selected)",
        all(dm + 2 * se < 0 for _, dm, se in lowered),
        f"unregularised {100 * base['test_error']:.2f}% (MSE {base['test_mse']:.3f}); "
        + "; ".join(f"ζ={r['zeta']:g} (τ={r['tau']:.3g}): {100 * r['test_error']:.2f}% (MSE {r['test_mse']:.3f}), "
                    f"Δ = {100 * dm:+.2f} ± {100 * se:.2f} pts" for r, dm, se in lowered)
        + f" (n_test = {b['n_test']}, same step budget)"))
    tracked = [r for r in reg if r["zeta"] >= 1e-2]
    claims.append(Claim(
        "Thm 2.2.1 (MNIST)", "regularised nets predict like NTK-KRR with the same ζ (relative RMS gap < 0.25 at test "
        "points for ζ ≥ 1e-2)", all(r["rel_gap_to_krr"] < 0.25 for r in tracked),
        ", ".join(f"ζ={r['zeta']:g}: {r['rel_gap_to_krr']:.3f}" for r in tracked)))
    sub = [r for r in b["rows"] if r["subset"] is not None]
    for r in sub:
        full = next(x for x in reg if x["zeta"] == r["zeta"])
        dm_full, se_full = _paired(r, full)
        dm_base, se_base = _paired(r, base)
        where = f"|X_𝓘| = {r['subset']} of {b['n_train']}, ζ = {r['zeta']:g}, Algorithm 1's τ = {r['tau']:.3g}"
        claims.append(Claim(
            "Approx. 1 / Alg. 1 (Fig. 2.6)", f"the sub-batch estimator ({where}) does not significantly degrade the "
            "full-norm regulariser: its test error ≤ the full-norm error (same ζ) + 2 paired SE",
            dm_full - 2 * se_full <= 0,
            f"test error {100 * r['test_error']:.2f}% (sub-batch) vs {100 * full['test_error']:.2f}% (full norm, "
            f"τ = {full['tau']:.3g}): Δ = {100 * dm_full:+.2f} ± {100 * se_full:.2f} pts; test MSE "
            f"{r['test_mse']:.3f} vs {full['test_mse']:.3f}.  The N/b-scaled block estimator is biased and noisy, so "
            "the same ζ is not the same strength; the seed's LeNet / batch-128 setting is not reproduced",
            known_difference=True))
        claims.append(Claim(
            "Approx. 1 / Alg. 1 (Fig. 2.6)", f"with the sub-batch estimator ({where}) the regulariser still lowers "
            "the test error of the unregularised net by more than 2 paired SE", dm_base + 2 * se_base < 0,
            f"{100 * r['test_error']:.2f}% vs {100 * base['test_error']:.2f}% (unregularised): "
            f"Δ = {100 * dm_base:+.2f} ± {100 * se_base:.2f} pts"))
    for rows_ in (b["rows"], clean["rows"] if clean is not None else []):
        for r in rows_:
            r.pop("_point_errors", None)

    lines = ["**A. Regularised training vs NTK kernel ridge regression (Thm 2.2.1)** — "
             f"N = {a['n']}, d = {a['d']}, ζ = {a['zeta']}, lr = {a['lr']:.3g}, {cfg_a['steps']} full-batch steps, "
             f"f₀ ≡ 0 (antisymmetric init), {len(cfg_a['seeds'])} seeds per width.",
             "", "| width | Θ in regulariser | mean max gap (test) | mean max gap (train) |", "|---|---|---|---|"]
    for r in a["rows"]:
        lines.append(f"| {r['width']} | {r['mode']} | {r['gap_test']:.3e} | {r['gap_train']:.3e} |")
    lines += ["", f"Slopes of log gap vs log width: empirical {a['slopes']['empirical']:.2f}, analytic "
              f"{a['slopes']['analytic']:.2f} (theory −0.5).  Optimisation error at the step budget (linearised "
              f"flow vs its limit): {a['krr_vs_flow_at_T']:.1e}.", "",
              f"**B. Few-sample MNIST 0/1** — {b['source']}; one-hidden-layer ReLU, width {b['width']}, "
              f"{b['steps']} steps, squared loss on ±1 labels; {b['n_flipped']} of {b['n_train']} training labels "
              f"flipped (noise rate {b['label_noise']}).  τ is Algorithm 1's (unit Gaussian noise, `tau_from_zeta`): "
              "ζN/2 for the full norm, ζN²/(2b) for a sub-batch of b points (it multiplies the unscaled "
              "sub-batch term; the N/b factor of Approximation 1 is absorbed into it).", ""]
    header = ["| ζ | τ | sub-batch | test error | test MSE | f(X)ᵀΘ̂⁻¹f(X) | rel. gap to KRR | NTK-KRR error | "
              "NTK-KRR MSE |", "|---|---|---|---|---|---|---|---|---|"]

    def table(rows_):
        out = list(header)
        for r in rows_:
            out.append(f"| {r['zeta']:g} | {r['tau']:.3g} | {r['subset'] or 'all'} | {100 * r['test_error']:.2f}% | "
                       f"{r['test_mse']:.4f} | {r['norm_sq']:.4g} | {r['rel_gap_to_krr']:.3f} | "
                       f"{100 * r['krr_test_error']:.2f}% | {r['krr_test_mse']:.4f} |")
        return out

    lines += table(b["rows"])
    lines += ["", "Claims use the paired difference of per-test-point errors (mean over seeds) with SE = sd/√n_test; "
              "no ζ is selected (every ζ of the fixed grid must beat the unregularised net).  The Fig. 2.6 claim "
              "(sub-batch ≈ full norm) is not reproduced at N = 40, b = 10 (documented difference: the N/b-scaled "
              "block estimator is biased and noisy, ζ is not re-tuned for it).  Deviations from the seed's settings "
              "(MLP for LeNet, 0-vs-1 squared loss for 10-class, full-batch GD for SGD+momentum, added 20 % label "
              "noise, N = 40) are listed in the module docstring."]
    if clean is not None:
        lines += ["", "Clean labels (no claim: 0-vs-1 is easy, the differences are a few test points; "
                  "the strongest regulariser shrinks f towards 0 and raises the MSE on ±1 targets):", ""]
        lines += table(clean["rows"])
    figs = []
    if plt is not None and outdir is not None:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        ax = axes[0]
        for mode, mk in (("empirical", "o-"), ("analytic", "s--")):
            w = [r["width"] for r in a["rows"] if r["mode"] == mode]
            g = [r["gap_test"] for r in a["rows"] if r["mode"] == mode]
            ax.loglog(w, g, mk, label=f"Θ = {mode} (slope {a['slopes'][mode]:.2f})")
        w0 = np.array(cfg_a["widths"], float)
        g0 = [r["gap_test"] for r in a["rows"] if r["mode"] == "empirical"][0]
        ax.loglog(w0, g0 * (w0 / w0[0]) ** -0.5, "k:", label="$m^{-1/2}$")
        ax.set_xlabel("width m")
        ax.set_ylabel("max |f_net − f_ntr| on test points")
        ax.set_title("Thm 2.2.1: regularised net → NTK-KRR")
        ax.legend(fontsize=8)
        ax = axes[1]
        # x axis: ζ of (2.4), the strength shared by a full-norm run and a sub-batch run (their τ differ by N/b)
        z = np.array([r["zeta"] for r in reg])
        z_zero = z[z > 0].min() / 10
        zp = np.where(z == 0, z_zero, z)
        ax.semilogx(zp, [100 * r["test_error"] for r in reg], "o-", label="net test error (%)")
        ax.semilogx(zp, [100 * r["krr_test_error"] for r in reg], "s--", label="NTK-KRR test error (%)")
        for j, r in enumerate(sub):
            ax.semilogx([r["zeta"] if r["zeta"] > 0 else z_zero], [100 * r["test_error"]], "r*", ms=10,
                        label=f"net, sub-batch |X_I| = {r['subset']} (%)" if j == 0 else None)
        ax.set_xlabel(f"ζ of (2.4) (τ = ζN/2 = {b['n_train'] / 2:g}ζ full norm; ζ = 0 drawn at the left end)")
        ax.set_ylabel("test error (%)")
        ax2 = ax.twinx()
        ax2.semilogx(zp, [r["test_mse"] for r in reg], "^:", color="tab:green", label="net test MSE (right axis)")
        ax2.set_ylabel("test MSE")
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=8)
        ax.set_title(f"MNIST 0/1, N = {b['n_train']}, {b['n_flipped']} labels flipped: ζ (τ) ablation")
        fig.tight_layout()
        fn = "seed003_regularizer.png"
        fig.savefig(outdir / fn, dpi=120)
        plt.close(fig)
        figs.append(fn)
    results = {"width_sweep": a, "mnist": b, "mnist_clean": clean, "config": {"A": cfg_a, "B": cfg_b}}
    return Section("seed003_regularizer", "Seed 003 Ch. 2 — NTK function-norm regulariser ⇔ NTK kernel ridge regression",
                   results, "\n".join(lines), figs, claims, time.perf_counter() - t0)
