"""The ``ntkref`` parser, the ``kernel``/``fit``/``dynamics``/``certify`` commands and :func:`main`.

Each command checks its ``--out`` path before any work, computes (:mod:`ntkref.cli._compute`), writes
atomically and prints one line (or JSON); ``compare`` is :func:`ntkref.cli._compare.cmd_compare`.
:func:`main` turns the user errors into one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from .. import __version__
from .._lib import backend as _backend
from .._lib.backend import BACKENDS, ENV_VAR, BackendError, check_environment
from .._lib.validation import InvalidParameterError
from ._compare import cmd_compare
from ._compute import compute_certify, compute_dynamics, compute_fit, compute_kernel, get_list
from ._io import EXIT_ERROR, CLIError, check_out, floats, times, write_atomic, wrote

# the first paragraph of ntkref.cli's docstring (the parser's description)
DESCRIPTION = "The ntkref command line: language-neutral access to the reference."


def _cmd_kernel(args):
    wanted = get_list(args.get)
    check_out(args.out, len(wanted) == 1, "--get both")
    out, *_ = compute_kernel(args, wanted)
    write_atomic(args.out, out, wanted[0])
    return wrote(args, "kernel", out, wanted[0])


def _cmd_fit(args):
    check_out(args.out, True, "")
    out, _ = compute_fit(args)
    write_atomic(args.out, out, "alpha")
    return wrote(args, "fit", out, "alpha")


def _cmd_dynamics(args):
    check_out(args.out, True, "")
    out = compute_dynamics(args)
    write_atomic(args.out, out, "g_train")
    return wrote(args, "dynamics", out, "g_train")


def _cmd_certify(args):
    check_out(args.out, True, "")
    out = compute_certify(args)
    write_atomic(args.out, out, "radii")
    return wrote(args, "certify", out, "radii")


# ---------------------------------------------------------------------------------------------
# parser
# ---------------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """argparse parser whose errors name the command (exit status 2)."""


def _common(p):
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help=f"array backend for the computation (default: ${ENV_VAR} or numpy, on the device "
                        f"${_backend.DEVICE_VAR} names)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON summary on stdout (outputs and their shapes, or compare's verdict and report; "
                        "the backend and device that ran) instead of text")
    p.add_argument("--dtype", choices=("float64", "float32"), default=None,
                   help="compute in this dtype (default: the inputs' floating dtype, float64 for integers)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (a bar on stderr shows the count, rate and time left of long work while "
                        "stderr is a terminal)")


def _kernel_options(p, required_x1=True):
    g = p.add_argument_group("kernel")
    g.add_argument("--family", choices=("fc", "cntk"), default="fc",
                   help="fully connected (ntkref.kernels.fc, default) or convolutional (ntkref.kernels.cntk)")
    g.add_argument("--x1", required=required_x1, metavar="FILE",
                   help="inputs, shape (n1, d) (cntk: (n1, C, H, W)): file.npy or file.npz:key")
    g.add_argument("--x2", default=None, metavar="FILE", help="second inputs, shape (n2, ...); default: x1 (symmetric)")
    g.add_argument("--depth", type=int, default=1, help="number of hidden (fc) or conv+ReLU (cntk) layers (default 1)")
    g.add_argument("--activation", choices=("relu", "erf", "tanh"), default=None,
                   help="fc: activation (default relu; an error with --family cntk, a ReLU CNN)")
    g.add_argument("--W-std", dest="W_std", type=floats, default=1.0, metavar="W",
                   help="weight std: one number or comma-separated, one per layer incl. the readout (default 1)")
    g.add_argument("--b-std", dest="b_std", type=floats, default=0.0, metavar="B",
                   help="bias std: one number or one per layer (default 0: no biases)")
    g.add_argument("--get", choices=("ntk", "nngp", "both"), default="ntk", help="which kernel (default ntk)")
    g.add_argument("--readout", choices=("gap", "flatten"), default=None, help="cntk: readout (default gap)")
    g.add_argument("--filter-size", dest="filter_size", type=int, default=None, help="cntk: odd filter size (default 3)")
    g.add_argument("--fix-first-last", dest="fix_first_last", action="store_true", default=None,
                   help="cntk: Arora et al.'s variant with the first and last layers fixed")


def _machine_options(p, required=True):
    g = p.add_argument_group("kernel machine")
    g.add_argument("--K", required=required, default=None, metavar="FILE", help="Gram matrix, shape (n, n)")
    g.add_argument("--y", required=required, default=None, metavar="FILE", help="targets, shape (n,) (±1 for classification)")
    g.add_argument("--loss", required=required, default=None,
                   choices=("hinge", "squared_hinge", "epsilon_insensitive", "squared", "logistic"))
    g.add_argument("--lam", required=required, default=None, type=float, help="λ of seed 000 eq. (7)")
    g.add_argument("--reduction", choices=("sum", "mean"), default="sum", help="Σ loss (eq. (7)) or mean (App. A)")
    g.add_argument("--epsilon", type=float, default=None, help="ε of the epsilon_insensitive loss (default 0.1)")


def _dynamics_options(p):
    g = p.add_argument_group("dynamics")
    g.add_argument("--mode", choices=("flow", "descent"), default="flow",
                   help="gradient flow (exact where possible) or full/minibatch subgradient descent")
    g.add_argument("--times", type=times, default=None, help="flow: times, comma-separated or a .npy file")
    g.add_argument("--lr", type=float, default=None, help="descent: step size η")
    g.add_argument("--steps", type=int, default=None, help="descent: number of steps")
    g.add_argument("--batch-size", dest="batch_size", type=int, default=None, help="descent: minibatch size")
    g.add_argument("--seed", type=int, default=None, help="descent: seed of the minibatch draws")
    g.add_argument("--g0", default=None, metavar="FILE", help="initial outputs g0 on the training points, shape (n,)")
    g.add_argument("--K-test", dest="K_test", default=None, metavar="FILE", help="test-train kernel, shape (m, n)")


def _certify_options(p, required=True):
    g = p.add_argument_group("certificate")
    g.add_argument("--alpha", required=required, default=None, metavar="FILE", help="coefficients, shape (n_train,)")
    g.add_argument("--x-train", dest="x_train", required=required, default=None, metavar="FILE",
                   help="training inputs, shape (n_train, d)")
    g.add_argument("--x-test", dest="x_test", required=required, default=None, metavar="FILE",
                   help="test inputs, shape (n_test, d)")
    g.add_argument("--method", choices=("tight", "paper"), default="tight", help="interval method (default tight)")
    g.add_argument("--norm", choices=("linf", "l2"), default="linf")
    g.add_argument("--tol", type=float, default=1e-4, help="relative bisection tolerance (default 1e-4)")
    if required:
        g.add_argument("--y", default=None, metavar="FILE", help="test labels ±1: misclassified points get radius 0")


def build_parser():
    """The argparse parser of ``ntkref`` (every command has ``--help``)."""
    parser = _Parser(prog="ntkref", description=DESCRIPTION,
                     epilog="Run 'ntkref COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"ntkref {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("kernel", help="NNGP/NTK Gram matrix of a fully connected net or a CNN",
                       description="Compute ntkref.kernels.fc(x1, x2, ...) (neural-tangents' convention: "
                                   "Σ⁽⁰⁾ = W₀² x·x'/d + b₀², NTK parameterisation) or, with --family cntk, "
                                   "ntkref.kernels.cntk(x1, x2, ...) and write it to --out "
                                   "(.npy: one kernel; .npz: keys 'nngp'/'ntk').")
    _kernel_options(p)
    p.add_argument("--out", required=True, metavar="FILE", help="output .npy or .npz")
    _common(p)
    p.set_defaults(func=_cmd_kernel)

    p = sub.add_parser("fit", help="exact kernel-machine coefficients (seed 000 eq. (7))",
                       description="α minimising (λ/2)αᵀKα + Σ l((Kα)ᵢ, yᵢ) (ntkref.machines.fit). --out .npy: α; "
                                   ".npz: keys 'alpha' and 'g_train' (= Kα).")
    _machine_options(p)
    p.add_argument("--out", required=True, metavar="FILE", help="output .npy or .npz")
    _common(p)
    p.set_defaults(func=_cmd_fit)

    p = sub.add_parser("dynamics", help="training trajectories of a kernel machine",
                       description="Gradient flow (ntkref.dynamics.gradient_flow) or subgradient descent "
                                   "(ntkref.dynamics.subgradient_descent) from α = 0. --out .npy: g_train "
                                   "(T, n); .npz: keys 'times', 'g_train', 'alpha', 'g_test'.")
    _machine_options(p)
    _dynamics_options(p)
    p.add_argument("--out", required=True, metavar="FILE", help="output .npy or .npz")
    _common(p)
    p.set_defaults(func=_cmd_dynamics)

    p = sub.add_parser("certify", help="certified radii of the two-layer NTK machine",
                       description="ntkref.certify.certified_radius(alpha, x_train, x_test) (seed 000 Thm 4.2). "
                                   "--out .npy: radii; .npz: keys 'radii' and 'g' (g(x_test)).")
    _certify_options(p)
    p.add_argument("--out", required=True, metavar="FILE", help="output .npy or .npz")
    _common(p)
    p.set_defaults(func=_cmd_certify)

    p = sub.add_parser("compare", help="compare your array with the reference (exit 1 on disagreement)",
                       description="Recompute the reference from the given inputs and compare --candidate with "
                                   "it: prints max absolute/relative errors, where, and whether they are within "
                                   "the tolerance (kernels: |K − K_ref| ≤ rtol·√(K_ref(x,x)K_ref(x',x')) + atol). "
                                   "Exit status 0 = agree, 1 = disagree, 2 = error.")
    p.add_argument("--kind", choices=("kernel", "fit", "dynamics", "certify"), required=True)
    p.add_argument("--candidate", required=True, metavar="FILE",
                   help="your array: the kernel (n1, n2) (--get both: a .npz with 'nngp' and 'ntk'), alpha (n,), "
                        "g_train (T, n) or radii (n_test,)")
    p.add_argument("--rtol", type=float, default=None,
                   help="tolerance, finite and >= 0 (kernel: normalised error, default 1e-10; fit/dynamics: "
                        "scaled, default 1e-8; certify: default 1e-3)")
    p.add_argument("--diag-rtol", dest="diag_rtol", type=float, default=None,
                   help="kernel: tolerance on the diagonal of a symmetric kernel (default --rtol)")
    p.add_argument("--atol", type=float, default=0.0, help="extra absolute tolerance, finite and >= 0 (default 0)")
    p.add_argument("--report", default=None, metavar="FILE.json",
                   help="also write the results as JSON: per-array summaries (max/median errors over the finite "
                        "entries), non-finite entries apart, worst entries with locations grouped as non_finite/"
                        "convention/precision/formula, per-entry verdict basis (proven or tested), hints (schema in ntkref.cli._verdict)")
    p.add_argument("--csv", default=None, metavar="FILE.csv",
                   help="also write the per-entry table (row, col, candidate, reference, abs/scaled error, the "
                        "tolerance used and whether the user's or ntkref's bound applied, whether the verdict is proven and its "
                        "basis) as CSV")
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="kernel: check N random entries of a Gram too large to read whole (--candidate a .npy "
                        "read as a memory map, or a .zarr array; the reference is computed for those pairs only; "
                        "draws seeded by --seed, default 0); the report states what N draws rule out (0 failures: "
                        "< 1-0.05^(1/N) ~ 3/N of the entries wrong at 95 %%)")
    p.add_argument("--rows", type=int, default=None, metavar="K",
                   help="kernel: check K random rows of the Gram whole (as --sample; may be combined with it)")
    _kernel_options(p, required_x1=False)
    _machine_options(p, required=False)  # its --y is also the test labels of --kind certify
    p.add_argument("--fit-intercept", dest="fit_intercept", action="store_true",
                   help="fit: the machine with an unregularised intercept f = K alpha + b (scikit-learn's SVC; "
                        "ntkref.kkt.fit_with_intercept); give the candidate's b with --intercept")
    p.add_argument("--intercept", default=None, metavar="B",
                   help="fit --fit-intercept: the candidate's intercept b, a number or a file holding one number "
                        "(.npy, FILE.npz:KEY)")
    _dynamics_options(p)
    _certify_options(p, required=False)
    _common(p)
    p.set_defaults(func=cmd_compare)
    return parser


def main(argv=None):
    """Run the CLI; returns the exit status (0 ok, 1 compare disagreement, 2 error)."""
    parser = build_parser()
    args = parser.parse_args(argv)  # --help and --version exit here, whatever NTKREF_BACKEND says
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    try:
        # `import ntkref` raises BackendError for a bad NTKREF_BACKEND/NTKREF_DEVICE, except in this command
        # (ntkref/__init__.py): here it is one line and exit status 2, like every usage error
        check_environment()
    except BackendError as exc:
        print(f"ntkref: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_ERROR
    try:
        return args.func(args)
    except (CLIError, InvalidParameterError, BackendError) as exc:
        message = " ".join(str(exc).split())  # one line
        print(f"ntkref {args.command}: error: {message}", file=sys.stderr)
        return EXIT_ERROR
    except (ValueError, TypeError, ArithmeticError, np.linalg.LinAlgError, OSError) as exc:
        message = " ".join(str(exc).split())  # one line
        print(f"ntkref {args.command}: error: {type(exc).__name__}: {message}", file=sys.stderr)
        return EXIT_ERROR
