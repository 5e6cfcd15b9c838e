r"""The ``ntkref`` command line: language-neutral access to the reference.

Inputs are ``.npy`` files or arrays of ``.npz`` files (``file.npz:key``; the key
may be omitted when the archive holds one array); outputs are ``.npy``/``.npz``.
Files are always read with ``numpy.load(..., allow_pickle=False)``: a pickled
or object array is refused.  Output paths (``--out``, ``compare --report``/``--csv``) are
checked before any work (an existing, writable folder; not itself a folder), and
outputs are written atomically (a temporary file in the same folder, then a
rename; the temporary file is removed on any error), so a failed command leaves
nothing behind.  Options that the chosen ``--family`` does not use (``--activation``
with ``cntk``; ``--readout``, ``--filter-size``, ``--fix-first-last`` with ``fc``)
are refused, and ``compare``'s ``--rtol``, ``--diag-rtol``, ``--atol`` must be
finite and ≥ 0.

Commands (``ntkref COMMAND --help`` documents each):

``kernel``
    NNGP/NTK of a fully connected net (``ntkref.kernels.fc``, neural-tangents'
    convention, docs/conventions.md, 'FC kernels'): ``ntkref kernel --x1 a.npy [--x2 b.npy] --depth 3
    --activation relu --W-std 1 --b-std 0 --get ntk --out k.npy``; with
    ``--family cntk`` the CNTK of seed 004 (``ntkref.kernels.cntk``, images
    (n, C, H, W), ``--readout gap|flatten``).
``fit``
    Exact kernel-machine coefficients α of seed 000 eq. (7) (``ntkref.machines.fit``).
``dynamics``
    Gradient-flow or subgradient-descent trajectories (``ntkref.dynamics``).
``certify``
    Certified ℓ∞/ℓ2 radii of the two-layer NTK machine (``ntkref.certify.certified_radius``).
``compare``
    Compare a user's array with the reference computed from the same inputs and
    print max/median absolute, relative and scaled errors over the finite entries,
    where, the non-finite entries apart, and whether each entry is within its
    tolerance max(user tolerance, ntkref's own certified bound for that entry);
    exit status 1 on disagreement.  ``--report FILE.json`` writes the numbers
    (per-array summaries, worst entries with (row, col) and input rows, grouped
    as non_finite / convention / precision; schema in :mod:`ntkref._compare`),
    ``--csv FILE.csv`` the per-entry table.  ``--get both`` compares a .npz with
    'nngp' and 'ntk'.  On disagreement it tests the usual convention slips
    (kernels: NNGP vs NTK, a constant factor such as Arora et al.'s d·2^L; fits:
    λ′ = 2λ, λ/2, nλ, λ/n, 1/λ) and prints a hint for each that explains the
    candidate; ``--kind fit`` also reports the candidate's own duality gap and
    KKT residual (:mod:`ntkref.kkt`).

Exit status: 0 success (``compare``: agreement), 1 ``compare`` found a
disagreement, 2 usage or input error (argparse's convention; nothing written;
one line on stderr, no traceback).

Where the work runs: inputs are read with NumPy, moved explicitly to the namespace
``NTKREF_BACKEND`` names on the device ``NTKREF_DEVICE`` names (``--backend``
overrides the namespace; NumPy by default), the computation runs there, and
the results are copied back to the host (``ntkref._backend.to_numpy``) only to
be written or printed.  So ``NTKREF_BACKEND=cupy ntkref kernel ...`` computes
on the GPU.  ``--json`` prints a machine-readable summary, and it, the one-line
messages and ``compare --report`` name the backend and device that ran
(``ntkref._backend.description()``, e.g. "cupy on <CUDA Device 0> (NVIDIA H200)").
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import tempfile

import numpy as np  # host-side file I/O and error reports (the computations run on the chosen backend)

from . import _backend
from . import _compare as _cmp
from ._backend import BACKENDS, ENV_VAR, BackendError, backend_name, default_device, default_namespace, device_of, to_numpy
from ._testing_report import kernel_error  # the one definition (validated), shared with ntkref.testing
from ._validation import InvalidParameterError

__all__ = ["main", "build_parser", "kernel_error", "CLIError"]

EXIT_OK, EXIT_DISAGREE, EXIT_ERROR = 0, 1, 2

# Documented accuracy of the reference, in the normalised measure of kernel_error
# (ntkref.kernels module docstring; tests/test_kernels.py and tests/test_golden.py check it).
KERNEL_ACCURACY = {"float64": 1e-13, "float32": 1e-5}


class CLIError(Exception):
    """A user error the CLI reports in one line (exit status 2)."""


# ---------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------
def _split_spec(spec):
    """'file.npz:key' → ('file.npz', 'key'); anything else → (spec, None)."""
    head, sep, key = spec.rpartition(":")
    if sep and head.endswith(".npz") and key and os.sep not in key:
        return head, key
    return spec, None


def load_array(spec, name):
    """Load a numeric array from ``file.npy`` or ``file.npz[:key]`` without unpickling."""
    path, key = _split_spec(spec)
    if not (path.endswith(".npy") or path.endswith(".npz")):
        raise CLIError(f"{name}: {path!r} must be a .npy file or a .npz archive (file.npz or file.npz:key).")
    if not os.path.isfile(path):
        raise CLIError(f"{name}: no such file {path!r}.")
    try:
        with open(path, "rb") as f:
            magic = f.read(6)
    except OSError as exc:
        raise CLIError(f"{name}: cannot read {path!r}: {exc}") from None
    # numpy.load treats an unrecognised file as a pickle: check the format's magic bytes first
    expected = b"\x93NUMPY" if path.endswith(".npy") else b"PK"
    if not magic.startswith(expected):
        kind = "a .npy file" if path.endswith(".npy") else "a .npz (zip) archive"
        raise CLIError(f"{name}: cannot read {path!r}: it is not {kind} (wrong magic bytes).")
    try:
        if path.endswith(".npy"):
            if key is not None:
                raise CLIError(f"{name}: a key is only meaningful for .npz archives ({spec!r}).")
            arr = np.load(path, allow_pickle=False)
        else:
            with np.load(path, allow_pickle=False) as archive:
                keys = list(archive.files)
                if key is None:
                    if len(keys) != 1:
                        raise CLIError(f"{name}: {path!r} holds {len(keys)} arrays ({', '.join(keys) or 'none'}); "
                                       f"name one as {path}:KEY.")
                    key = keys[0]
                if key not in keys:
                    raise CLIError(f"{name}: {path!r} has no array {key!r} (it has {', '.join(keys) or 'none'}).")
                arr = archive[key]
    except CLIError:
        raise
    except ValueError as exc:
        if "allow_pickle" in str(exc) or "Object arrays" in str(exc) or "pickle" in str(exc).lower():
            raise CLIError(f"{name}: {spec!r} holds a pickled (object) array; ntkref never unpickles files "
                           "(allow_pickle=False). Save a numeric array, e.g. numpy.save(path, x.astype(float)).") from None
        raise CLIError(f"{name}: cannot read {spec!r}: {exc}") from None
    except Exception as exc:  # corrupt files, zip errors, permissions
        raise CLIError(f"{name}: cannot read {spec!r}: {type(exc).__name__}: {exc}") from None
    if arr.dtype.kind not in "biuf":
        raise CLIError(f"{name}: {spec!r} has dtype {arr.dtype}; a real numeric array is required.")
    return arr


def _check_out(path, single_ok, multi):
    """Validate an output path before any work is done."""
    if not (path.endswith(".npy") or path.endswith(".npz")):
        raise CLIError(f"--out: {path!r} must end in .npy or .npz.")
    if path.endswith(".npy") and not single_ok:
        raise CLIError(f"--out: {multi} needs a .npz output (several arrays); got {path!r}.")
    _check_writable(path, "--out")


def _check_writable(path, option):
    """Before any work: ``path`` is not a folder, its folder exists and a file can be created in it."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CLIError(f"{option}: the folder {folder!r} does not exist.")
    if os.path.isdir(path):
        raise CLIError(f"{option}: {path!r} is a folder.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CLIError(f"{option}: the folder {folder!r} is not writable.")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise CLIError(f"{option}: {path!r} exists and is not writable.")


def _chmod_like_new_file(path):
    """mkstemp creates 0600 files; give the output the permissions a plain open() would (0666 & ~umask)."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def write_atomic(path, arrays, main_key):
    """Write ``arrays`` (dict of NumPy arrays) to ``path`` (.npy: ``main_key`` only) atomically."""

    def write(f):
        if path.endswith(".npy"):
            np.save(f, to_numpy(arrays[main_key]), allow_pickle=False)
        else:
            np.savez(f, **{k: to_numpy(v) for k, v in arrays.items() if v is not None})

    _replace_atomically(path, "wb", write, "--out")


def _replace_atomically(path, mode, write, option):
    """``write(f)`` into a temporary file in ``path``'s folder, then ``os.replace`` it onto ``path``.

    The temporary file is removed on any error (nothing is left behind); an OSError becomes a one-line
    CLIError naming ``option``.
    """
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".ntkref-", suffix=".tmp")
    except OSError as exc:
        raise CLIError(f"{option}: cannot write in {folder!r} ({exc.strerror or exc}).") from None
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
        _chmod_like_new_file(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise CLIError(f"{option}: cannot write {path!r} ({exc.strerror or exc}).") from None
        raise


# ---------------------------------------------------------------------------------------------
# argument types and namespaces
# ---------------------------------------------------------------------------------------------
def _floats(text):
    """'1.0' → 1.0; '1,1.414,1' → [1.0, 1.414, 1.0] (one value per layer)."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or comma-separated numbers, got {text!r}") from None
    return values[0] if len(values) == 1 else values


def _times(text):
    """Times: a .npy/.npz file or comma-separated numbers."""
    path, _ = _split_spec(text)
    if path.endswith(".npy") or path.endswith(".npz"):
        return text
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated times or a .npy file, got {text!r}") from None


class _Target:
    """Where a command computes: a namespace and a device.

    Without ``--backend`` (or with the one ``NTKREF_BACKEND`` names) the default namespace on the device of
    ``NTKREF_DEVICE`` (:func:`ntkref._backend.asarray`); another ``--backend`` uses that library's default device.
    """

    def __init__(self, backend):
        if backend is None or backend == backend_name():
            self.xp, self.device, self.default = default_namespace(), default_device(), True
            return
        from ._backend import _MODULES

        try:
            self.xp = importlib.import_module(_MODULES[backend])
        except ImportError as exc:
            raise BackendError(f"--backend {backend!r} cannot be imported ({exc}); choose another of "
                               f"{', '.join(BACKENDS)}.") from None
        self.name, self.device, self.default = backend, None, False

    def put(self, arr, dtype=None):
        """A host (NumPy) array cast on the host (``dtype``, or float64 for integers), then copied to the target."""
        arr = to_numpy(arr)  # file data or lists: already on the host; a device array is copied explicitly
        if dtype is not None:
            arr = arr.astype(dtype)
        elif arr.dtype.kind in "biu":
            arr = arr.astype(np.float64)
        if self.default:
            return _backend.asarray(arr)
        return self.xp.asarray(arr)

    def description(self):
        """"<backend> on <device>" (``ntkref._backend.description()`` for the default target)."""
        if self.default:
            return _backend.description()
        return f"{self.name} on {device_of(self.xp.zeros(0))}"





def _module(name, command):
    try:
        return importlib.import_module(f"ntkref.{name}")
    except ImportError as exc:
        raise CLIError(f"'ntkref {command}' needs the module ntkref.{name}, which is not available in this "
                       f"installation ({exc}).") from None


# ---------------------------------------------------------------------------------------------
# computations (shared by the commands and by compare)
# ---------------------------------------------------------------------------------------------
_FAMILY_ONLY = {"fc": {"activation": "--activation"},
                "cntk": {"readout": "--readout", "filter_size": "--filter-size", "fix_first_last": "--fix-first-last"}}
_FAMILY_DEFAULTS = {"activation": "relu", "readout": "gap", "filter_size": 3, "fix_first_last": False}


def _resolve_family_options(args):
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


def _kernel_call(family, a1, a2, wanted, dtype, params):
    from .kernels import fc

    if family == "cntk":
        from .kernels import cntk

        return cntk(a1, a2, **params)
    return fc(a1, a2, get=tuple(wanted), dtype=dtype, **params)


def _compute_kernel(args, wanted):
    _resolve_family_options(args)
    tg = _Target(args.backend)
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
    res = _kernel_call(args.family, a1, a2, wanted, args.dtype, params)
    out = {g: np.asarray(to_numpy(getattr(res, g))) for g in wanted}  # host copies, for the file
    return out, a1, a2, params, tg


def _get_list(get):
    return ["nngp", "ntk"] if get == "both" else [get]


def _loss(args, command):
    losses = _module("losses", command)
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


def _compute_fit(args, command="fit"):
    machines = _module("machines", command)
    tg = _Target(args.backend)
    K, y, Kx, yx = _load_machine_inputs(args, command, tg)
    loss = _loss(args, command)
    sol = machines.solve(Kx, yx, loss, args.lam, reduction=args.reduction)
    # g = Kα on the target, in float64 from the file's K (as the coefficients' reference outputs)
    K64 = Kx if Kx.dtype == tg.xp.float64 else tg.put(K, np.float64)
    g = K64 @ (sol.alpha_ if sol.alpha_.dtype == tg.xp.float64 else tg.xp.astype(sol.alpha_, tg.xp.float64))
    out = {"alpha": np.asarray(to_numpy(sol.alpha_)), "g_train": np.asarray(to_numpy(g))}
    return out, (K, y, loss, sol, machines, tg, K64)


def _compute_dynamics(args, command="dynamics"):
    dynamics = _module("dynamics", command)
    tg = _Target(args.backend)
    K, y, Kx, yx = _load_machine_inputs(args, command, tg)
    loss = _loss(args, command)
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


def _compute_certify(args, command="certify"):
    certify = _module("certify", command)
    tg = _Target(args.backend)
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
    radii, info = certify.certified_radius(tg.put(alpha, args.dtype), tg.put(x_train, args.dtype),
                                           tg.put(x_test, args.dtype), method=args.method, norm=args.norm,
                                           y=y, tol=args.tol, return_info=True)
    return {"radii": np.asarray(to_numpy(radii)), "g": np.asarray(to_numpy(info["g"]))}


# ---------------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------------
def _wrote(args, command, out, main_key):
    """The message of a command that wrote ``out`` (one line, or with ``--json`` a JSON object) on stdout."""
    written = [main_key] if args.out.endswith(".npy") else [k for k, v in out.items() if v is not None]
    backend = _Target(args.backend).description()
    if args.json:
        print(json.dumps({"command": command, "out": args.out, "backend": backend,
                          "arrays": {k: {"shape": list(out[k].shape), "dtype": str(out[k].dtype)} for k in written}},
                         indent=1))
    else:
        print(f"ntkref {command}: wrote {', '.join(written)} of shape {out[main_key].shape} to {args.out} "
              f"(computed on {backend})")
    return EXIT_OK


def _cmd_kernel(args):
    wanted = _get_list(args.get)
    _check_out(args.out, len(wanted) == 1, "--get both")
    out, *_ = _compute_kernel(args, wanted)
    write_atomic(args.out, out, wanted[0])
    return _wrote(args, "kernel", out, wanted[0])


def _cmd_fit(args):
    _check_out(args.out, True, "")
    out, _ = _compute_fit(args)
    write_atomic(args.out, out, "alpha")
    return _wrote(args, "fit", out, "alpha")


def _cmd_dynamics(args):
    _check_out(args.out, True, "")
    out = _compute_dynamics(args)
    write_atomic(args.out, out, "g_train")
    return _wrote(args, "dynamics", out, "g_train")


def _cmd_certify(args):
    _check_out(args.out, True, "")
    out = _compute_certify(args)
    write_atomic(args.out, out, "radii")
    return _wrote(args, "certify", out, "radii")


def _fmt_loc(loc):
    return "(" + ", ".join(str(int(i)) for i in loc) + ")"


# ---------------------------------------------------------------------------------------------
# compare: structured results (ntkref._compare), ntkref's own error bounds, convention hints
# ---------------------------------------------------------------------------------------------
def _fc_bound(activation, depth, dtype_name):
    """(bound, source) in the normalised measure for kernels.fc (ntkref.testing.certified_bound)."""
    from ._testing_report import certified_bound

    return certified_bound("fc", depth=depth, activation=activation, dtype=dtype_name)


def _cntk_bound(dtype_name, params):
    """(bound, source) in the normalised measure for kernels.cntk (ntkref.testing.certified_bound)."""
    from ._testing_report import certified_bound

    return certified_bound("cntk", depth=params["depth"], dtype=dtype_name)


def _load_candidates(args, wanted):
    """{'ntk': array} (or both kernels for --get both: a .npz holding 'nngp' and 'ntk')."""
    if len(wanted) == 1:
        return {wanted[0]: load_array(args.candidate, "--candidate")}
    path, key = _split_spec(args.candidate)
    if key is not None or not path.endswith(".npz"):
        raise CLIError(f"--candidate: --get both needs a .npz archive holding both 'nngp' and 'ntk' (name the "
                       f"file, no key); got {args.candidate!r}.")
    return {k: load_array(f"{path}:{k}", "--candidate") for k in wanted}


# constant factors that are usual normalisation slips (name, value as a function of depth L, input dim d, C, P)
def _known_factors(depth, d, family, x1_shape):
    out = [("2", 2.0, "a factor 2 (a ½ convention?)"), ("1/2", 0.5, "a factor ½ (a ½ convention?)"),
           ("2^L", 2.0 ** depth, "c_σ = 2 per ReLU layer (Arora et al.'s normalisation, docs/conventions.md)"),
           ("2^-L", 0.5 ** depth, "c_σ = 2 per ReLU layer, the other way round")]
    if family == "fc":
        out += [("d", float(d), "Σ⁽⁰⁾ = xᵀx′ without 1/d (docs/conventions.md, 'FC kernels')"),
                ("d·2^L", d * 2.0 ** depth, "Arora et al.'s NTK: d·2^L·Θ (kernels.arora_ntk)"),
                ("1/d", 1.0 / d, "Σ⁽⁰⁾ divided by d twice")]
    else:
        C, P = x1_shape[1], x1_shape[2] * x1_shape[3]
        out += [("C", float(C), "Σ⁽⁰⁾ summed over channels instead of averaged (Arora et al.: C·Θ)"),
                ("C·2^L", C * 2.0 ** depth, "Arora et al.'s CNTK-GAP: C·2^L·Θ"),
                ("C·P·2^L", C * P * 2.0 ** depth, "Arora et al.'s CNTK-V (trace readout): C·P·2^L·Θ")]
    return out


def _kernel_hints(args, get, cmp, a1, a2, params, tg, diags):
    """Convention slips that explain a disagreeing kernel: the other kernel (NNGP vs NTK), a constant factor."""
    hints = []
    other = "nngp" if get == "ntk" else "ntk"
    K_other = np.asarray(to_numpy(getattr(_kernel_call(args.family, a1, a2, [other], args.dtype, params), other)))
    d1, d2 = diags[other]
    scale = np.sqrt(np.maximum(d1, 0))[:, None] * np.sqrt(np.maximum(d2, 0))[None, :]
    trial = _cmp.compare_arrays(other, cmp.C, K_other, scale, cmp.user_tol, cmp.bound, cmp.atol, cmp.measure)
    if trial.agree:
        hints.append({"array": get, "hypothesis": f"{other} instead of {get}",
                      "message": f"the candidate matches the {other.upper()}, not the {get.upper()} "
                                 f"(nngp vs ntk?)", "max_scaled_error": _finite_max(trial.err)})
    C, R, s = cmp.C, cmp.R, cmp.scale
    use = cmp.finite & (np.abs(R) >= 1e-3 * s) & (s > 0)
    if use.any():
        c = float(np.median(C[use] / R[use]))
        if math.isfinite(c) and c != 0 and abs(c - 1) > 1e-6:
            trial = _cmp.compare_arrays(get, C, c * R, abs(c) * s, cmp.user_tol, cmp.bound, cmp.atol, cmp.measure)
            if trial.agree:
                d = int(np.prod(a1.shape[1:])) if args.family == "fc" else None
                names = [(n, why) for n, v, why in _known_factors(args.depth, d, args.family, a1.shape)
                         if abs(c / v - 1) < 1e-9]
                label = f" = {names[0][0]}: {names[0][1]}" if names else ""
                hints.append({"array": get, "hypothesis": f"factor {c!r}",
                              "message": f"the candidate is {c:.12g} × the reference{label}",
                              "max_scaled_error": _finite_max(trial.err)})
    return hints


def _finite_max(a):
    a = np.asarray(a, dtype=np.float64)
    return float(np.max(a)) if a.size else 0.0


def _compare_kernel(args, cands):
    from .kernels import fc_diagonal

    wanted = list(cands)
    out, a1, a2, params, tg = _compute_kernel(args, wanted)
    for g in wanted:
        if cands[g].shape != out[g].shape:
            raise CLIError(f"--candidate: {g} of shape {cands[g].shape} does not match the kernel's shape "
                           f"{out[g].shape} (n1 = rows of --x1, n2 = rows of --x2 or of --x1).")
    both = ("nngp", "ntk")
    if args.family == "cntk":  # no O(n) diagonal routine: the self-kernels' diagonals (O(n²) pairs)
        def self_diag(a):
            res = _kernel_call("cntk", a, None, list(both), args.dtype, params)
            return {g: np.diagonal(np.asarray(to_numpy(getattr(res, g)))).copy() for g in both}
        s1 = self_diag(a1)
        s2 = s1 if a2 is None else self_diag(a2)
    else:
        f1 = fc_diagonal(a1, dtype=args.dtype, **params)
        f2 = f1 if a2 is None else fc_diagonal(a2, dtype=args.dtype, **params)
        s1 = {g: np.asarray(to_numpy(getattr(f1, g))) for g in both}
        s2 = {g: np.asarray(to_numpy(getattr(f2, g))) for g in both}
    diags = {g: (s1[g], s2[g]) for g in both}
    shape = out[wanted[0]].shape
    diag = np.zeros(shape, dtype=bool)
    if a2 is None:
        np.fill_diagonal(diag, True)
    rtol = args.rtol if args.rtol is not None else 1e-10
    diag_rtol = args.diag_rtol if args.diag_rtol is not None else rtol
    dtype_name = args.dtype or ("float32" if a1.dtype == tg.xp.float32 else "float64")
    x1h = load_array(args.x1, "--x1")
    x2h = None if args.x2 is None else load_array(args.x2, "--x2")
    measure = "normalised error |K - K_ref| / sqrt(K_ref(x,x) K_ref(x',x'))"
    comparisons, hints, sources = [], [], {}
    for g in wanted:
        d1, d2 = diags[g]
        scale = np.sqrt(np.maximum(d1, 0.0))[:, None] * np.sqrt(np.maximum(d2, 0.0))[None, :]
        if args.family == "cntk":
            bound, src = _cntk_bound(dtype_name, params)
        else:
            bound, src = _fc_bound(args.activation, args.depth, dtype_name)
        sources[g] = src
        cmp = _cmp.compare_arrays(g, cands[g], out[g], scale, np.where(diag, diag_rtol, rtol), bound, args.atol,
                                  measure, parts={"diagonal": diag, "off-diagonal": ~diag} if a2 is None else None,
                                  inputs=(x1h, x2h))
        if not cmp.agree:
            h = _kernel_hints(args, g, cmp, a1, a2, params, tg, diags)
            cmp.convention = bool(h)
            hints += h
        comparisons.append(cmp)
    what = ", ".join(f"{k}={v!r}" for k, v in params.items())
    lines = [f"ntkref compare --kind kernel: {'/'.join(wanted)} of {args.family}({what}), shape {shape}"]
    for cmp in comparisons:
        lines += cmp.lines()
    accuracy = _fc_bound("relu", 0, dtype_name)[0]
    if args.family == "cntk":
        caveat = f" (cntk: {sources[wanted[0]]})"
    elif args.activation not in ("relu", "erf"):
        caveat = " (quadrature activations: plus the Gauss-Hermite rule's error)"
    else:
        caveat = ""
    lines.append(f"  documented accuracy of ntkref in this measure: {accuracy:g}{caveat}; "
                 f"tolerance: {rtol:g} off-diagonal, {diag_rtol:g} diagonal, atol {args.atol:g}; "
                 "per entry the larger of the tolerance and ntkref's bound applies")
    reference = {"function": f"ntkref.kernels.{args.family}", "get": wanted,
                 "params": {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in params.items()}}
    tolerance = {"rtol": rtol, "diag_rtol": diag_rtol, "atol": args.atol,
                 "ntkref_bound_source": "; ".join(f"{g}: {s}" for g, s in sources.items())}
    return comparisons, lines, hints, reference, tolerance, {}


def _scaled(C, R, args, name, default_rtol, bound=0.0):
    """Comparison in the scaled measure |C − R| / max(1, max|R|) (fits, trajectories, radii)."""
    if C.shape != R.shape:
        raise CLIError(f"--candidate: shape {C.shape} does not match the reference {name} shape {R.shape}.")
    R = np.asarray(R, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(R)))) if R.size else 1.0
    rtol = args.rtol if args.rtol is not None else default_rtol
    measure = f"scaled error |cand - ref| / max(1, max|ref|) (max|ref| = {scale:.6g})"
    return _cmp.compare_arrays(name, C, R, scale, rtol, np.asarray(bound) / scale, args.atol, measure), rtol


def _fit_bound(sol, K64, tg, n, reduction):
    """ntkref's per-entry bound on g = Kα (absolute): √K_ii·√(2·gap_sum/λ_sum) (λ-strong convexity of (7) in β:
    |g(xᵢ) − g*(xᵢ)| ≤ √K(xᵢ,xᵢ)·‖β − β*‖, machines' ``beta_error_bound``; the gap as computed, clipped at 0, plus
    its rounding estimate ``gap_rounding``) plus
    the rounding of the product Kα (n·eps·(|K||α|)ᵢ); only that rounding when λ = 0 (closed form)."""
    lam_sum = getattr(sol, "lam_sum", 0.0)
    Kh = np.asarray(to_numpy(K64), dtype=np.float64)
    a = np.asarray(to_numpy(sol.alpha_), dtype=np.float64)
    eps = np.finfo(np.float64).eps
    rounding = n * eps * (np.abs(Kh) @ np.abs(a))
    if not lam_sum > 0:
        return rounding
    mult = n if reduction == "mean" else 1
    gap = (max(float(sol.duality_gap), 0.0) + getattr(sol, "gap_rounding", 0.0)) * mult  # as beta_error_bound
    return np.sqrt(np.maximum(np.diag(Kh), 0.0)) * math.sqrt(2.0 * gap / lam_sum) + rounding


def _candidate_certificate(alpha_c, Kx, yx, loss, lam, reduction, machines):
    """The candidate's own objective, duality gap and KKT residual (ntkref.kkt if present, else ntkref.machines)."""
    res = {"objective": float(machines.objective(alpha_c, Kx, yx, loss, lam, reduction=reduction))}
    try:
        kkt = importlib.import_module("ntkref.kkt")
    except ImportError:
        kkt = None
    try:
        res["duality_gap"] = float((kkt or machines).duality_gap(alpha_c, Kx, yx, loss, lam, reduction=reduction))
    except (InvalidParameterError, ValueError, ArithmeticError) as exc:
        res["duality_gap"], res["duality_gap_error"] = None, str(exc)
    if kkt is not None:
        res["kkt_residual"] = float(kkt.kkt_residual(alpha_c, Kx, yx, loss, lam, reduction=reduction))
    else:
        res["kkt_residual"] = None
    return res


# λ′ trials of compare --kind fit: (factor as a function of (λ, n), hypothesis, message)
_LAM_TRIALS = (
    (lambda lam, n: 2 * lam, "lam' = 2 lam", "candidate matches lam' = 2 lam (λ vs λ/2 convention? e.g. the squared "
                                             "loss with ½, or KernelRidge's alpha = λ/2 read as λ)"),
    (lambda lam, n: lam / 2, "lam' = lam/2", "candidate matches lam' = lam/2 (λ/2 vs λ convention?)"),
    (lambda lam, n: n * lam, "lam' = n lam", "candidate matches lam' = n lam (sum vs mean: the candidate averages the "
                                             "loss where the sum was asked, or the other way round?)"),
    (lambda lam, n: lam / n, "lam' = lam/n", "candidate matches lam' = lam/n (mean vs sum: the candidate sums the "
                                             "loss where the mean was asked, or the other way round?)"),
    (lambda lam, n: 1 / lam, "lam' = 1/lam", "candidate matches lam' = 1/lam (C vs λ: an SVM's C = 1/λ?)"),
)


def _fit_hints(args, g_c, cmp, Kx, yx, loss, machines, tg, K64, n):
    import warnings

    hints = []
    tried = set()
    for fn, hypothesis, message in _LAM_TRIALS:
        lam2 = fn(args.lam, n)
        if not (math.isfinite(lam2) and lam2 > 0) or lam2 == args.lam or lam2 in tried:
            continue
        tried.add(lam2)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sol2 = machines.solve(Kx, yx, loss, lam2, reduction=args.reduction)
        except (InvalidParameterError, ValueError, ArithmeticError, np.linalg.LinAlgError):
            continue
        a2 = sol2.alpha_ if sol2.alpha_.dtype == tg.xp.float64 else tg.xp.astype(sol2.alpha_, tg.xp.float64)
        R2 = np.asarray(to_numpy(K64 @ a2))
        trial, _ = _scaled(g_c, R2, args, "g_train", 1e-8, _fit_bound(sol2, K64, tg, n, args.reduction))
        if trial.agree:
            hints.append({"array": "g_train", "hypothesis": hypothesis, "lam_prime": lam2,
                          "message": f"{message} [lam' = {lam2!r}]", "max_scaled_error": _finite_max(trial.err)})
    return hints


def _compare_fit(args, candidate):
    out, (K, y, loss, sol, machines, tg, K64) = _compute_fit(args, "compare")
    if candidate.shape != out["alpha"].shape:
        raise CLIError(f"--candidate: expected coefficients alpha of shape {out['alpha'].shape}; got "
                       f"{candidate.shape}.")
    n = K.shape[0]
    g_c = np.asarray(to_numpy(K64 @ tg.put(candidate, np.float64)))
    bound = _fit_bound(sol, K64, tg, n, args.reduction)
    cmp, rtol = _scaled(g_c, out["g_train"], args, "g_train", 1e-8, bound)
    Kx, yx = tg.put(K, args.dtype), tg.put(y, args.dtype)
    cand = _candidate_certificate(tg.put(candidate, args.dtype), Kx, yx, loss, args.lam, args.reduction, machines)
    hints = []
    if not cmp.agree:
        hints = _fit_hints(args, g_c, cmp, Kx, yx, loss, machines, tg, K64, n)
        cmp.convention = bool(hints)
    lines = [f"ntkref compare --kind fit: loss {loss.name!r}, lam {args.lam!r}, reduction {args.reduction!r}"]
    lines += cmp.lines()
    lines.append(f"  compared on the training outputs g = K alpha (alpha is not unique when K is singular); tolerance: "
                 f"{rtol:g} (scaled), atol {args.atol:g}; ntkref's bound per entry: sqrt(K_ii)·sqrt(2·gap/lam) "
                 f"(max {float(np.max(bound)) / cmp.scale.flat[0] if bound.size else 0.0:.3g} scaled)")
    gap_c = cand["duality_gap"]
    kkt_c = cand["kkt_residual"]
    lines.append(f"  objective eq. (7): candidate {cand['objective']!r}, reference {sol.primal_objective!r} "
                 f"(reference duality gap {sol.duality_gap:.3e})")
    lines.append("  candidate's own certificate: duality gap "
                 + ("n/a" if gap_c is None else f"{gap_c:.3e}") + ", KKT residual "
                 + ("n/a (ntkref.kkt not installed)" if kkt_c is None else f"{kkt_c:.3e}"))
    reference = {"function": "ntkref.machines.solve", "params": {"loss": loss.name, "lam": args.lam,
                                                                "reduction": args.reduction}}
    tolerance = {"rtol": rtol, "atol": args.atol,
                 "ntkref_bound_source": "sqrt(K_ii)·sqrt(2·gap_sum/lam_sum) + rounding (λ-strong convexity of "
                                        "eq. (7) in β; the reference's duality gap)"}
    extra = {"candidate": cand, "reference_certificate": {"objective": float(sol.primal_objective),
                                                          "duality_gap": float(sol.duality_gap)}}
    return [cmp], lines, hints, reference, tolerance, extra


def _check_tolerances(args):
    """--rtol, --diag-rtol and --atol must be finite and ≥ 0 (a NaN tolerance would make every entry agree)."""
    for flag, value in (("--rtol", args.rtol), ("--diag-rtol", args.diag_rtol), ("--atol", args.atol)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise CLIError(f"{flag}: must be a finite number >= 0; got {value!r}.")


def _json_ready(v):
    """Replace non-finite floats by None (the report lists their texts beside them)."""
    if isinstance(v, dict):
        return {k: _json_ready(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_ready(x) for x in v]
    if isinstance(v, (np.floating, np.integer, np.bool_)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _cmd_compare(args):
    _check_tolerances(args)
    for option, path, ext in (("--report", args.report, ".json"), ("--csv", args.csv, ".csv")):
        if path is not None:
            if not path.endswith(ext):
                raise CLIError(f"{option}: {path!r} must end in {ext}.")
            _check_writable(path, option)
    if args.kind == "kernel":
        _resolve_family_options(args)
        if args.x1 is None:
            raise CLIError("compare --kind kernel needs --x1 (and optionally --x2).")
        cands = _load_candidates(args, _get_list(args.get))
        comparisons, lines, hints, reference, tolerance, extra = _compare_kernel(args, cands)
    else:
        candidate = load_array(args.candidate, "--candidate")
        if args.kind == "fit":
            comparisons, lines, hints, reference, tolerance, extra = _compare_fit(args, candidate)
        elif args.kind == "dynamics":
            out = _compute_dynamics(args, "compare")
            cmp, rtol = _scaled(candidate, out["g_train"], args, "g_train", 1e-8)
            lines = [f"ntkref compare --kind dynamics: mode {args.mode!r}, loss {args.loss!r}, lam {args.lam!r}"]
            lines += cmp.lines() + [f"  compared on g_train, shape (times or steps, n); tolerance: {rtol:g} "
                                    f"(scaled), atol {args.atol:g}; no stated error bound of ntkref here"]
            comparisons, hints, extra = [cmp], [], {}
            reference = {"function": f"ntkref.dynamics.{'gradient_flow' if args.mode == 'flow' else 'subgradient_descent'}",
                         "params": {"loss": args.loss, "lam": args.lam, "reduction": args.reduction}}
            tolerance = {"rtol": rtol, "atol": args.atol, "ntkref_bound_source": "none stated (0)"}
        else:
            out = _compute_certify(args, "compare")
            radii = out["radii"]
            cmp, rtol = _scaled(candidate, radii, args, "radii", 1e-3, args.tol * np.abs(radii))
            lines = [f"ntkref compare --kind certify: method {args.method!r}, norm {args.norm!r}"]
            lines += cmp.lines() + [f"  certified radii (the reference's bisection tolerance is {args.tol:g} "
                                    f"relative, its per-entry bound); tolerance: {rtol:g} (scaled), atol {args.atol:g}"]
            comparisons, hints, extra = [cmp], [], {}
            reference = {"function": "ntkref.certify.certified_radius",
                         "params": {"method": args.method, "norm": args.norm, "tol": args.tol}}
            tolerance = {"rtol": rtol, "atol": args.atol,
                         "ntkref_bound_source": "tol·radius (the bisection's relative tolerance)"}
    for h in hints:
        lines.append(f"  hint: {h['message']}")
    agree = all(c.agree for c in comparisons)
    backend = _Target(args.backend).description()
    lines.append(f"  reference computed on {backend}")
    lines.append("RESULT: " + ("AGREE (within tolerance)" if agree else "DISAGREE (outside tolerance)"))
    report = _json_ready(_cmp.report_dict(kind=args.kind, comparisons=comparisons, backend=backend,
                                          reference=reference, tolerance=tolerance, hints=hints, lines=lines,
                                          extra=extra))
    text = json.dumps(report, indent=1, allow_nan=False)
    print(text if args.json else "\n".join(lines))
    if args.report is not None:
        _replace_atomically(args.report, "w", lambda f: f.write(text), "--report")
    if args.csv is not None:
        table = _cmp.csv_text(comparisons)
        _replace_atomically(args.csv, "w", lambda f: f.write(table), "--csv")
    return EXIT_OK if agree else EXIT_DISAGREE


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
    g.add_argument("--W-std", dest="W_std", type=_floats, default=1.0, metavar="W",
                   help="weight std: one number or comma-separated, one per layer incl. the readout (default 1)")
    g.add_argument("--b-std", dest="b_std", type=_floats, default=0.0, metavar="B",
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
    g.add_argument("--times", type=_times, default=None, help="flow: times, comma-separated or a .npy file")
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
    parser = _Parser(prog="ntkref", description=__doc__.split("\n\n")[0].replace("``", ""),
                     epilog="Run 'ntkref COMMAND --help' for the options of a command.")
    from . import __version__

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
                        "convention/precision, hints (schema in ntkref._compare)")
    p.add_argument("--csv", default=None, metavar="FILE.csv",
                   help="also write the per-entry table (row, col, candidate, reference, abs/scaled error, the "
                        "tolerance used and whether the user's or ntkref's bound applied) as CSV")
    _kernel_options(p, required_x1=False)
    _machine_options(p, required=False)  # its --y is also the test labels of --kind certify
    _dynamics_options(p)
    _certify_options(p, required=False)
    _common(p)
    p.set_defaults(func=_cmd_compare)
    return parser


def main(argv=None):
    """Run the CLI; returns the exit status (0 ok, 1 compare disagreement, 2 error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
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


if __name__ == "__main__":
    sys.exit(main())
