"""Figure B.2 of seed 000: a width-100 NN, its Theorem-4.1 kernel machine, and the App. B generalisation bound.

NN (official ``generalization.py`` settings): two-layer ReLU net of width 100, NTK parameterisation, no biases,
the first ``b2_n`` (paper: 1000) training points, full-batch subgradient descent with η̂ = 0.1 on the mean hinge
loss, λ = 0.001, 100 steps.  f₀ = 0 by :class:`ntkref.nets.Antisymmetric`; the regulariser is (7)'s readout one
(``regularize="readout"``), for which eq. (48) makes the discrete NN step exactly
f_{k+1} = (1 − ηλ)f_k − (η/n)Θ̂_k l'_k + r_k with a second-order remainder r_k — Theorem 4.1's setting.

Theorem 4.1 (discrete form, as ``nets.train(track_kernel=True)`` accumulates it):
K_T = η Σ_{k<T} (1 − ηλ)^{T−1−k} |l'_k| Θ̂(w_k), a_i = −sign l'(f₀(x_i), y_i) = y_i (hinge, f₀ = 0), and the
KM g_T(x) = Σᵢ (aᵢ/n) K_T(x, xᵢ).  Training runs in chunks; K_T is carried across chunks as
K_T = (1 − ηλ)^{T₂} K_{T₁} + (chunk's own sum).

Bound (App. B, Lemmas B.1–B.2, ``bounds.rademacher_bound``): with the ramp loss (values in [0, 1], 1-Lipschitz —
the hinge loss is unbounded, so Lemma B.2 does not apply to it; docs/errata.md, seed 000 App. B) and δ = 0.01 (confidence 0.99; the
official code used δ = 0.99): L_D(ramp) ≤ L_S(ramp) + 2(B/n)√(tr K_T) + 3√(log(2/δ)/(2n)), B = √(aᵀK_T a) with
a = y/n (so that g_T = K_T a).  The ramp loss bounds the 0–1 test error from above.
"""
from __future__ import annotations

import time

import numpy as np

from ntkref import bounds, nets

from .common import HOST, Claim, Section, host, on_backend


def _hinge(f, y):
    return float(np.mean(np.maximum(0.0, 1.0 - y * f)))


def _ramp(f, y):
    return float(np.mean(bounds.ramp_loss(f, y)))  # host arrays: computed in NumPy


def run(task, settings, log, plt=None, outdir=None):
    t0 = time.perf_counter()
    n = min(settings.b2_n, task.n_train)
    x, y = task.x_train[:n], task.y_train[:n]
    xt, yt = task.x_test, task.y_test
    lam, lr = 1e-3, settings.b2_lr
    decay = 1 - lr * lam
    net = nets.Antisymmetric(nets.FullyConnected(x.shape[1], settings.b2_width))
    params = on_backend(net.init(settings.seed, xp=HOST))  # drawn on the host: the same weights on every backend
    x_d, y_d, xt_d = on_backend((x, y, xt))
    a = y / n
    a_d = on_backend(a)
    # K_T and its test rows accumulate on the backend (the training's own sums live there); host copies per record
    K_d = on_backend(np.zeros((n, n)))
    Kt_d = on_backend(np.zeros((xt.shape[0], n)))
    rec = {k: [] for k in ("step", "nn_train_hinge", "km_train_hinge", "nn_test_hinge", "km_test_hinge", "nn_train_ramp",
                           "km_train_ramp", "nn_test_ramp", "nn_test_error", "km_test_ramp", "bound", "bound_delta099",
                           "gap_train_max", "gap_test_max", "rkhs_norm", "complexity")}
    f_nn = np.zeros(n)
    ft_nn = np.zeros(xt.shape[0])
    steps_done = 0

    def record():
        K, Kt = host(K_d), host(Kt_d)
        g, gt = K @ a, Kt @ a
        emp = _ramp(g, y)
        rec["step"].append(steps_done)
        rec["nn_train_hinge"].append(_hinge(f_nn, y))
        rec["km_train_hinge"].append(_hinge(g, y))
        rec["nn_test_hinge"].append(_hinge(ft_nn, yt))
        rec["km_test_hinge"].append(_hinge(gt, yt))
        rec["nn_train_ramp"].append(_ramp(f_nn, y))
        rec["km_train_ramp"].append(emp)
        rec["nn_test_ramp"].append(_ramp(ft_nn, yt))
        rec["nn_test_error"].append(float(np.mean(np.sign(ft_nn) != yt)))
        rec["km_test_ramp"].append(_ramp(gt, yt))
        if steps_done == 0:
            # K = 0: B = 0 and g = 0, whose ramp loss is 1
            b, b99 = (1.0 + 3 * np.sqrt(np.log(2 / d) / (2 * n)) for d in (0.01, 0.99))
        else:
            b = float(bounds.rademacher_bound(K_d, a_d, emp, delta=0.01, c=1, rho=1))
            b99 = float(bounds.rademacher_bound(K_d, a_d, emp, delta=0.99, c=1, rho=1))
        B = float(np.sqrt(max(a @ K @ a, 0.0)))
        rec["bound"].append(b)
        rec["bound_delta099"].append(b99)
        rec["rkhs_norm"].append(B)
        rec["complexity"].append(2 * B / n * np.sqrt(max(np.trace(K), 0.0)))
        rec["gap_train_max"].append(float(np.max(np.abs(f_nn - g))))
        rec["gap_test_max"].append(float(np.max(np.abs(ft_nn - gt))))

    record()
    log(f"Figure B.2: width {settings.b2_width}, n = {n}, {settings.b2_steps} steps in chunks of {settings.b2_chunk} "
        "(empirical NTK at every step for Theorem 4.1)")
    bar = log.progress(total=settings.b2_steps, label="Figure B.2 steps", unit="step")
    while steps_done < settings.b2_steps:
        c = min(settings.b2_chunk, settings.b2_steps - steps_done)
        tr = nets.train(net, params, x_d, y_d, "hinge", lam, lr, c, x_test=xt_d, reduction="mean",
                        regularize="readout", track_kernel=True)
        K_d = decay**c * K_d + tr.km_kernel
        Kt_d = decay**c * Kt_d + tr.km_kernel_test
        params = tr.params
        f_nn = host(tr.f_train)[-1]
        ft_nn = host(tr.f_test)[-1]
        steps_done += c
        record()
        bar.update(c)
    bar.close()
    R = {k: np.asarray(v) for k, v in rec.items()}
    claims = []
    scale = float(np.max(np.abs(f_nn)))
    claims.append(Claim("Figure B.2", "the width-100 NN equals its Theorem-4.1 kernel machine along training",
                        bool(np.max(R["gap_train_max"]) <= 1e-2 * max(scale, 1e-12) + 1e-9),
                        f"max |f − g| over training points and records: {np.max(R['gap_train_max']):.2e} "
                        f"(test points: {np.max(R['gap_test_max']):.2e}); max |f| = {scale:.3f}"))
    claims.append(Claim("Figure B.2", "the Rademacher bound (ramp loss, δ = 0.01) upper-bounds the NN test ramp loss",
                        bool(np.all(R["bound"] >= R["nn_test_ramp"])),
                        f"final bound {R['bound'][-1]:.4f} vs test ramp {R['nn_test_ramp'][-1]:.4f} "
                        f"(test 0–1 error {R['nn_test_error'][-1]:.4f}); δ = 0.99 as the official code: {R['bound_delta099'][-1]:.4f}"))
    lines = ["| step | NN train hinge | KM train hinge | NN test hinge | NN test ramp | KM train ramp | 2ρ(B/n)√trK | bound δ=0.01 | bound δ=0.99 (code) | max train \\|f−g\\| |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for i in range(len(R["step"])):
        lines.append(f"| {R['step'][i]} | {R['nn_train_hinge'][i]:.4f} | {R['km_train_hinge'][i]:.4f} | {R['nn_test_hinge'][i]:.4f} | "
                     f"{R['nn_test_ramp'][i]:.4f} | {R['km_train_ramp'][i]:.4f} | {R['complexity'][i]:.4f} | {R['bound'][i]:.4f} | "
                     f"{R['bound_delta099'][i]:.4f} | {R['gap_train_max'][i]:.1e} |")
    figs = []
    if plt is not None and outdir is not None:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        ax = axes[0]
        ax.plot(R["step"], R["nn_train_hinge"], "o", label="NN train hinge")
        ax.plot(R["step"], R["km_train_hinge"], "-", label="KM (Thm 4.1) train hinge")
        ax.plot(R["step"], R["nn_test_hinge"], "s", label="NN test hinge")
        ax.plot(R["step"], R["km_test_hinge"], "--", label="KM test hinge")
        ax.plot(R["step"], R["nn_test_ramp"], "^", label="NN test ramp")
        ax.plot(R["step"], R["bound"], "k-", lw=2, label="bound (ramp, δ = 0.01)")
        ax.plot(R["step"], R["bound_delta099"], "k:", label="bound with the code's δ = 0.99")
        ax.set_xlabel("step")
        ax.set_title(f"Figure B.2: width {settings.b2_width}, n = {n}, η̂ = {lr}")
        ax.legend(fontsize=7)
        ax = axes[1]
        ax.semilogy(R["step"][1:], R["gap_train_max"][1:], label="max |f − g|, train")
        ax.semilogy(R["step"][1:], R["gap_test_max"][1:], label="max |f − g|, test")
        ax.set_xlabel("step")
        ax.set_title("NN − KM difference")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fn = "figureB2.png"
        fig.savefig(outdir / fn, dpi=120)
        plt.close(fig)
        figs.append(fn)
    results = {"n": n, "width": settings.b2_width, "lr": lr, "lam": lam, "records": R}
    return Section("figureB2", "Figure B.2 — width-100 NN, its Theorem-4.1 KM and the generalisation bound", results,
                   "\n".join(lines), figs, claims, time.perf_counter() - t0)
