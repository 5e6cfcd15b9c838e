"""Progress of the long ``ntkref`` commands: the work in steps, and a tqdm bar on stderr that counts them.

ntkref's functions never print and take no progress callback: each long computation of the command line is one
call that the command splits into steps whose results are those of one call, and counts them on a bar (tqdm:
count, rate and time left) on stderr:

- ``kernel`` (and ``compare --kind kernel``): the Gram in blocks of rows (:func:`gram_in_row_blocks`).  A
  symmetric Gram is computed as the one call computes it: the diagonal block of each row block by
  ``call(x1[I], None)`` (its pairs i ≤ j, mirrored), the blocks right of it by ``call(x1[I], x1[after I])``,
  mirrored below.  For ``kernels.fc`` the row blocks are a multiple of its own blocks (768 rows; 4096 on CuPy;
  256 with quadrature), so that every entry comes from the same block computation as in one call (equal bit
  for bit); the CNTK's batches of pairs follow the Gram's size, so its entries agree with one call's to
  rounding (~1e-16 relative), exactly symmetric either way.  Before the first block, one call against a
  single column checks every row of ``--x1`` as one call would (same messages); the full output is checked
  against the host memory (:func:`ntkref._lib.memory.check_bytes`), and each call checks its block where the
  arrays live.  So the device holds one row block at a time.
- ``certify`` (and ``compare --kind certify``): the radii in chunks of test points
  (:func:`radii_in_chunks`); each point's radius and output are functions of that point alone
  (``ntkref.certify``: a vectorised search per point).

The bar is drawn only while stderr is a terminal and ``--quiet`` is not given: redirected or piped (a file, CI),
a command writes nothing but its result, with no bar fragments or carriage returns — and then computes in one
call, as the library does: the steps cost time (a large Gram in row blocks measured up to ~1.4× one call on 2
cores), which is worth paying only for a bar someone watches.  (fc's entries are the same bit for bit either way;
the CNTK's agree to rounding, ~1e-16 relative.)  tqdm is a dependency of
ntkref (``pyproject.toml``): the command line is part of the core install.
"""
from __future__ import annotations

import os
import sys

import array_api_compat
import numpy as np  # the host copies of the results (the computations run on the chosen backend)
from tqdm import tqdm

from .._lib.backend import namespace, to_numpy
from .._lib.memory import check_bytes

#: rows of a Gram per call of kernels.fc: a multiple of its default blocks (768 rows, 256 with quadrature) ...
FC_ROWS = 3072
#: ... and on CuPy (4096-row blocks)
FC_ROWS_CUPY = 12288
#: pairs of images per call of kernels.cntk (rows per call = this / the number of columns, at least 1)
CNTK_PAIRS = 16384
#: test points per call of certify.certified_radius
CERTIFY_POINTS = 256


def is_terminal(stream):
    """Whether ``stream`` is an interactive terminal (a closed stream, or one without ``isatty``, is not)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def tqdm_options(stream):
    """tqdm's size options for a terminal ``stream``: follow its width, or 80 × 24 where it reports no size (a
    pseudo-terminal without a window size reads 0 × 0, on which tqdm would draw nothing)."""
    try:
        columns, lines = os.get_terminal_size(stream.fileno())
    except (AttributeError, ValueError, OSError):
        columns = lines = 0
    options = {"dynamic_ncols": True} if columns > 0 else {"ncols": 80}
    if lines <= 0:
        options["nrows"] = 24
    return options


def bar(total, desc, *, quiet=False, unit="it", stream=None):
    """A tqdm bar on ``stream`` (stderr) — disabled (it then prints nothing) with ``quiet`` or when ``stream``
    is not a terminal.  It stays on the screen when closed, with the count, the time taken and the rate."""
    stream = sys.stderr if stream is None else stream
    on = not quiet and is_terminal(stream)
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, file=stream, disable=not on, leave=True,
                **(tqdm_options(stream) if on else {}))


def _rows_per_call(family, a1, n2):
    if family == "cntk":
        return max(1, CNTK_PAIRS // max(n2, 1))
    return FC_ROWS_CUPY if array_api_compat.is_cupy_namespace(namespace(a1)) else FC_ROWS


def gram_in_row_blocks(call, family, a1, a2, wanted, *, command, quiet=False, stream=None, steps=None):
    """The Gram ``call(a1, a2)`` computed in blocks of rows with a bar; returns ``{g: host array}``.

    ``call(b1, b2)`` computes a block (``b2=None``: the symmetric Gram of ``b1``) and returns an object with
    the ``wanted`` arrays as attributes, in ``a1``'s namespace; ``family`` ("fc" or "cntk") sets the rows per
    call.  A Gram of at most that many rows is one call, and so is any Gram when no bar is drawn, unless
    ``steps=True`` (the tests of the blocked route).  ``command`` labels the bar and the memory message.
    """
    symmetric = a2 is None
    n1 = a1.shape[0]
    n2 = n1 if symmetric else a2.shape[0]
    total = n1 * (n1 + 1) // 2 if symmetric else n1 * n2  # a symmetric Gram: the pairs i ≤ j
    rows = _rows_per_call(family, a1, n2)
    with bar(total, command, quiet=quiet, unit=" entries", stream=stream) as b:
        if n1 <= rows or (b.disable and not steps):  # no bar to draw: one call (the library's own blocking)
            res = call(a1, a2)
            out = {g: np.asarray(to_numpy(getattr(res, g))) for g in wanted}
            b.update(total)
            return out
        # every row of x1 checked first, as one call checks them (then x2 in the first block)
        probe = call(a1, (a1 if symmetric else a2)[:1, ...])
        dtype = np.asarray(to_numpy(getattr(probe, wanted[0]))).dtype
        del probe
        check_bytes((n1 * n2 + rows * n2) * len(wanted) * dtype.itemsize, f"the {n1}×{n2} Gram ({'/'.join(wanted)})",
                    f"ntkref {command}", np, np.zeros(0, dtype),
                    "use --dtype float32, --get ntk or nngp alone, or fewer rows (split --x1 into several files)")
        out = {g: np.empty((n1, n2), dtype=dtype) for g in wanted}
        for i0 in range(0, n1, rows):
            i1 = min(i0 + rows, n1)
            if symmetric:
                res = call(a1[i0:i1, ...], None)
                for g in wanted:
                    out[g][i0:i1, i0:i1] = to_numpy(getattr(res, g))
                if i1 < n1:
                    res = call(a1[i0:i1, ...], a1[i1:, ...])
                    for g in wanted:
                        block = np.asarray(to_numpy(getattr(res, g)))
                        out[g][i0:i1, i1:] = block
                        for j0 in range(0, n1 - i1, 512):  # the mirror image in strips: cache-friendlier
                            out[g][i1 + j0:i1 + j0 + 512, i0:i1] = block[:, j0:j0 + 512].T
                b.update((i1 - i0) * (n1 - i0) - (i1 - i0) * (i1 - i0 - 1) // 2)
            else:
                res = call(a1[i0:i1, ...], a2)
                for g in wanted:
                    out[g][i0:i1] = to_numpy(getattr(res, g))
                b.update((i1 - i0) * n2)
            del res
    return out


def radii_in_chunks(call, n_test, *, command, quiet=False, stream=None, steps=None):
    """``call(slice)`` → (radii, info) for the test points of the slice, in chunks with a bar; returns host
    copies ``(radii, g)`` of all points (one call when there are at most :data:`CERTIFY_POINTS`, or when no bar
    is drawn unless ``steps=True``)."""
    radii, g = [], []
    with bar(n_test, command, quiet=quiet, unit=" points", stream=stream) as b:
        chunk = CERTIFY_POINTS if (steps or not b.disable) else max(n_test, 1)  # no bar to draw: one call
        for i0 in range(0, max(n_test, 1), chunk):
            i1 = min(i0 + chunk, n_test)
            r, info = call(slice(i0, i1) if n_test > chunk else slice(None))
            radii.append(np.asarray(to_numpy(r)))
            g.append(np.asarray(to_numpy(info["g"])))
            b.update(i1 - i0)
    if len(radii) == 1:
        return radii[0], g[0]
    return np.concatenate(radii), np.concatenate(g)
