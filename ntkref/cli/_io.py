"""Files, argument types and the compute target of the ``ntkref`` command line.

Holds the CLI's one-line error :class:`CLIError` and exit statuses, reading inputs without unpickling
(:func:`load_array`), checking output paths before any work (:func:`check_out`, :func:`check_writable`),
the atomic writes (through :func:`ntkref._lib.files.replace_atomically`; an OSError becomes a CLIError that
names the option), argparse's value types, :class:`Target` (namespace and device of a command) and the
success message :func:`wrote`.  Used by every other module of :mod:`ntkref.cli`.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os

import numpy as np  # host-side file I/O and error reports (the computations run on the chosen backend)

from .._lib import backend as _backend
from .._lib.backend import (_MODULES, BACKENDS, BackendError, backend_name, default_device, default_namespace,
                            device_of, to_numpy)
from .._lib.files import TEMP_PREFIX, remove_stale_temporaries, replace_atomically

EXIT_OK, EXIT_DISAGREE, EXIT_ERROR = 0, 1, 2

# Documented accuracy of the reference, in the normalised measure of kernel_error
# (ntkref.kernels module docstring; tests/test_kernels.py and tests/test_golden.py check it).
KERNEL_ACCURACY = {"float64": 1e-13, "float32": 1e-5}


class CLIError(Exception):
    """A user error the CLI reports in one line (exit status 2)."""


# ---------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------
def split_spec(spec):
    """'file.npz:key' → ('file.npz', 'key'); anything else → (spec, None)."""
    head, sep, key = spec.rpartition(":")
    if sep and head.endswith(".npz") and key and os.sep not in key:
        return head, key
    return spec, None


def load_array(spec, name):
    """Load a numeric array from ``file.npy`` or ``file.npz[:key]`` without unpickling."""
    path, key = split_spec(spec)
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


def check_out(path, single_ok, multi):
    """Validate an output path before any work is done."""
    if not (path.endswith(".npy") or path.endswith(".npz")):
        raise CLIError(f"--out: {path!r} must end in .npy or .npz.")
    if path.endswith(".npy") and not single_ok:
        raise CLIError(f"--out: {multi} needs a .npz output (several arrays); got {path!r}.")
    check_writable(path, "--out")


def check_writable(path, option):
    """Before any work: ``path`` is not a folder, its folder exists and a file can be created in it.

    The named temporaries that killed ntkref writers left in the folder (``.ntkref-w<pid>-…tmp``, only where the
    file system has no unnamed ``O_TMPFILE``) are removed now (:func:`ntkref._lib.files.remove_stale_temporaries`).
    """
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CLIError(f"{option}: the folder {folder!r} does not exist.")
    if os.path.isdir(path):
        raise CLIError(f"{option}: {path!r} is a folder.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CLIError(f"{option}: the folder {folder!r} is not writable.")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise CLIError(f"{option}: {path!r} exists and is not writable.")
    remove_stale_temporaries(folder)


def write_atomic(path, arrays, main_key):
    """Write ``arrays`` (dict of NumPy arrays) to ``path`` (.npy: ``main_key`` only) atomically."""

    def write(f):
        if path.endswith(".npy"):
            np.save(f, to_numpy(arrays[main_key]), allow_pickle=False)
        else:
            np.savez(f, **{k: to_numpy(v) for k, v in arrays.items() if v is not None})

    replace_atomically_or_fail(path, "wb", write, "--out")


def replace_atomically_or_fail(path, mode, write, option):
    """``write(f)`` into ``path`` atomically (:func:`ntkref._lib.files.replace_atomically`: nothing is left behind
    on error); an OSError becomes a one-line CLIError naming ``option``.

    A failure to create the temporary file (an OSError on the folder itself — the unnamed ``O_TMPFILE`` — or on a
    ``.ntkref-*.tmp`` path of ``path``'s folder, with no second path) reads "cannot write in <folder>", any other
    "cannot write <path>".
    """
    folder = os.path.dirname(os.path.abspath(path))
    try:
        replace_atomically(path, write, mode=mode)
    except OSError as exc:
        name = exc.filename if isinstance(exc.filename, str) else ""
        temporary = os.path.dirname(name) == folder and os.path.basename(name).startswith(TEMP_PREFIX)
        if exc.filename2 is None and (temporary or os.path.abspath(name or os.sep) == folder):
            raise CLIError(f"{option}: cannot write in {folder!r} ({exc.strerror or exc}).") from None
        raise CLIError(f"{option}: cannot write {path!r} ({exc.strerror or exc}).") from None


# ---------------------------------------------------------------------------------------------
# argument types and where the work runs
# ---------------------------------------------------------------------------------------------
def floats(text):
    """'1.0' → 1.0; '1,1.414,1' → [1.0, 1.414, 1.0] (one value per layer)."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or comma-separated numbers, got {text!r}") from None
    return values[0] if len(values) == 1 else values


def times(text):
    """Times: a .npy/.npz file or comma-separated numbers."""
    path, _ = split_spec(text)
    if path.endswith(".npy") or path.endswith(".npz"):
        return text
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated times or a .npy file, got {text!r}") from None


class Target:
    """Where a command computes: a namespace and a device.

    Without ``--backend`` (or with the one ``NTKREF_BACKEND`` names) the default namespace on the device of
    ``NTKREF_DEVICE`` (:func:`ntkref._lib.backend.asarray`); another ``--backend`` uses that library's default device.
    """

    def __init__(self, backend):
        if backend is None or backend == backend_name():
            self.xp, self.device, self.default = default_namespace(), default_device(), True
            return
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
        """"<backend> on <device>" (``ntkref._lib.backend.description()`` for the default target)."""
        if self.default:
            return _backend.description()
        return f"{self.name} on {device_of(self.xp.zeros(0))}"


def wrote(args, command, out, main_key):
    """The message of a command that wrote ``out`` (one line, or with ``--json`` a JSON object) on stdout."""
    written = [main_key] if args.out.endswith(".npy") else [k for k, v in out.items() if v is not None]
    backend = Target(args.backend).description()
    if args.json:
        print(json.dumps({"command": command, "out": args.out, "backend": backend,
                          "arrays": {k: {"shape": list(out[k].shape), "dtype": str(out[k].dtype)} for k in written}},
                         indent=1))
    else:
        print(f"ntkref {command}: wrote {', '.join(written)} of shape {out[main_key].shape} to {args.out} "
              f"(computed on {backend})")
    return EXIT_OK
