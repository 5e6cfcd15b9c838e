"""Table 1 of seed 000: for every loss, a wide NN trained on (7) and the kernel machine it is equivalent to.

One row per loss (hinge → SVM, squared hinge → 2-norm SVM, ε-insensitive → SVR, squared → KRR, logistic →
ℓ2-regularised logistic regression).  Each NN is a two-layer ReLU net made f₀ ≡ 0 by
:class:`ntkref.nets.Antisymmetric`, trained by full-batch (sub)gradient descent on the mean loss with
``regularize="from_init"``; :func:`ntkref.equivalence.compare` trains the KM by the same discrete dynamics with
K = Θ̂(w₀) and with the analytic NTK.  Targets: the ±1 labels (also for the regression losses).  The row reports
the final RMS gaps, the final RMS output (the scale the gap is relative to) and the KM's distance to the exact
minimiser of (7) (``machines.fit``, mean convention) — how far the finite-step dynamics still are from the limit.
"""
from __future__ import annotations

import time

import numpy as np

from ntkref import equivalence, kernels, machines, nets

from .common import HOST, Claim, Section, host, on_backend

LOSSES = (("hinge", "1-norm soft-margin SVM"), ("squared_hinge", "2-norm SVM"), ("epsilon_insensitive", "SVR (ε = 0.1)"),
          ("squared", "KRR"), ("logistic", "ℓ2-regularised logistic regression"))


def run(task, settings, log, plt=None, outdir=None):
    t0 = time.perf_counter()
    n = min(settings.t1_n, task.n_train)
    x, y = task.x_train[:n], task.y_train[:n]
    xt = task.x_test[: max(8, n // 2)]
    lam, lr = 1e-3, settings.t1_lr
    rows = {}
    x_d, y_d, xt_d = on_backend((x, y, xt))
    Ka_d = kernels.two_layer_relu_ntk(x_d)
    Ka = host(Ka_d)
    losses = log.progress(LOSSES, "Table 1 losses", unit="loss")
    for loss, km_name in losses:
        losses.set_postfix(loss)
        net = nets.Antisymmetric(nets.FullyConnected(x.shape[1], settings.t1_width))
        params = on_backend(net.init(settings.seed, xp=HOST))  # drawn on the host: the same weights on every backend
        c = equivalence.compare(net, params, x_d, y_d, loss, lam, lr, settings.t1_steps, x_test=xt_d, analytic=True,
                                regularize="from_init", reduction="mean", track_kernel=False)
        f, g, ga = host(c.nn.f_train), host(c.km.g_train), host(c.km_analytic.g_train)
        rms = lambda v: float(np.sqrt(np.mean(v**2)))  # noqa: E731
        alpha_star = host(machines.fit(Ka_d, y_d, loss, lam, reduction="mean"))
        g_star = Ka @ alpha_star
        rows[loss] = {
            "km": km_name, "gap_final_empirical": rms(f[-1] - g[-1]), "gap_max_empirical": float(np.max(np.sqrt(np.mean((f - g) ** 2, axis=1)))),
            "gap_final_analytic": rms(f[-1] - ga[-1]), "gap_test_final": float(host(c.gap_test)[-1]),
            "output_rms": rms(f[-1]), "km_to_optimum": rms(ga[-1] - g_star), "optimum_rms": rms(g_star),
            "nn_sample": f[:, 0], "km_sample": g[:, 0], "km_analytic_sample": ga[:, 0], "steps": host(c.nn.steps),
        }
    claims = []
    worst = max(r["gap_final_empirical"] / max(r["output_rms"], 1e-12) for r in rows.values())
    claims.append(Claim("Table 1", "for every loss the NN stays close to its KM with K = Θ̂(w₀) (relative RMS gap < 5%)",
                        bool(worst < 0.05), f"worst final relative gap over the five losses: {worst:.2e} "
                        f"(width {settings.t1_width}, {settings.t1_steps} steps)"))
    lines = ["| loss | kernel machine (Table 1) | final RMS gap NN−KM(Θ̂(w₀)) | max over steps | NN−KM(NTK) | max test gap | RMS output | KM(NTK) to exact optimum of (7) |",
             "|---|---|---|---|---|---|---|---|"]
    for loss, r in rows.items():
        lines.append(f"| {loss} | {r['km']} | {r['gap_final_empirical']:.2e} | {r['gap_max_empirical']:.2e} | {r['gap_final_analytic']:.2e} | "
                     f"{r['gap_test_final']:.2e} | {r['output_rms']:.3f} | {r['km_to_optimum']:.3f} (optimum RMS {r['optimum_rms']:.3f}) |")
    figs = []
    if plt is not None and outdir is not None:
        fig, axes = plt.subplots(1, len(rows), figsize=(3.2 * len(rows), 3))
        for ax, (loss, r) in zip(axes, rows.items()):
            ax.plot(r["steps"], r["nn_sample"], "o", ms=2, markevery=max(1, len(r["steps"]) // 25), label="NN")
            ax.plot(r["steps"], r["km_sample"], "-", label="KM Θ̂(w₀)")
            ax.plot(r["steps"], r["km_analytic_sample"], "--", label="KM NTK")
            ax.set_title(loss, fontsize=9)
            ax.set_xlabel("step")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        fn = "table1.png"
        fig.savefig(outdir / fn, dpi=110)
        plt.close(fig)
        figs.append(fn)
    results = {"n": n, "width": settings.t1_width, "steps": settings.t1_steps, "lr": lr, "lam": lam, "rows": rows}
    return Section("table1", "Table 1 — every loss: NN vs its kernel machine", results, "\n".join(lines), figs, claims,
                   time.perf_counter() - t0)
