"""Figure A.1 of seed 000: NN and SVM trained by minibatch stochastic subgradient descent (batch 64, η̂ = 1).

NN: two-layer ReLU net of width 10⁴ (paper and official code), trained on f − f₀ with the official code's
regulariser λ/2‖W₂/√m‖² (``regularize="readout_over_width"``), mean hinge, λ = 0.001.  SVM: the official α-update
(only the batch's α decay: ``dynamics.subgradient_descent(decay="batch", reduction="mean")``) with the analytic
NTK.  Deviations: ``a1_n_train`` training points and ``a1_steps`` steps instead of 12 665 points and 300 epochs;
the two sides draw their minibatches independently (the NN a fresh permutation per epoch, the SVM an independent
batch per step), so only the curves, not individual steps, are comparable.
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
    n = min(settings.a1_n_train, task.n_train)
    x, y = task.x_train[:n], task.y_train[:n]
    xt, yt = task.x_test, task.y_test
    every = max(1, settings.a1_steps // 50)
    log(f"Figure A.1: SGD, width {settings.a1_width}, n = {n}, batch 64, η̂ = 1, {settings.a1_steps} steps")
    net = nets.FullyConnected(x.shape[1], settings.a1_width)
    x_d, y_d, xt_d = on_backend((x, y, xt))
    p0 = on_backend(net.init(settings.seed, xp=HOST))  # drawn on the host: the same weights on every backend
    nn = nets.train(net, p0, x_d, y_d, "hinge", 1e-3, 1.0, settings.a1_steps, batch_size=64, seed=settings.seed,
                    reduction="mean", regularize="readout_over_width", subtract_f0=True, x_test=xt_d, record_every=every)
    K, Kt = kernels.two_layer_relu_ntk(x_d), kernels.two_layer_relu_ntk(xt_d, x_d)
    km = dynamics.subgradient_descent(K, y_d, "hinge", 1e-3, 1.0, settings.a1_steps, batch_size=64, seed=settings.seed,
                                      K_test=Kt, decay="batch", reduction="mean", record_every=every)
    f, ft = host(nn.f_train), host(nn.f_test)
    g, gt = host(km.g_train), host(km.g_test)
    steps_nn, steps_km = host(nn.steps), host(km.steps if km.steps is not None else km.times)
    R = {"steps_nn": steps_nn, "steps_km": steps_km,
         "nn_train_hinge": _hinge(f, y), "km_train_hinge": _hinge(g, y), "nn_test_hinge": _hinge(ft, yt),
         "km_test_hinge": _hinge(gt, yt), "nn_test_acc": np.mean(np.sign(ft) == yt[None, :], axis=1),
         "km_test_acc": np.mean(np.sign(gt) == yt[None, :], axis=1)}
    d_acc = abs(R["nn_test_acc"][-1] - R["km_test_acc"][-1])
    d_h = abs(R["nn_test_hinge"][-1] - R["km_test_hinge"][-1])
    claims = [Claim("Figure A.1", "SGD-trained NN and SVM end at the same test accuracy (within 1% or 2 points) and test hinge loss (within 0.05)",
                    bool(d_acc <= max(0.01, 2 / len(yt)) and d_h <= 0.05), f"test accuracy NN {R['nn_test_acc'][-1]:.4f} vs SVM {R['km_test_acc'][-1]:.4f}; "
                    f"test hinge NN {R['nn_test_hinge'][-1]:.4f} vs SVM {R['km_test_hinge'][-1]:.4f} (|Δ| = {d_h:.3f})",
                    checked_in_quick=False)]
    lines = ["| | final train hinge | final test hinge | final test accuracy |", "|---|---|---|---|",
             f"| NN (width {settings.a1_width}) | {R['nn_train_hinge'][-1]:.4f} | {R['nn_test_hinge'][-1]:.4f} | {100 * R['nn_test_acc'][-1]:.2f}% |",
             f"| SVM (NTK, batch-only decay) | {R['km_train_hinge'][-1]:.4f} | {R['km_test_hinge'][-1]:.4f} | {100 * R['km_test_acc'][-1]:.2f}% |"]
    figs = []
    if plt is not None and outdir is not None:
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
        axes[0].plot(steps_nn, f[:, :3], "o", ms=2)
        axes[0].set_prop_cycle(None)
        axes[0].plot(steps_km, g[:, :3], "-")
        axes[0].set_title("outputs of 3 training points (o NN, — SVM)")
        axes[1].plot(steps_nn, R["nn_train_hinge"], "o", ms=2, label="NN train")
        axes[1].plot(steps_km, R["km_train_hinge"], "-", label="SVM train")
        axes[1].plot(steps_nn, R["nn_test_hinge"], "s", ms=2, label="NN test")
        axes[1].plot(steps_km, R["km_test_hinge"], "--", label="SVM test")
        axes[1].set_title("mean hinge loss")
        axes[1].legend(fontsize=7)
        axes[2].plot(steps_nn, R["nn_test_acc"], "o", ms=2, label="NN")
        axes[2].plot(steps_km, R["km_test_acc"], "-", label="SVM")
        axes[2].set_title("test accuracy")
        axes[2].legend(fontsize=7)
        for ax in axes:
            ax.set_xlabel("step")
        fig.tight_layout()
        fn = "figureA1.png"
        fig.savefig(outdir / fn, dpi=110)
        plt.close(fig)
        figs.append(fn)
    return Section("figureA1", "Figure A.1 — SGD (batch 64, η̂ = 1): NN vs SVM", {"n": n, "width": settings.a1_width,
                   "steps": settings.a1_steps, "records": R}, "\n".join(lines), figs, claims, time.perf_counter() - t0)
