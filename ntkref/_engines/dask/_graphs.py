r"""Dask arrays: kernels, predictions and certificates as graphs of one task per block.

The graphs of the Dask engine.  Every function here takes Dask arrays (NumPy- or CuPy-backed chunks) and
returns Dask arrays *without computing anything*: the graph has one task per (row chunk, column chunk) block
that calls the array-API code of ntkref on the block's chunks, so the same code runs on the threaded
scheduler, on a ``dask.distributed`` ``LocalCluster`` or on a multi-node cluster (whatever client is active
when ``.compute()`` is called).

- :func:`gram` — the generic blockwise Gram: ``fn(a, b)`` on every pair of row chunks; for a symmetric Gram
  (``x2=None``) only the blocks on and above the diagonal are tasks, ``fn(a, None)`` on the diagonal, and
  the blocks below are transposes of those above (exactly symmetric).  Output chunks are the inputs' row
  chunks.  :func:`fc`, :func:`cntk` and :func:`empirical_ntk` are this with ``kernels.fc``,
  ``kernels.cntk`` and ``net.empirical_ntk``.
- :func:`symmetric_matvec`, :func:`diagonal`, :func:`columns` — the block operations of a symmetric Gram
  used by :mod:`ntkref.krr` (conjugate gradients): one graph per product, reading only the blocks on and
  above the diagonal, the vector kept on the client.
- :func:`predict`, :func:`certified_radius` — ``machines.predict`` and ``certify.certified_radius`` mapped
  over the test chunks.

(The kernel machines on a Dask Gram are in :mod:`._machines`, the out-of-core stores in :mod:`._store`.)

Validation.  Parameters are checked when the graph is built (by running the NumPy code on one zero row, which
touches no data); checks that need the data (finite rows, representable scale, finite output) run inside the
tasks and raise the same :class:`~ntkref._lib.validation.InvalidParameterError` at ``.compute()`` (naming
``x1`` in a symmetric Gram, whose off-diagonal blocks pass rows of ``x1`` in both slots).  Inputs with
unknown chunk sizes (NaN, e.g. after boolean indexing) are refused: call ``x.compute_chunk_sizes()`` first.
"""
from __future__ import annotations

import itertools
import operator

import array_api_compat

from ..._lib.backend import host_float64, to_numpy
from ..._lib.compat import single_threaded_blas
from ..._lib.validation import InvalidParameterError
from ...certify import certified_radius as _radius
from ...kernels import BoundedKernel, Kernel
from ...kernels import cntk as _cntk
from ...kernels import fc as _fc
from ...machines import predict as _predict

__all__ = [
    "is_dask",
    "gram",
    "fc",
    "cntk",
    "empirical_ntk",
    "symmetric_matvec",
    "diagonal",
    "columns",
    "predict",
    "certified_radius",
]

_counter = itertools.count()


def is_dask(x) -> bool:
    """Whether ``x`` is a Dask array (without importing Dask)."""
    return x is not None and array_api_compat.is_dask_array(x)


def _da():
    try:
        import dask.array as da
    except ImportError as exc:  # pragma: no cover - only reached with dask arrays, so dask is there
        raise ImportError("ntkref's Dask path needs dask[array]: pip install -e '.[dask]' from ntkref's checkout") from exc
    return da


def _name(prefix, *parts):
    from dask.base import tokenize

    return f"{prefix}-{tokenize(*parts, next(_counter))}"


def _first_key(k):
    while isinstance(k, list):
        k = k[0]
    return k


def _row_chunked(x, name, caller, rows=None):
    """``x`` as a Dask array with one chunk along every axis but the first (a lazy rechunk); NumPy input is
    wrapped with ``rows`` rows per chunk.  Unknown chunk sizes are refused."""
    da = _da()
    if not is_dask(x):
        if not array_api_compat.is_array_api_obj(x):
            raise InvalidParameterError(f"The {name!r} parameter of {caller} must be an array. Got {type(x)!r}.")
        return da.from_array(x, chunks=(rows or max(1, x.shape[0]),) + tuple(x.shape[1:]))
    if x.ndim < 2:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must have at least 2 dimensions; "
                                    f"got shape {x.shape}.")
    if any(c != c for c in itertools.chain.from_iterable(x.chunks)):  # NaN: unknown chunk sizes
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} has unknown chunk sizes (NaN, e.g. after boolean indexing); "
            f"call {name}.compute_chunk_sizes() first, or rechunk it."
        )
    if any(len(c) != 1 for c in x.chunks[1:]):
        x = x.rechunk({ax: -1 for ax in range(1, x.ndim)})
    return x


def _row_keys(x):
    return [_first_key(k) for k in x.__dask_keys__()]


def _transpose(a):
    return array_api_compat.array_namespace(a).matrix_transpose(a)


def _call_block(fn, a, b):
    out = fn(a, b)
    return out if isinstance(out, tuple) else (out,)


def _call_block_of_x1(fn, a, b):
    """An off-diagonal block of a symmetric Gram: ``b`` is a row chunk of ``x1`` passed in ``fn``'s x2 slot, so
    an error about its rows ("The 'x2' parameter of …") is about x1's, and says so — the user passed no x2."""
    try:
        return _call_block(fn, a, b)
    except InvalidParameterError as exc:
        message = str(exc)
        if "'x2'" not in message:
            raise
        raise InvalidParameterError(message.replace("The 'x2' parameter", "The 'x1' parameter")
                                    .replace("'x1'/'x2'", "'x1'").replace("'x2'", "'x1'")) from None


def gram(fn, x1, x2=None, *, n_out=1, dtype=None, meta=None, caller="gram"):
    """One lazy Gram per output of ``fn``, one task per (row chunk, column chunk) block.

    Parameters
    ----------
    fn : callable
        ``fn(a, b)`` on two row chunks (arrays of the chunks' namespace) → an array of shape (len a, len b),
        or a tuple of ``n_out`` of them; ``fn(a, None)`` must return the (exactly symmetric) Gram of ``a``.
        Must be picklable for a distributed cluster (a module-level function or a ``functools.partial``).
    x1 : Dask array, shape (n1, ...)
        Rows (any trailing shape: vectors, images); chunked along the first axis only (other axes are
        rechunked to one chunk, lazily).
    x2 : Dask or NumPy array, shape (n2, ...), optional
        ``None``: the symmetric Gram of ``x1`` — blocks i ≤ j are tasks, blocks i > j their transposes.
    n_out : int
        Number of arrays ``fn`` returns.
    dtype, meta :
        The outputs' dtype and a zero-size array of the chunks' type (default: ``x1``'s).

    Returns
    -------
    tuple of ``n_out`` Dask arrays, shape (n1, n2), chunks (x1's row chunks, x2's row chunks).
    """
    da = _da()
    from dask.highlevelgraph import HighLevelGraph

    x1 = _row_chunked(x1, "x1", caller)
    symmetric = x2 is None
    x2 = x1 if symmetric else _row_chunked(x2, "x2", caller, rows=x1.chunks[0][0] if x1.chunks[0] else 1)
    k1, k2 = _row_keys(x1), _row_keys(x2)
    name = _name(f"{caller}-blocks", x1.name, x2.name, symmetric, fn)
    outs = [_name(f"{caller}-{g}", name, g) for g in range(n_out)]
    dsk = {}
    for i, j in itertools.product(range(len(k1)), range(len(k2))):
        if symmetric and j < i:
            for g, out in enumerate(outs):
                dsk[(out, i, j)] = (_transpose, (out, j, i))
            continue
        if symmetric and i != j:  # both chunks are rows of x1
            dsk[(name, i, j)] = (_call_block_of_x1, fn, k1[i], k2[j])
        else:
            dsk[(name, i, j)] = (_call_block, fn, k1[i], None if symmetric else k2[j])
        for g, out in enumerate(outs):
            dsk[(out, i, j)] = (operator.getitem, (name, i, j), g)
    deps = [x1] if symmetric else [x1, x2]
    meta = x1._meta if meta is None else meta
    xp = array_api_compat.array_namespace(meta)
    dtype = x1.dtype if dtype is None else dtype
    meta = xp.zeros((0, 0), dtype=dtype)
    arrays = []
    for out in outs:
        layer = {k: v for k, v in dsk.items() if k[0] in (name, out)}
        graph = HighLevelGraph.from_collections(out, layer, dependencies=deps)
        arrays.append(da.Array(graph, out, chunks=(x1.chunks[0], x2.chunks[0]), dtype=dtype, meta=meta))
    return tuple(arrays)


# ------------------------------------------------------------------------------------------------ kernels


def _zero_row(x):
    """One zero row in the namespace and float dtype of ``x``'s chunks (for validating parameters)."""
    import numpy as np

    xp = array_api_compat.array_namespace(x._meta)
    dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.float64
    return xp.zeros((1,) + tuple(x.shape[1:]), dtype=dtype)


def _fc_block(kwargs, a, b):
    # the scheduler runs blocks in parallel: BLAS threads inside each would oversubscribe the cores
    # (measured 4× slower on 2 cores with the threaded scheduler)
    with single_threaded_blas(array_api_compat.array_namespace(a)):
        k = _fc(a, b, **kwargs)
    return tuple(v for v in (k.nngp, k.ntk, getattr(k, "nngp_bound", None), getattr(k, "ntk_bound", None))
                 if v is not None)


def _cntk_block(kwargs, a, b):

    k = _cntk(a, b, **kwargs)
    return (k.nngp, k.ntk)


def _entk_block(net, params, a, b):
    return net.empirical_ntk(params, a, b)


def _check_pair(x1, x2, caller):
    if x2 is not None and tuple(x1.shape[1:]) != tuple(x2.shape[1:]):
        raise InvalidParameterError(
            f"x1 and x2 of {caller} must have the same shape after the first axis; got {tuple(x1.shape)} and "
            f"{tuple(x2.shape)}."
        )


def fc(x1, x2=None, **kwargs):
    """``kernels.fc`` on Dask arrays: a lazy :class:`~ntkref.kernels.Kernel` of Dask arrays.

    Each block is ``kernels.fc`` on two row chunks (the array-API path, or the fused CUDA kernel on CuPy
    chunks), with ``n_jobs=1`` unless given (the scheduler runs the blocks in parallel); ``block_size`` is
    the inner block size within a task.  The task size is the inputs' row chunk: a chunk of c rows costs
    about c²·(itemsize·outputs) + 12·768²·8 bytes per task.  Nothing is computed until ``.compute()``.
    """
    from functools import partial

    import numpy as np


    da = _da()
    x1 = x1 if is_dask(x1) else da.asarray(x1)
    if x1.ndim != 2:
        raise InvalidParameterError(f"The 'x1' parameter of fc must have 2 dimension(s); got shape {x1.shape}.")
    _check_pair(x1, x2, "fc")
    if kwargs.get("n_jobs") is None:
        kwargs["n_jobs"] = 1
    # every parameter is checked now, on one zero row (no data is read)
    probe = _fc(_zero_row(x1), **kwargs)
    # with error_bound=True the probe is a BoundedKernel: its bounds are lazy outputs too, one task per block
    wanted = [g for g in ("nngp", "ntk", "nngp_bound", "ntk_bound") if getattr(probe, g, None) is not None]
    outs = gram(partial(_fc_block, kwargs), x1, x2, n_out=len(wanted), dtype=np.dtype(probe.ntk.dtype if
                probe.ntk is not None else probe.nngp.dtype), caller="fc")
    res = dict(zip(wanted, outs))
    if isinstance(probe, BoundedKernel):
        return BoundedKernel(res.get("nngp"), res.get("ntk"), res.get("nngp_bound"), res.get("ntk_bound"))
    return Kernel(res.get("nngp"), res.get("ntk"))


def cntk(x1, x2=None, **kwargs):
    """``kernels.cntk`` on Dask arrays of images (n, C, H, W): one task per block of image rows (lazy)."""
    from functools import partial

    import numpy as np


    da = _da()
    x1 = x1 if is_dask(x1) else da.asarray(x1)
    _check_pair(x1, x2, "cntk")
    probe = _cntk(_zero_row(x1), **kwargs)
    nngp, ntk = gram(partial(_cntk_block, kwargs), x1, x2, n_out=2, dtype=np.dtype(probe.ntk.dtype), caller="cntk")
    return Kernel(nngp, ntk)


def empirical_ntk(net, params, x1, x2=None):
    """``net.empirical_ntk(params, ·, ·)`` on Dask arrays: one task per block (lazy).

    ``params`` must be arrays of the chunks' namespace (NumPy for NumPy-backed chunks); they are part of
    every task (small next to a block of the Gram).
    """
    from functools import partial

    import numpy as np

    da = _da()
    x1 = x1 if is_dask(x1) else da.asarray(x1)
    _check_pair(x1, x2, "empirical_ntk")
    probe = net.empirical_ntk(params, _zero_row(x1))
    (out,) = gram(partial(_entk_block, net, params), x1, x2, n_out=1, dtype=np.dtype(probe.dtype),
                  caller="empirical_ntk")
    return out


# ----------------------------------------------------------------------------- symmetric Gram operations


def _check_square(K, caller):
    if not is_dask(K) or K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise InvalidParameterError(f"The 'K' parameter of {caller} must be a square Dask array; got "
                                    f"{type(K).__name__} of shape {getattr(K, 'shape', None)}.")
    if any(c != c for c in itertools.chain.from_iterable(K.chunks)):
        raise InvalidParameterError(f"The 'K' parameter of {caller} has unknown chunk sizes; call "
                                    f"K.compute_chunk_sizes() first.")
    if K.chunks[0] != K.chunks[1]:
        K = K.rechunk((K.chunks[0], K.chunks[0]))
    return K


def _offsets(chunks):
    import numpy as np

    return [0] + list(np.cumsum(chunks))


def _block_mv(block, vj, vi, diag, rows=2048):
    """(K_ij v_j, K_ijᵀ v_i) in float64 (v on the host; the block upcast ``rows`` rows at a time).

    A diagonal block (``diag``) contributes only through its upper triangle, mirrored: (triu K + triu₁ Kᵀ) v.
    """

    with single_threaded_blas(array_api_compat.numpy):
        return _block_mv_host(to_numpy(block), vj, vi, diag, rows)


def _block_mv_host(b, vj, vi, diag, rows):
    import numpy as np

    out_i = np.zeros((b.shape[0],) + vj.shape[1:], dtype=np.float64)
    out_j = None if diag else np.zeros((b.shape[1],) + vi.shape[1:], dtype=np.float64)
    for r in range(0, b.shape[0], rows):
        part = b[r:r + rows].astype(np.float64, copy=False)
        if diag:
            upper = np.triu(part, k=r)
            out_i[r:r + rows] += upper @ vj
            upper[:, r:r + rows] = np.triu(upper[:, r:r + rows], k=1)  # strictly above the diagonal
            out_i += upper.T @ vj[r:r + rows]
        else:
            out_i[r:r + rows] = part @ vj
            out_j += part.T @ vi[r:r + rows]
    return out_i, out_j


def _sum_parts(*parts):
    total = parts[0].copy()
    for p in parts[1:]:
        total += p
    return total


def symmetric_matvec(K, v):
    """K·v for a symmetric Dask Gram, with v a NumPy vector (n,) or matrix (n, k) on the client.

    Only the upper triangle is read, each block once: block (i, j), i < j, contributes K_ij v_j to rows i
    and K_ijᵀ v_i to rows j, a diagonal block its upper triangle mirrored; i.e. the product is that of the
    symmetric matrix with K's upper triangle (K itself when K is symmetric).  Accumulates in float64; returns NumPy.
    One graph of (number of upper blocks + number of row chunks) tasks per call, computed on the active
    scheduler (a ``dask.distributed`` client if one is active).
    """
    import numpy as np
    from dask.highlevelgraph import HighLevelGraph

    K = _check_square(K, "symmetric_matvec")
    v = host_float64(v)  # the vector lives on the client (an explicit copy of a device array)
    if v.ndim not in (1, 2) or v.shape[0] != K.shape[0]:
        raise InvalidParameterError(f"The 'v' parameter of symmetric_matvec must have {K.shape[0]} rows; got "
                                    f"shape {v.shape}.")
    off = _offsets(K.chunks[0])
    nb = len(K.chunks[0])
    name = _name("matvec", K.name, v)
    tail = (0,) * (v.ndim - 1)
    dsk = {(name + "-v", i): v[off[i]:off[i + 1]] for i in range(nb)}
    parts = [[] for _ in range(nb)]
    for i in range(nb):
        for j in range(i, nb):
            dsk[(name + "-mv", i, j)] = (_block_mv, (K.name, i, j), (name + "-v", j), (name + "-v", i), i == j)
            parts[i].append((operator.getitem, (name + "-mv", i, j), 0))
            if i != j:
                parts[j].append((operator.getitem, (name + "-mv", i, j), 1))
    for i in range(nb):
        dsk[(name, i) + tail] = (_sum_parts, *parts[i])
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=[K])
    chunks = (K.chunks[0],) + (((v.shape[1],),) if v.ndim == 2 else ())
    out = _da().Array(graph, name, chunks=chunks, dtype=np.float64, meta=np.empty((0,) * v.ndim))
    return np.asarray(out.compute(), dtype=np.float64)


def diagonal(K):
    """The diagonal of a Dask Gram as a NumPy float64 vector (reads the diagonal blocks only)."""
    import numpy as np

    K = _check_square(K, "diagonal")
    return np.asarray(_da().diagonal(K).compute(), dtype=np.float64)


def columns(K, idx):
    """The columns ``idx`` (sorted ints) of a Dask Gram as a NumPy float64 array (n, len(idx))."""
    import numpy as np

    K = _check_square(K, "columns")
    return np.asarray(K[:, np.asarray(idx)].compute(), dtype=np.float64)


# --------------------------------------------------------------------------------- kernel machines


def _predict_block(block, alpha):

    return _predict(alpha[0], block)[:, None]


def predict(alpha, K_test_train):
    """``machines.predict`` on a Dask ``K_test_train`` (m, n): per block, then summed over column chunks."""
    import numpy as np

    da = _da()
    K = K_test_train
    if not is_dask(K) or K.ndim != 2:
        raise InvalidParameterError("The 'K_test_train' parameter of predict must be a 2-D Dask array.")
    alpha = alpha if is_dask(alpha) else da.from_array(to_numpy(alpha), chunks=(K.chunks[1],))
    if alpha.ndim != 1 or alpha.shape[0] != K.shape[1]:
        raise InvalidParameterError(
            f"The 'K_test_train' parameter of machines.predict must have {alpha.shape[0]} columns (one per "
            f"training point); got shape {tuple(K.shape)}."
        )
    alpha = alpha.rechunk((K.chunks[1],))
    dtype = np.result_type(K.dtype, np.float32)
    partial_sums = da.map_blocks(_predict_block, K, alpha[None, :], chunks=(K.chunks[0], (1,) * len(K.chunks[1])),
                                 dtype=dtype, meta=K._meta)
    return partial_sums.sum(axis=1)


def _certify_block(kwargs, alpha, x_train, x_test, y=None):

    return _radius(alpha, x_train, x_test, y=y, **kwargs)


def certified_radius(alpha, x_train, x_test, *, y=None, **kwargs):
    """``certify.certified_radius`` mapped over the row chunks of a Dask ``x_test`` (lazy radii).

    ``alpha`` and ``x_train`` are whole in every task (one copy per worker: n_train·(d + 1) floats).
    ``return_info`` is not supported here (call the function on a chunk for the details).
    """
    from functools import partial

    import numpy as np
    from dask.highlevelgraph import HighLevelGraph

    da = _da()
    if kwargs.get("return_info"):
        raise InvalidParameterError("return_info=True is not supported on Dask inputs; call "
                                    "certify.certified_radius on a chunk.")
    x_test = _row_chunked(x_test if is_dask(x_test) else da.asarray(x_test), "x_test", "certified_radius")
    x_train = x_train if is_dask(x_train) else da.from_array(x_train, chunks=x_train.shape)
    alpha = alpha if is_dask(alpha) else da.from_array(alpha, chunks=alpha.shape)
    x_train = x_train.rechunk(x_train.shape)
    alpha = alpha.rechunk(alpha.shape)
    if x_test.ndim != 2 or x_train.ndim != 2 or x_test.shape[1] != x_train.shape[1]:
        raise InvalidParameterError(
            f"The 'x_test' parameter of certified_radius must have as many columns as 'x_train' "
            f"({x_train.shape[-1]}); got shape {tuple(x_test.shape)}."
        )
    deps = [x_test, x_train, alpha]
    if y is not None:
        y = y if is_dask(y) else da.from_array(y, chunks=(x_test.chunks[0],))
        y = y.rechunk((x_test.chunks[0],))
        deps.append(y)
    fn = partial(_certify_block, kwargs)
    name = _name("certified-radius", x_test.name, x_train.name, alpha.name, None if y is None else y.name, fn)
    tk, ak = _first_key(x_train.__dask_keys__()), _first_key(alpha.__dask_keys__())
    xk = _row_keys(x_test)
    yk = None if y is None else [_first_key(k) for k in y.__dask_keys__()]
    dsk = {(name, i): (fn, ak, tk, xk[i]) + (() if y is None else (yk[i],)) for i in range(len(xk))}
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=deps)
    dtype = np.float32 if (x_test.dtype == np.float32 and x_train.dtype == np.float32) else np.float64
    meta = array_api_compat.array_namespace(x_test._meta).zeros((0,), dtype=dtype)
    return da.Array(graph, name, chunks=(x_test.chunks[0],), dtype=dtype, meta=meta)
