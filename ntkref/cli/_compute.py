"""The computations of the ``ntkref`` commands, shared by ``kernel``/``fit``/``dynamics``/``certify`` and ``compare``.

Each ``compute_*`` reads its inputs (:func:`ntkref.cli._io.load_array`), checks their shapes, moves them to the
target namespace and device, calls the reference (``ntkref.kernels.fc``/``cntk``, ``ntkref.machines.solve`` for
seed 000 eq. (7), ``ntkref.dynamics.gradient_flow``/``subgradient_descent``, ``ntkref.certify.certified_radius``)
and returns host (NumPy) copies of the results.  Also holds the ``--family`` options (an option the chosen
family does not use is refused, then the family's defaults are filled in).  Also used by
:mod:`ntkref.cli._compare` (``kernel_call``, ``get_list``, ``resolve_family_options``).
"""
from __future__ import annotations

import numpy as np  # host-side file I/O and error reports (the computations run on the chosen backend)

from .. import certify, dynamics, kernels, losses, machines
from .._lib.backend import to_numpy
from ._io import CLIError, Target, load_array
from ._progress import gram_in_row_blocks, radii_in_chunks

_FAMILY_ONLY = {"fc": {"activation": "--activation"},
                "cntk": {"readout": "--readout", "filter_size": "--filter-size", "fix_first_last": "--fix-first-last"}}
_FAMILY_DEFAULTS = {"activation": "relu", "readout": "gap", "filter_size": 3, "fix_first_last": False}


def resolve_family_options(args):
    """Refuse an option the chosen ``--family`` ignores (e.g. ``--activation`` with cntk, a ReLU CNN), then
    fill in the defaults of the family's own options (argparse leaves them ``None`` so that "given" is known)."""
    if getattr(args, "_family_resolved", False):
        return
    args._family_resolved = True
    for family, options in _FAMILY_ONLY.items():
        if family == args.family:
            continue
        for dest, flag in options.items():
            if getattr(args, dest, None) is not None:
                raise CLIError(f"{flag} applies only to --family {family}; --family {args.family} does not use it.")
    for dest, default in _FAMILY_DEFAULTS.items():
        if getattr(args, dest, None) is None:
            setattr(args, dest, default)


def _kernel_params(args):
    if args.family == "cntk":
        return dict(depth=args.depth, readout=args.readout, filter_size=args.filter_size, W_std=args.W_std,
                    b_std=args.b_std, fix_first_last=args.fix_first_last)
    return dict(depth=args.depth, activation=args.activation, W_std=args.W_std, b_std=args.b_std)


def kernel_call(family, a1, a2, wanted, dtype, params, error_bound=False):
    """One Gram (block) of ``family``; ``error_bound``: fc's proven bounds too (``wanted`` may then name the
    ``<g>_bound`` arrays, which come with their kernels)."""
    if family == "cntk":
        return kernels.cntk(a1, a2, **params)
    get = tuple(g for g in wanted if not g.endswith("_bound"))
    return kernels.fc(a1, a2, get=get, dtype=dtype, **params, **({"error_bound": True} if error_bound else {}))


def compute_kernel(args, wanted, error_bound=False):
    """The Gram(s) ``wanted`` as host arrays, with ``a1``, ``a2`` (the inputs on the target), the family's
    parameters and the target.  ``error_bound`` (fc; ``ntkref compare``): also ``<g>_bound``, the proven per-entry
    bounds of ``kernels.fc(..., error_bound=True)``, where the analysis covers the configuration; where not,
    ``args._error_bound_why`` says why (fc's NotImplementedError message) and no bound is returned."""
    resolve_family_options(args)
    tg = Target(args.backend)
    x1 = load_array(args.x1, "--x1")
    x2 = None if args.x2 is None else load_array(args.x2, "--x2")
    ndim, layout = (4, "(n, C, H, W), channels first") if args.family == "cntk" else (2, "(n, d), one sample a row")
    for name, x in (("--x1", x1), ("--x2", x2)):
        if x is not None and x.ndim != ndim:
            raise CLIError(f"{name}: expected a {ndim}-d array {layout}; got shape {x.shape}.")
    if x2 is not None and x2.shape[1:] != x1.shape[1:]:
        raise CLIError(f"--x1 and --x2 must have the same sample shape ({'C, H, W' if ndim == 4 else 'columns'}); "
                       f"got shapes {x1.shape} and {x2.shape}.")
    a1 = tg.put(x1, args.dtype)
    a2 = None if x2 is None else tg.put(x2, args.dtype)
    params = _kernel_params(args)
    bounded = False
    if error_bound and args.family == "fc" and x1.shape[0] > 0:
        try:  # does the analysis cover this configuration? (one row: it raises before computing anything big)
            kernels.fc(a1[:1, ...], None, get=tuple(wanted), dtype=args.dtype, error_bound=True, **params)
            bounded = True
        except NotImplementedError as exc:
            args._error_bound_why = str(exc)
    if bounded:
        wanted = list(wanted) + [g + "_bound" for g in wanted]
    # host copies, for the file: in blocks of rows, with a bar on a terminal (ntkref.cli._progress)
    out = gram_in_row_blocks(lambda b1, b2: kernel_call(args.family, b1, b2, wanted, args.dtype, params, bounded),
                             args.family,
                             a1, a2, wanted, command=args.command, quiet=getattr(args, "quiet", False))
    return out, a1, a2, params, tg


def get_list(get):
    return ["nngp", "ntk"] if get == "both" else [get]


def _loss(args):
    opts = {}
    if args.epsilon is not None:
        if args.loss != "epsilon_insensitive":
            raise CLIError("--epsilon applies to --loss epsilon_insensitive only.")
        opts["epsilon"] = args.epsilon
    return losses.get(args.loss, **opts)


def _load_machine_inputs(args, command, tg):
    if args.K is None or args.y is None:
        raise CLIError(f"'{command}' needs --K (Gram matrix, shape (n, n)) and --y (targets, shape (n,)).")
    K = load_array(args.K, "--K")
    y = load_array(args.y, "--y")
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise CLIError(f"--K: expected a square matrix (n, n); got shape {K.shape}.")
    if y.ndim != 1 or y.shape[0] != K.shape[0]:
        raise CLIError(f"--y: expected shape ({K.shape[0]},) to match --K; got {y.shape}.")
    if args.lam is None or args.loss is None:
        raise CLIError(f"'{command}' needs --loss and --lam.")
    return K, y, tg.put(K, args.dtype), tg.put(y, args.dtype)


def compute_fit(args, command="fit"):
    tg = Target(args.backend)
    K, y, Kx, yx = _load_machine_inputs(args, command, tg)
    loss = _loss(args)
    sol = machines.solve(Kx, yx, loss, args.lam, reduction=args.reduction)
    # g = Kα on the target, in float64 from the file's K (as the coefficients' reference outputs)
    K64 = Kx if Kx.dtype == tg.xp.float64 else tg.put(K, np.float64)
    g = K64 @ (sol.alpha_ if sol.alpha_.dtype == tg.xp.float64 else tg.xp.astype(sol.alpha_, tg.xp.float64))
    out = {"alpha": np.asarray(to_numpy(sol.alpha_)), "g_train": np.asarray(to_numpy(g))}
    return out, (K, y, loss, sol, tg, K64)


def compute_dynamics(args, command="dynamics"):
    tg = Target(args.backend)
    K, y, Kx, yx = _load_machine_inputs(args, command, tg)
    loss = _loss(args)
    K_test = None
    if args.K_test is not None:
        K_test = load_array(args.K_test, "--K-test")
        if K_test.ndim != 2 or K_test.shape[1] != K.shape[0]:
            raise CLIError(f"--K-test: expected shape (m, {K.shape[0]}); got {K_test.shape}.")
        K_test = tg.put(K_test, args.dtype)
    g0 = None
    if args.g0 is not None:
        g0 = load_array(args.g0, "--g0")
        if g0.shape != (K.shape[0],):
            raise CLIError(f"--g0: expected shape ({K.shape[0]},); got {g0.shape}.")
        g0 = tg.put(g0, args.dtype)
    if args.mode == "flow":
        if args.times is None:
            raise CLIError("'dynamics --mode flow' needs --times (comma-separated or a .npy file).")
        times = args.times
        if isinstance(times, str):
            times = load_array(times, "--times")
            if times.ndim != 1:
                raise CLIError(f"--times: expected a 1-d array; got shape {times.shape}.")
        traj = dynamics.gradient_flow(Kx, yx, loss, args.lam, [float(t) for t in np.asarray(times).tolist()],
                                      g0=g0, K_test=K_test, reduction=args.reduction)
    else:
        if args.lr is None or args.steps is None:
            raise CLIError("'dynamics --mode descent' needs --lr and --steps.")
        traj = dynamics.subgradient_descent(Kx, yx, loss, args.lam, args.lr, args.steps, batch_size=args.batch_size,
                                            seed=args.seed, K_test=K_test, g0=g0, reduction=args.reduction)
    out = {"times": traj.times, "g_train": traj.g_train, "alpha": traj.alpha, "g_test": traj.g_test}
    return {k: (None if v is None else np.asarray(to_numpy(v))) for k, v in out.items()}


def compute_certify(args, command="certify"):
    tg = Target(args.backend)
    if args.alpha is None or args.x_train is None or args.x_test is None:
        raise CLIError(f"'{command}' needs --alpha, --x-train and --x-test.")
    alpha = load_array(args.alpha, "--alpha")
    x_train = load_array(args.x_train, "--x-train")
    x_test = load_array(args.x_test, "--x-test")
    if x_train.ndim != 2 or x_test.ndim != 2 or x_train.shape[1] != x_test.shape[1]:
        raise CLIError(f"--x-train and --x-test must be 2-d with the same number of columns; got shapes "
                       f"{x_train.shape} and {x_test.shape}.")
    if alpha.shape != (x_train.shape[0],):
        raise CLIError(f"--alpha: expected shape ({x_train.shape[0]},) (one per training row); got {alpha.shape}.")
    y = None
    if args.y is not None:
        y = load_array(args.y, "--y")
        if y.shape != (x_test.shape[0],):
            raise CLIError(f"--y: expected shape ({x_test.shape[0]},) (one label per test row); got {y.shape}.")
        y = tg.put(y, args.dtype)
    alpha, x_train, x_test = tg.put(alpha, args.dtype), tg.put(x_train, args.dtype), tg.put(x_test, args.dtype)

    def call(part):  # the test points of ``part`` (each point's radius depends on that point alone)
        return certify.certified_radius(alpha, x_train, x_test[part, ...], method=args.method, norm=args.norm,
                                        y=None if y is None else y[part], tol=args.tol, return_info=True)

    # in chunks of test points, with a bar on a terminal (ntkref.cli._progress)
    radii, g = radii_in_chunks(call, x_test.shape[0], command=args.command, quiet=getattr(args, "quiet", False))
    return {"radii": radii, "g": g}
