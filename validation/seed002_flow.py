"""Seed 002 §3 / App. E (perturbed Wasserstein gradient flow) and App. F.1 (explicit regularizer vs none).

(a) The weighted-particle simulation of App. E.3's discrete perturbed flow (:mod:`ntkref.mean_field`) on the small
    instance of the inventory (n = 10 points (x, 1), x ∈ [−1, 1], y = +1 iff |x| < 0.5, λ_sum = n·2⁻⁸), with and
    without the noise re-injection σ(U^d − ρ), from (i) 400 particles uniform on 𝕊² and (ii) a degenerate start
    (all 50 particles at one point).  Tracked: L[ρ_t] − L_ref (L_ref: L-BFGS with restarts on a width-20 net,
    host SciPy), min over 𝕊^d of L′[ρ_t] (exact in 2-D) and the (E.13) certificate.  Settings: η = 0.05,
    σ = 1e-3 (the theory's σ = exp(−d log(1/ε)·poly) is unusable), 20 000 steps (quick: 2 000); the re-injected
    mass is lumped every 50 steps on 2 antithetic fresh points (``inject_every=50``).
(b) App. F.1: a two-layer net trained twice from the same large initialization (every weight N(0, 1)), with
    λ = 5e-4 and λ = 0 (loss (2.2): mean logistic + λ‖Θ‖²_F, full-batch GD, learning rate 0.1, 20 000 steps),
    on n = 200 points labelled by a ground-truth net with 10 hidden units, d = 20, unnormalized margin ≥ 0.01.
    Unspecified in the seed and chosen here: x uniform on 𝕊^{19}; teacher weights N(0, 1); trained width 100;
    test set 2 000 points (same distribution); 3 trials (the paper averages 20; quick: 1 trial, 4 000 steps).
    Tracked: normalized margin minᵢ yᵢf(xᵢ)/‖Θ‖²_F, test accuracy, training error and the fraction of
    (hidden unit, training example) pairs whose activation 𝟙(uⱼᵀxᵢ ≥ 0) differs from initialization.
    Uses :class:`ntkref.nets._homogeneous.HomogeneousNet` and :func:`ntkref.margins.train_regularized`.

Documented differences (``Claim(known_difference=True)``):
- F.1's "training error hits 0 within 50 training iterations": here it takes a few hundred steps; likely causes are
  the settings the seed leaves unstated (trained width, input distribution, teacher weight law, how close points may
  come to the teacher's boundary at margin 0.01).
- Thm 3.3 with the literal re-injection σ(U^d − ρ) simulated by per-particle resampling (``reinjection="resample"``):
  the resets make the loss spike, and in the quick horizon (2 000 steps) it does not reach the 1e-3·L_ref tolerance;
  the lumped variant (the claims above it) does.
Sanity checks forced by construction (mass preservation, the stuck symmetric degenerate start, the negative initial
margin from N(0, 1) weights) are reported in the text, not as claims.  The test-accuracy comparison of F.1 needs
several trials (paired difference > 2 SE across trials), so it is a full-run claim only.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from ntkref import mean_field as mf

from .common import HOST, Claim, Section, fmt, host, on_backend


# --------------------------------------------------------------------------- (a) the particle flow
def _toy_2d():
    xs = np.linspace(-1.0, 1.0, 10)
    X = np.stack([xs, np.ones_like(xs)], axis=1)
    return X, np.where(np.abs(xs) < 0.5, 1.0, -1.0), 10 * 2.0**-8


def _np_F_and_grad(Theta, X, y, lam):
    """Σᵢ log(1 + e^{−yᵢf(xᵢ)}) + λ‖Θ‖²_F of the net f = Σⱼ wⱼ[uⱼᵀx]₊ and its gradient (host reference)."""
    pre = X @ Theta[:, 1:].T
    act = pre >= 0
    relu = np.where(act, pre, 0.0)
    f = relu @ Theta[:, 0]
    dl = -y * expit(-y * f)
    gw = relu.T @ dl + 2 * lam * Theta[:, 0]
    gu = Theta[:, 0][:, None] * ((act * dl[:, None]).T @ X) + 2 * lam * Theta[:, 1:]
    value = float(np.sum(np.logaddexp(0.0, -y * f)) + lam * np.sum(Theta**2))
    return value, np.concatenate([gw[:, None], gu], axis=1)


def _lbfgs_reference(X, y, lam, width=20, restarts=5, seed=0):
    rng = np.random.default_rng(seed)
    d1 = X.shape[1] + 1
    best = math.inf
    for _ in range(restarts):
        def fun(z):
            v, g = _np_F_and_grad(z.reshape(width, d1), X, y, lam)
            return v, g.ravel()

        res = minimize(fun, 0.5 * rng.standard_normal(width * d1), jac=True, method="L-BFGS-B",
                       options={"maxiter": 20000, "gtol": 1e-10, "ftol": 1e-15})
        best = min(best, float(res.fun))
    return best


def _flow_experiment(log, quick):
    X, y, lam = _toy_2d()
    steps = 2000 if quick else 20000
    every = max(1, steps // 100)
    L_ref = _lbfgs_reference(X, y, lam)
    log(f"§3 flow: L-BFGS reference optimum L_ref = {L_ref:.6f} (width 20, 5 restarts)")
    degenerate = np.tile(np.array([[1.0, 0.6, 0.5]]), (50, 1))
    runs = {
        "uniform, σ = 1e-3": dict(n_particles=400, sigma=1e-3),
        "uniform, σ = 0": dict(n_particles=400, sigma=0.0),
        "degenerate, σ = 1e-3": dict(theta0=degenerate, sigma=1e-3),
        "degenerate, σ = 1e-3 (resample)": dict(theta0=degenerate, sigma=1e-3, reinjection="resample"),
        "degenerate, σ = 0": dict(theta0=degenerate, sigma=0.0),
    }
    out = {}
    for name, kw in log.progress(list(runs.items()), "§3 flows", unit="flow"):
        t1 = time.perf_counter()
        X_d, y_d = on_backend((X, y))
        if "theta0" in kw:
            kw = dict(kw, theta0=on_backend(kw["theta0"]))
        rec = mf.perturbed_wasserstein_flow(X_d, y_d, steps=steps, eta=0.05, lam=lam, seed=0, record_every=every,
                                            inject_every=50, track_min=True, **kw)
        loss = np.asarray(host(rec.loss))
        min_fv, cert = np.asarray(host(rec.min_first_variation)), np.asarray(host(rec.certificate))
        out[name] = {
            "steps": np.asarray(host(rec.steps)), "loss": loss, "gap": loss - L_ref,
            "min_first_variation": min_fv, "certificate": cert,
            "final_loss": float(loss[-1]), "final_gap": float(loss[-1] - L_ref),
            "final_min_fv": float(min_fv[-1]), "final_certificate": float(cert[-1]),
            "mass_error": abs(float(np.sum(host(rec.p))) - 1.0), "n_particles": int(host(rec.n_particles)[-1]),
            "seconds": time.perf_counter() - t1,
        }
        log(f"  {name}: L = {loss[-1]:.5f} (gap {loss[-1] - L_ref:+.2e}), min L′ = {out[name]['final_min_fv']:.2e}, "
            f"certificate {out[name]['final_certificate']:.3g}, {rec.n_particles[-1]} particles "
            f"[{out[name]['seconds']:.1f} s]")
    return {"L_ref": L_ref, "lam": lam, "steps": steps, "eta": 0.05, "runs": out}


# --------------------------------------------------------------------------- (b) App. F.1
def _teacher_data(rng, A, B, k):
    """k points x uniform on the unit sphere with label sign f*(x), f* = Σ a[bᵀx]₊, rejected if |f*(x)| < 0.01."""
    xs, ys, have = [], [], 0
    while have < k:
        x = rng.standard_normal((4 * k, B.shape[0]))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        f = np.maximum(x @ B, 0.0) @ A
        keep = np.abs(f) >= 0.01
        xs.append(x[keep])
        ys.append(np.sign(f[keep]))
        have += int(keep.sum())
    return np.concatenate(xs)[:k], np.concatenate(ys)[:k]


def _f1_experiment(log, quick):
    from ntkref import margins
    from ntkref.nets._homogeneous import HomogeneousNet

    d, teacher_width, n, n_test, width = 20, 10, 200, 2000, 100
    steps = 4000 if quick else 20000
    trials = 1 if quick else 3
    lams = (5e-4, 0.0)
    # record densely at first (the paper: training error 0 within 50 iterations), then every steps/40
    marks = sorted(set(list(range(0, 201, 10)) + list(range(200, 1001, 25)) + list(range(0, steps + 1, max(1, steps // 40)))))
    res = {lam: {"margin": [], "test_acc": [], "train_err": [], "changed": [], "norm": []} for lam in lams}
    final_correct = {lam: [] for lam in lams}  # per trial: (n_test,) bool, final net correct on each test point
    bar = log.progress(total=trials * len(lams), label="F.1 trials × λ", unit="run")
    for trial in range(trials):
        rng = np.random.default_rng(1000 + trial)
        A, B = rng.standard_normal(teacher_width), rng.standard_normal((d, teacher_width))
        X, y = _teacher_data(rng, A, B, n)
        Xt, yt = _teacher_data(rng, A, B, n_test)
        net = HomogeneousNet(d, width)
        params0 = net.init(rng, xp=HOST)  # every weight N(0, 1): the large initialization of F.1 (host draw)
        act0 = X @ params0[0] >= 0
        params0 = on_backend(params0)
        X_d, y_d, Xt_d = on_backend((X, y, Xt))
        for lam in lams:
            t1 = time.perf_counter()
            params, prev = params0, 0
            curves = {k: [] for k in res[lam]}
            for mark in marks:
                if mark > prev:
                    params, _ = margins.train_regularized(net, params, X_d, y_d, lam,
                                                          steps=mark - prev, lr=0.1, record_every=mark - prev)
                    prev = mark
                f, ft = host(net.apply(params, X_d)), host(net.apply(params, Xt_d))
                curves["margin"].append(float(margins.normalized_margin(net, params, X_d, y_d)))
                curves["test_acc"].append(float(np.mean(np.sign(ft) == yt)))
                curves["train_err"].append(float(np.mean(np.sign(f) != y)))
                curves["changed"].append(float(np.mean((X @ host(params[0]) >= 0) != act0)))
                curves["norm"].append(float(net.norm(params)))
            for k, v in curves.items():
                res[lam][k].append(v)
            final_correct[lam].append(np.sign(host(net.apply(params, Xt_d))) == yt)
            log(f"F.1 trial {trial + 1}/{trials}, λ = {lam:g}: margin {curves['margin'][-1]:.4g}, "
                f"test acc {curves['test_acc'][-1]:.4f}, changed {100 * curves['changed'][-1]:.1f} % "
                f"[{time.perf_counter() - t1:.1f} s]")
            bar.update()
    bar.close()
    marks = np.asarray(marks)
    summary = {}
    for lam in lams:
        arr = {k: np.asarray(v) for k, v in res[lam].items()}
        zero = [int(marks[np.argmax(e == 0)]) if np.any(e == 0) else None for e in arr["train_err"]]
        summary[lam] = {
            "curves_mean": {k: v.mean(axis=0) for k, v in arr.items()},
            "initial_margin": float(arr["margin"][:, 0].mean()),
            "final_margin": float(arr["margin"][:, -1].mean()),
            "final_test_acc": float(arr["test_acc"][:, -1].mean()),
            "final_changed": float(arr["changed"][:, -1].mean()),
            "final_norm": float(arr["norm"][:, -1].mean()),
            "first_zero_train_error_step": zero,
        }
    # paired comparison of the two nets on the same test points (same teacher, same initialization)
    per_trial = np.array([np.mean(a) - np.mean(b) for a, b in zip(final_correct[lams[0]], final_correct[lams[1]])])
    pooled = np.concatenate([a.astype(float) - b for a, b in zip(final_correct[lams[0]], final_correct[lams[1]])])
    paired = {
        "acc_diff_per_trial": per_trial,
        "acc_diff": float(per_trial.mean()),
        # across trials (the training-set / initialization randomness): needs ≥ 2 trials
        "se_trials": float(per_trial.std(ddof=1) / np.sqrt(len(per_trial))) if len(per_trial) >= 2 else float("nan"),
        # over test points only (McNemar-type SE of the paired difference; ignores trial-to-trial variance)
        "se_test_points": float(pooled.std(ddof=1) / np.sqrt(pooled.size)),
        "discordant": int(np.sum(pooled != 0)),
    }
    return {"steps": marks, "n_steps": steps, "trials": trials, "width": width, "d": d, "n": n, "n_test": n_test,
            "lams": lams, "summary": summary, "paired": paired}


# --------------------------------------------------------------------------- report
def run(log, plt=None, outdir=None, *, quick=False) -> Section:
    t0 = time.perf_counter()
    flow = _flow_experiment(log, quick)
    f1 = _f1_experiment(log, quick)
    R = flow["runs"]
    claims = []
    tol = 1e-3 * flow["L_ref"]
    noisy = ["uniform, σ = 1e-3", "degenerate, σ = 1e-3"]
    literal = "degenerate, σ = 1e-3 (resample)"
    claims.append(Claim(
        "§3 Thm 3.3", "the perturbed flow (re-injection lumped every 50 steps) reaches an ε-optimal measure (L within "
        "1e-3·L_ref of the L-BFGS optimum), from a uniform and from a degenerate start",
        all(abs(R[k]["final_gap"]) <= tol for k in noisy),
        "; ".join(f"{k}: L − L_ref = {R[k]['final_gap']:+.2e}" for k in noisy) + f" (tolerance {tol:.2e})"))
    claims.append(Claim(
        "§3 / App. E.2", "with noise (lumped), min over 𝕊^d of L′[ρ_t] rises to ≈ 0 (≥ −1e-2): no descent direction "
        "is left", all(R[k]["final_min_fv"] >= -1e-2 for k in noisy),
        "; ".join(f"{k}: {R[k]['final_min_fv']:.2e}" for k in noisy)))
    lit = R[literal]
    claims.append(Claim(
        "§3 Thm 3.3 (literal σ(U − ρ))", "the literal per-particle re-injection (\"resample\": each particle reset "
        "with probability ησ per step) also reaches L within 1e-3·L_ref of the optimum with min L′ ≥ −1e-2, from the "
        "degenerate start", abs(lit["final_gap"]) <= tol and lit["final_min_fv"] >= -1e-2,
        f"L − L_ref = {lit['final_gap']:+.2e} (tolerance {tol:.2e}), min L′ = {lit['final_min_fv']:.2e} after "
        f"{flow['steps']} steps", known_difference=True))
    claims.append(Claim(
        "(E.13)", "the optimality certificate bounds L[ρ_t] − L_ref at every record of every run",
        all(np.all(r["certificate"] >= r["gap"] - 1e-10) for r in R.values()),
        "final certificates: " + ", ".join(f"{fmt(r['final_certificate'], 3)}" for r in R.values())))
    S = f1["summary"]
    reg, unreg = S[5e-4], S[0.0]
    zsteps = [s for lam in f1["lams"] for s in S[lam]["first_zero_train_error_step"]]
    claims.append(Claim(
        "F.1", "training error hits 0 within 50 training iterations (both λ, every trial)",
        all(s is not None and s <= 50 for s in zsteps),
        f"first recorded step with zero training error (recorded every 10 steps up to 200): {zsteps}",
        known_difference=True))
    claims.append(Claim(
        "F.1", "with λ = 0 few activation patterns change (< 10 %: kernel regime), with λ = 5e-4 more",
        unreg["final_changed"] < 0.10 and reg["final_changed"] > unreg["final_changed"],
        f"changed: λ=0 {100 * unreg['final_changed']:.1f} %, λ=5e-4 {100 * reg['final_changed']:.1f} %"))
    claims.append(Claim(
        "F.1", "the regularized net has the larger normalized margin",
        reg["final_margin"] > unreg["final_margin"],
        f"margin {reg['final_margin']:.4g} vs {unreg['final_margin']:.4g}"))
    P = f1["paired"]
    if not quick:
        claims.append(Claim(
            "F.1", "the regularized net has the higher test accuracy (paired difference > 2 SE across trials)",
            P["acc_diff"] > 2 * P["se_trials"],
            f"test acc {reg['final_test_acc']:.4f} vs {unreg['final_test_acc']:.4f}; paired difference "
            f"{P['acc_diff']:+.4f} ± {P['se_trials']:.4f} (SE over {f1['trials']} trials; per trial "
            + ", ".join(f"{v:+.4f}" for v in P["acc_diff_per_trial"]) + ")", checked_in_quick=False))

    figures = []
    if plt is not None and outdir is not None:
        os.makedirs(outdir, exist_ok=True)
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
        for name, r in R.items():
            ax[0].semilogy(r["steps"], np.maximum(r["gap"], 1e-7), label=name)
            ax[1].semilogy(r["steps"], np.maximum(-r["min_first_variation"], 1e-7), label=name)
        ax[0].set(xlabel="step", ylabel="L[ρ_t] − L_ref (floored at 1e-7)", title="loss gap")
        ax[1].set(xlabel="step", ylabel="−min over sphere of L′[ρ_t]", title="steepest descent direction")
        ax[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "seed002_flow.png"), dpi=110)
        plt.close(fig)
        figures.append("seed002_flow.png")
        fig, ax = plt.subplots(1, 3, figsize=(14, 4))
        for lam in f1["lams"]:
            c = S[lam]["curves_mean"]
            lab = f"λ = {lam:g}"
            ax[0].plot(f1["steps"], c["margin"], label=lab)
            ax[1].plot(f1["steps"], c["test_acc"], label=lab)
            ax[2].plot(f1["steps"], 100 * c["changed"], label=lab)
        ax[0].set(xlabel="step", ylabel="normalized margin", title="normalized margin")
        ax[1].set(xlabel="step", ylabel="test accuracy", title="test accuracy")
        ax[2].set(xlabel="step", ylabel="% activation patterns changed", title="activation changes")
        ax[0].legend()
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "seed002_f1.png"), dpi=110)
        plt.close(fig)
        figures.append("seed002_f1.png")

    rows = "\n".join(
        f"| {k} | {fmt(r['final_loss'], 6)} | {r['final_gap']:+.2e} | {r['final_min_fv']:.2e} | "
        f"{fmt(r['final_certificate'], 3)} | {r['n_particles']} |" for k, r in R.items())
    f1rows = "\n".join(
        f"| {lam:g} | {S[lam]['initial_margin']:.3g} | {S[lam]['final_margin']:.4g} | {S[lam]['final_test_acc']:.4f} | "
        f"{100 * S[lam]['final_changed']:.1f} | {S[lam]['final_norm']:.3g} | {S[lam]['first_zero_train_error_step']} |"
        for lam in f1["lams"])
    stuck = R["degenerate, σ = 0"]
    mass_error = max(r["mass_error"] for r in R.values())
    P = f1["paired"]
    sanity = (f"Sanity checks (forced by construction, so not claims): the flow keeps Σp = 1 (max |Σp − 1| = "
              f"{mass_error:.1e}; (3.2) preserves mass exactly); without noise the degenerate start (all particles "
              f"identical, so they move identically) cannot leave its orbit — gap {stuck['final_gap']:.3f}, min L′ "
              f"{stuck['final_min_fv']:.3f}, certificate {fmt(stuck['final_certificate'], 3)}.")
    f1_sanity = (f"Sanity check: the initial normalized margin is negative ({reg['initial_margin']:.3g}; N(0, 1) "
                 f"weights do not fit the labels).  Test accuracy, regularized − unregularized, paired on the same "
                 f"test points: {P['acc_diff']:+.4f} (SE over test points {P['se_test_points']:.4f}, "
                 f"{P['discordant']} discordant points"
                 + (f"; SE over trials {P['se_trials']:.4f}" if f1["trials"] >= 2 else
                    "; one trial, so no trial-level SE: the accuracy claim is full-run only") + ").")
    markdown = f"""### Seed 002 §3 / App. E: perturbed Wasserstein gradient flow (particle simulation)

n = 10 points (x, 1), y = +1 iff |x| < 0.5, λ = n·2⁻⁸, η = {flow['eta']}, {flow['steps']} steps; L_ref =
{flow['L_ref']:.6f} (L-BFGS, width 20, 5 restarts). Noise re-injection lumped every 50 steps on 2 antithetic
fresh points of 𝕊² (``inject_every=50``); "resample" replaces each particle with probability ησ per step
(its loss spikes when a particle carrying much of the function is reset to a unit-norm fresh point, then recovers).
From the degenerate start (all particles at one point) the unperturbed flow collapses to the zero measure, a
stationary point of (3.1) with min L′ < 0: only the re-injected mass finds the descent directions.

| run | final L | L − L_ref | min L′ on 𝕊² | certificate (E.13) | particles |
|---|---|---|---|---|---|
{rows}

The literal re-injection ("resample") is reported as a documented difference when it misses the tolerance: each reset
throws away a particle that may carry much of the function and replaces it with a unit-norm fresh point, so the loss
keeps spiking and recovering, and within the simulated horizon it ends further from L_ref than the lumped variant.

{sanity}

### Seed 002 App. F.1: explicit regularizer vs none (same initialization, every weight N(0, 1))

d = {f1['d']}, n = {f1['n']}, teacher width 10 (margin ≥ 0.01), trained width {f1['width']} (unspecified in the
seed), lr 0.1, {f1['n_steps']} full-batch GD steps, {f1['trials']} trial(s) (paper: 20), test set {f1['n_test']}.

| λ | initial margin | final margin | test accuracy | % activations changed | ‖Θ‖_F | first step with 0 train error |
|---|---|---|---|---|---|---|
{f1rows}

{f1_sanity}

"Training error 0 within 50 iterations" (seed F.1) is not reproduced (documented difference): the seed does not give
the trained width or the input distribution, and with width 100, x uniform on 𝕊^19 and N(0, 1) teacher weights
(margin ≥ 0.01 makes many points nearly on the teacher's boundary) full-batch GD at learning rate 0.1 needs a few
hundred steps.
"""
    results = {"flow": {k: v for k, v in flow.items() if k != "runs"},
               "flow_runs": {k: {kk: vv for kk, vv in r.items() if not isinstance(vv, np.ndarray)}
                             for k, r in R.items()},
               "f1": {str(lam): {k: v for k, v in S[lam].items() if k != "curves_mean"} for lam in f1["lams"]}}
    return Section(key="seed002_flow", title="Seed 002 §3/App. E perturbed Wasserstein flow and App. F.1",
                   results=results, markdown=markdown, figures=figures, claims=claims,
                   seconds=time.perf_counter() - t0)
