"""The one memory guard: refuse a Gram-sized temporary that would not fit, before allocating it.

Every function that allocates a Gram-sized (n1·n2) or width-sized temporary asks :func:`check_memory`
(entries) or :func:`check_bytes` (bytes).  The estimate is compared with the memory available where the
arrays live (:func:`available_memory`); too much is an :class:`~ntkref.InvalidParameterError` giving the size,
the parameters and the ways out, instead of NumPy's allocation failure or the process being killed.

Device memory comes through the ``free_memory`` seam (the CUDA engine registers CuPy's free bytes plus its
pool's unused blocks); host memory is ``MemAvailable`` of /proc/meminfo.
"""
from __future__ import annotations

import os

import array_api_compat

from . import dispatch
from .backend import device_of, namespace
from .validation import InvalidParameterError

#: host memory below which MemAvailable is not believed (a busy machine can read ~0 for a moment)
HOST_FLOOR = 256 * 2**20  # bytes


def available_memory(xp, like):
    """Bytes that can still be allocated where ``like`` lives, or ``None`` when unknown.

    An engine's device (CuPy): what the ``free_memory`` seam says (free device memory plus the unused
    blocks of CuPy's pool); torch/JAX on an accelerator: unknown (no guard); everything else lives in host
    memory: ``MemAvailable`` of /proc/meminfo, else ``os.sysconf`` (available physical pages), but never less
    than 256 MiB: MemAvailable is the kernel's estimate of what can be allocated without swapping, and on a
    busy machine it can read ~0 for a moment while a few MiB are still found — the guard is for Gram
    matrices of gigabytes, not for small arrays.
    """
    engine = dispatch.free_memory.lookup(like)
    if engine is not None:
        return engine(like)
    dev = str(device_of(like)).lower()
    if ("cuda" in dev or "gpu" in dev or "tpu" in dev or "mps" in dev) and not array_api_compat.is_numpy_namespace(xp):
        return None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return max(int(line.split()[1]) * 1024, HOST_FLOOR)
    except OSError:
        pass
    try:
        return max(int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE")), HOST_FLOOR)
    except (ValueError, OSError, AttributeError):
        return None


def check_bytes(needed, what, caller, xp, like, ways_out):
    """Refuse (InvalidParameterError) a computation estimated to need more than ``needed`` bytes available.

    ``what`` names the parameters and the arrays (it is the start of the message), ``ways_out`` how to
    make it fit.
    """
    available = available_memory(xp, like)
    if available is None or needed <= available:
        return
    gib = 2.0**30
    raise InvalidParameterError(
        f"{what} of {caller} would need about {needed / gib:.3g} GiB, but about {available / gib:.3g} GiB "
        f"is available where the arrays live; {ways_out}."
    )


def check_memory(n_elements, what, caller, like, *, itemsize=None, ways_out=None):
    """Refuse a Gram-sized temporary (``n_elements`` entries, e.g. n1·n2) that would not fit.

    The estimate is entries × itemsize of ``like``'s dtype; below 16 MiB it is never worth a look-up.
    """
    xp = namespace(like)
    if itemsize is None:
        itemsize = 4 if like.dtype == xp.float32 else 8
    needed = int(n_elements) * int(itemsize)
    if needed < (1 << 24):
        return
    check_bytes(needed, what, caller, xp, like,
                ways_out or "use float32 inputs or fewer rows per call (split the inputs into blocks)")
