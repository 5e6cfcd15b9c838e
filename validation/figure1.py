"""Figure 1 of seed 000: a wide NN and the SVM with the NTK trained side by side by full-batch subgradient descent.

Settings (paper App. A.2): n = 128 training points, λ = 0.001 with the **mean** hinge loss (eq. (11)),
η̂ ∈ {0.1, 0.01}, widths 900 and 10⁴, f₀ = g₀ = 0.  Deviations, stated in the report: two-layer nets (one hidden
ReLU layer) instead of three-layer; the NN trains f − f₀ (``subtract_f0=True``, as the paper and its code) with
the regulariser ``regularize="from_init"`` (λ/2‖w − w₀‖²: in the lazy regime ∇f·(w − w₀) = f − f₀ + O(m^{-1/2}),
so the NN follows eq. (12) for f − f₀ with K ≈ Θ̂(w₀); the printed readout-only regulariser does not keep Θ̂
constant when λ > 0 — seed error documented in ``ntkref.nets._train``).  The SVM runs the α-recursion (16)
(``dynamics.subgradient_descent``, all α decay, g₀ = 0) with K = Θ̂(w₀) and with the analytic NTK (eq. (63)).
"""
from __future__ import annotations

import time

import numpy as np

from ntkref import dynamics, kernels, nets

from .common import HOST, Claim, Section, host, on_backend


def _hinge(f, y):
    return np.mean(np.maximum(0.0, 1.0 - y[None, :] * f), axis=1)


def run(task, settings, log, plt=None, outdir=None):
    t0 = time.perf_counter()
    n = min(settings.f1_n, task.n_train)
    x, y = task.x_train[:n], task.y_train[:n]
    xt = task.x_test[: settings.f1_n_test]
    x_d, y_d, xt_d = on_backend((x, y, xt))
    runs = {}
    for lr, width in log.progress(settings.f1_runs, "Figure 1 runs", unit="run"):
        t1 = time.perf_counter()
        log(f"Figure 1: width {width}, η̂ = {lr}, {settings.f1_steps} steps on n = {n} (NN, SVM with Θ̂(w₀), SVM with the NTK)")
        net = nets.FullyConnected(x.shape[1], width)
        params = on_backend(net.init(settings.seed, xp=HOST))  # drawn on the host: the same weights on every backend
        every = max(1, settings.f1_steps // 100)
        nn = nets.train(net, params, x_d, y_d, "hinge", settings.f1_lam, lr, settings.f1_steps, x_test=xt_d,
                        reduction="mean", regularize="from_init", subtract_f0=True, record_every=every)
        K0, K0t = net.empirical_ntk(params, x_d), net.empirical_ntk(params, xt_d, x_d)
        km = dynamics.subgradient_descent(K0, y_d, "hinge", settings.f1_lam, lr, settings.f1_steps, K_test=K0t,
                                          reduction="mean", record_every=every)
        Ka, Kat = kernels.two_layer_relu_ntk(x_d), kernels.two_layer_relu_ntk(xt_d, x_d)
        kma = dynamics.subgradient_descent(Ka, y_d, "hinge", settings.f1_lam, lr, settings.f1_steps, K_test=Kat,
                                           reduction="mean", record_every=every)
        f = host(nn.f_train)
        g = host(km.g_train)
        ga = host(kma.g_train)
        if f.shape != g.shape:
            raise RuntimeError(f"NN and SVM records differ in shape: {f.shape} vs {g.shape}")
        rms = lambda a: np.sqrt(np.mean(a**2, axis=1))  # noqa: E731
        runs[f"{lr}_{width}"] = {
            "lr": lr, "width": width, "steps": host(nn.steps),
            "gap_rms_empirical": rms(f - g), "gap_rms_analytic": rms(f - ga),
            "gap_test_max_empirical": np.max(np.abs(host(nn.f_test) - host(km.g_test)), axis=1),
            "hinge_nn": _hinge(f, y), "hinge_svm_empirical": _hinge(g, y), "hinge_svm_analytic": _hinge(ga, y),
            "samples_nn": f[:, :2], "samples_svm_analytic": ga[:, :2], "samples_svm_empirical": g[:, :2],
            "f_final_rms": float(rms(f)[-1]), "train_acc_nn": float(np.mean(np.sign(f[-1]) == y)),
            "seconds": time.perf_counter() - t1,
        }
    # ---- claims: the gap shrinks with width (at the same η̂ and step count)
    claims = []
    lr0 = settings.f1_runs[0][0]
    same = sorted((r for r in runs.values() if r["lr"] == lr0), key=lambda r: r["width"])
    for kind in ("analytic", "empirical"):
        gaps = [float(np.max(r[f"gap_rms_{kind}"])) for r in same]
        holds = all(b < a for a, b in zip(gaps, gaps[1:]))
        ws = ", ".join(f"width {r['width']}: {gv:.3e}" for r, gv in zip(same, gaps))
        k = "the analytic NTK" if kind == "analytic" else "Θ̂(w₀)"
        claims.append(Claim("Figure 1", f"the NN–SVM gap shrinks with width (SVM with {k}, η̂ = {lr0})", holds,
                            f"max over steps of the RMS gap on the training points: {ws}"))
    # ---- table
    lines = ["| η̂ | width | steps | final train hinge NN | SVM (NTK) | SVM (Θ̂(w₀)) | max RMS gap NN−SVM(NTK) | max RMS gap NN−SVM(Θ̂(w₀)) | final RMS output | max test gap (Θ̂(w₀)) | wall s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs.values():
        lines.append(f"| {r['lr']} | {r['width']} | {int(r['steps'][-1])} | {r['hinge_nn'][-1]:.4f} | {r['hinge_svm_analytic'][-1]:.4f} | "
                     f"{r['hinge_svm_empirical'][-1]:.4f} | {np.max(r['gap_rms_analytic']):.3e} | {np.max(r['gap_rms_empirical']):.3e} | "
                     f"{r['f_final_rms']:.3f} | {np.max(r['gap_test_max_empirical']):.3e} | {r['seconds']:.0f} |")
    figs = []
    if plt is not None and outdir is not None:
        fig, axes = plt.subplots(2, 2, figsize=(11, 8))
        ax = axes[0, 0]
        for r in runs.values():
            for j in range(2):
                ax.plot(r["steps"], r["samples_nn"][:, j], "o", ms=2, markevery=max(1, len(r["steps"]) // 30),
                        label=f"NN w={r['width']} η̂={r['lr']} x{j}")
                ax.plot(r["steps"], r["samples_svm_analytic"][:, j], "-", lw=1, label=f"SVM(NTK) η̂={r['lr']} x{j}")
        ax.set_title("(a,b) outputs of two training samples")
        ax.set_xlabel("step")
        ax.legend(fontsize=5, ncol=2)
        ax = axes[0, 1]
        for r in runs.values():
            ax.semilogy(r["steps"][1:], r["gap_rms_analytic"][1:], label=f"vs SVM(NTK), w={r['width']} η̂={r['lr']}")
            ax.semilogy(r["steps"][1:], r["gap_rms_empirical"][1:], "--", label=f"vs SVM(Θ̂(w₀)), w={r['width']} η̂={r['lr']}")
        ax.set_title("(c) RMS difference NN − SVM on training points")
        ax.set_xlabel("step")
        ax.legend(fontsize=6)
        ax = axes[1, 0]
        for r in runs.values():
            ax.plot(r["steps"], r["hinge_nn"], "o", ms=2, markevery=max(1, len(r["steps"]) // 30), label=f"NN w={r['width']} η̂={r['lr']}")
            ax.plot(r["steps"], r["hinge_svm_analytic"], "-", label=f"SVM(NTK) η̂={r['lr']}")
        ax.set_title("(d) mean hinge loss (training)")
        ax.set_xlabel("step")
        ax.legend(fontsize=6)
        axes[1, 1].axis("off")
        axes[1, 1].text(0.0, 0.5, f"n = {n}, λ = {settings.f1_lam} (mean hinge)\n2-layer ReLU nets trained on f − f₀,\n"
                        "regulariser λ/2‖w − w₀‖²\nSVM: α-recursion (16), g₀ = 0", fontsize=10)
        fig.tight_layout()
        fn = "figure1.png"
        fig.savefig(outdir / fn, dpi=120)
        plt.close(fig)
        figs.append(fn)
    return Section("figure1", "Figure 1 — NN vs SVM training dynamics (full-batch subgradient descent)",
                   {"n": n, "lam": settings.f1_lam, "runs": runs}, "\n".join(lines), figs, claims, time.perf_counter() - t0)
