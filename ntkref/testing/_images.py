r"""Image strategies and :func:`check_cntk` (re-exported by :mod:`ntkref.testing`).

Images are NCHW (``(n, channels, height, width)``, what ``ntkref.kernels.cntk`` takes) or NHWC
(neural-tangents' default) as the ``layout`` argument says.  The adversarial kinds (:data:`IMAGE_KINDS`) are the
inputs on which CNTK implementations lose digits or break: x and −x (antiparallel pixel pairs everywhere),
constant images, zero patches (pixels whose pre-activation is identically 0), images whose pixels are all parallel
across channels but of unequal norms (the near-parallel-unequal-norm cancellation), exact duplicates, zero
images, and per-image scales 10^k over ``scale_range``.

CNTK bound used in the verdict
------------------------------
:data:`CNTK_BOUND`: ``kernels.cntk`` is within 1e-13·√(K(x,x)K(x′,x′)) of a 50-digit mpmath evaluation on
adversarial images in float64 (x and −x, parallel pixels of unequal norm, zero patches, 1e±150 scales, biases,
GAP and flatten, depths 1–4; tests/test_cntk.py).  Beyond depth 4 the bound is extrapolated as
(depth/4)·1e-13 and the report says so; float32 inputs have no certified bound (the user's tolerance applies).
tests/test_testing.py also checks it against an independent route with ``filter_size=1`` (the CNTK is then the
mean of FC kernels over pixel pairs).  The bound is *tested*, not proven: every CNTK entry's verdict is reported
with ``verdict_basis`` ``"tested bound"`` and ``proven`` False (:mod:`ntkref._verdicts`; the report's ``verdicts``
note says why).
"""
from __future__ import annotations

import math

import numpy as np  # host-side test tooling: inputs and reports are NumPy arrays by design
from hypothesis import strategies as st

from .. import kernels
from .._lib.validation import InvalidParameterError, check_int, check_option, check_real
from ..kernels._accuracy import CNTK_BOUND, cntk_bound
from . import _coverage
from ._engine import battery_flag, check_convention_threshold, check_dtype, check_mode, drive, finish, int_range
from ._diagnosis import KernelDiagnoser
from ._kernel import KernelComparison, host, mover

__all__ = ["IMAGE_KINDS", "CNTK_BOUND", "images", "image_inputs", "hard_images", "check_cntk"]

IMAGE_KINDS = ("gaussian", "negated", "constant", "zero_patch", "parallel_pixels", "scaled", "duplicate", "zero")
"""Kinds of images :func:`images` mixes (``gaussian`` first: hypothesis shrinks towards it)."""



def _to_layout(x, layout):
    return x if layout == "NCHW" else np.ascontiguousarray(np.transpose(x, (0, 2, 3, 1)))


def _to_nchw(x, layout):
    return x if layout == "NCHW" or x is None else np.ascontiguousarray(np.transpose(x, (0, 3, 1, 2)))


def _draw_images(draw, n, c, h, w, kinds, scale_range):
    magnitude = st.floats(1e-3, 4.0, allow_nan=False, allow_infinity=False)
    entries = st.one_of(st.just(0.0), magnitude, magnitude.map(lambda v: -v))
    lo, hi = math.log10(scale_range[0]), math.log10(scale_range[1])
    out = []
    for _ in range(n):
        kind = draw(st.sampled_from(kinds))
        if kind in ("negated", "zero_patch", "scaled", "duplicate") and not out:
            kind = "gaussian"
        if kind == "zero":
            out.append(np.zeros((c, h, w)))
            continue
        if kind in ("negated", "duplicate", "scaled", "zero_patch"):
            base = out[draw(st.integers(0, len(out) - 1))]
            if kind == "negated":
                out.append(-base)
            elif kind == "duplicate":
                out.append(base.copy())
            elif kind == "zero_patch":
                img = base.copy()
                i0, j0 = draw(st.integers(0, h - 1)), draw(st.integers(0, w - 1))
                i1, j1 = draw(st.integers(i0 + 1, h)), draw(st.integers(j0 + 1, w))
                img[:, i0:i1, j0:j1] = 0.0
                out.append(img)
            else:
                m = float(np.max(np.abs(base)))
                if m == 0:
                    out.append(base.copy())
                    continue
                e_lo = math.ceil(lo - math.log10(m))
                e_hi = math.floor(hi - math.log10(m))
                k = draw(st.integers(e_lo, e_hi)) if e_lo <= e_hi else 0
                out.append(base * 10.0**k)
            continue
        if kind == "gaussian":
            img = np.array([draw(entries) for _ in range(c * h * w)], dtype=np.float64).reshape(c, h, w)
        elif kind == "constant":
            img = np.full((c, h, w), draw(magnitude) * draw(st.sampled_from((1.0, -1.0))))
        else:  # parallel_pixels: every pixel a multiple a_p·u of one channel vector u, unequal |a_p|
            u = np.array([draw(magnitude) * draw(st.sampled_from((1.0, -1.0))) for _ in range(c)])
            coef = st.sampled_from((1.0, -1.0, 2.0, -0.5, 3.0, 0.25, -7.0, 0.0))
            a = np.array([draw(coef) for _ in range(h * w)]).reshape(h, w)
            img = u[:, None, None] * a[None, :, :]
        m = float(np.max(np.abs(img)))
        if m > 0:
            e_lo = math.ceil(lo - math.log10(m))
            e_hi = math.floor(hi - math.log10(m))
            k = draw(st.integers(e_lo, e_hi)) if e_lo <= e_hi else 0
            img = img * 10.0**k if k else img
        out.append(img)
    return np.array(out, dtype=np.float64).reshape(n, c, h, w)


def _image_args(kinds, scale_range, layout, dtype, caller):
    kinds = tuple(kinds)
    if not kinds or any(k not in IMAGE_KINDS for k in kinds):
        raise InvalidParameterError(f"The 'kinds' parameter of {caller} must be a non-empty subset of "
                                    f"{IMAGE_KINDS}. Got {kinds!r}.")
    kinds = tuple(k for k in IMAGE_KINDS if k in kinds)
    layout = check_option(layout, "layout", ("NCHW", "NHWC"), caller=caller)
    dtype = check_dtype(dtype, caller)
    if scale_range is None:
        scale_range = (1e-100, 1e100) if dtype == "float64" else (1e-10, 1e10)
    if isinstance(scale_range, str) or not hasattr(scale_range, "__len__") or len(scale_range) != 2:
        raise InvalidParameterError(f"The 'scale_range' parameter of {caller} must be a pair (low, high). Got "
                                    f"{scale_range!r}.")
    # pixels are drawn in float64 and cast to dtype: the range must lie inside dtype's normal numbers, else the
    # cast would turn the largest pixels into inf or the smallest into 0
    fi = np.finfo(dtype)
    lo = check_real(scale_range[0], "scale_range", caller=caller, low=float(fi.tiny), high=float(fi.max))
    hi = check_real(scale_range[1], "scale_range", caller=caller, low=lo, high=float(fi.max))
    return kinds, (lo, hi), layout, dtype


def images(n=(1, 3), channels=(1, 3), height=(1, 4), width=(1, 4), *, kinds=IMAGE_KINDS, scale_range=None,
           layout="NCHW", dtype="float64"):
    """Strategy for image batches whose images and pixel pairs break naive CNTK implementations.

    Each image is one of ``kinds`` (:data:`IMAGE_KINDS`): ``"gaussian"`` (pixels 0 or ±[1e-3, 4]),
    ``"negated"`` (−x of an earlier image), ``"constant"``, ``"zero_patch"`` (an earlier image with a
    rectangle set to 0), ``"parallel_pixels"`` (every pixel a multiple a·u of one channel vector u, with
    a ∈ {±1, 2, −0.5, 3, 0.25, −7, 0}: parallel and antiparallel pixel pairs of unequal norm), ``"scaled"``
    (an earlier image × 10^k), ``"duplicate"``, ``"zero"``.  New images get a scale 10^k that puts their largest
    pixel inside ``scale_range`` (default 1e±100 in float64, 1e±10 in float32).

    Parameters
    ----------
    n, channels, height, width : int or (min, max)
    kinds : sequence of str
    scale_range : (float, float), optional
    layout : {"NCHW", "NHWC"}
        NCHW is ``ntkref.kernels.cntk``'s layout, NHWC neural-tangents' default.
    dtype : {"float64", "float32"}

    Returns
    -------
    hypothesis strategy of numpy.ndarray, shape (n, C, H, W) or (n, H, W, C)
    """
    n_r = int_range(n, "n", 1)
    c_r = int_range(channels, "channels", 1)
    h_r = int_range(height, "height", 1)
    w_r = int_range(width, "width", 1)
    kinds, scale_range, layout, dtype = _image_args(kinds, scale_range, layout, dtype, "images")

    @st.composite
    def strategy(draw):
        shape = [draw(st.integers(*r)) for r in (n_r, c_r, h_r, w_r)]
        x = _draw_images(draw, *shape, kinds, scale_range)
        return _to_layout(x, layout).astype(dtype)

    return strategy()


def image_inputs(n1=(1, 3), n2=(1, 3), channels=(1, 3), height=(1, 4), width=(1, 4), *, symmetric=None,
                 kinds=IMAGE_KINDS, scale_range=None, layout="NCHW", dtype="float64"):
    """Strategy for ``(x1, x2)`` image arguments of a CNTK (``x2`` may be ``None``, meaning x1).

    The images of x1 and x2 are drawn together (see :func:`images`), so an image of x2 can be −x, a scaled
    copy or a zero-patched copy of an image of x1.  ``symmetric``: as in :func:`ntkref.testing.kernel_inputs`.
    """
    r1 = int_range(n1, "n1", 1)
    r2 = int_range(n2, "n2", 1)
    c_r = int_range(channels, "channels", 1)
    h_r = int_range(height, "height", 1)
    w_r = int_range(width, "width", 1)
    kinds, scale_range, layout, dtype = _image_args(kinds, scale_range, layout, dtype, "image_inputs")

    @st.composite
    def strategy(draw):
        sym = draw(st.booleans()) if symmetric is None else bool(symmetric)
        a = draw(st.integers(*r1))
        b = 0 if sym else draw(st.integers(*r2))
        c, h, w = (draw(st.integers(*r)) for r in (c_r, h_r, w_r))
        x = _to_layout(_draw_images(draw, a + b, c, h, w, kinds, scale_range), layout).astype(dtype)
        if sym:
            return x, None
        perm = draw(st.permutations(range(a + b)))
        x = x[list(perm)]
        return x[:a], x[a:]

    return strategy()


def hard_images(channels=2, height=3, width=3, *, seed=0, layout="NCHW", dtype="float64"):
    """A fixed battery of (name, x1, x2) CNTK inputs: x and −x, constant images, zero patches, parallel pixels of
    unequal norm, scales 1e±100 (1e±10 in float32), a zero image, duplicates and a 1×1 image."""
    c = check_int(channels, "channels", caller="hard_images", low=1)
    h = check_int(height, "height", caller="hard_images", low=1)
    w = check_int(width, "width", caller="hard_images", low=1)
    layout = check_option(layout, "layout", ("NCHW", "NHWC"), caller="hard_images")
    dtype = check_dtype(dtype, "hard_images")
    seed = check_int(seed, "seed", caller="hard_images", low=0)
    big = 1e100 if np.dtype(dtype) == np.float64 else 1e10
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((c, h, w))
    u = rng.standard_normal(c)
    par = u[:, None, None] * rng.choice([1.0, -1.0, 2.0, -0.5, 3.0], size=(h, w))[None]
    patched = x.copy()
    patched[:, : max(1, h // 2), : max(1, w // 2)] = 0.0
    const = np.full((c, h, w), 0.7)
    cases = [
        ("generic", rng.standard_normal((3, c, h, w)), None),
        ("x and -x", np.stack([x, -x, 2.0 * x]), None),
        ("constant and -constant", np.stack([const, -const, 3.0 * const]), None),
        ("zero patch", np.stack([x, patched]), None),
        ("parallel pixels of unequal norm", np.stack([par, -par, 0.5 * par]), None),
        ("scales 1e+-k", np.stack([x / big, x * big, -x * big, patched / big]), None),
        ("zero image", np.stack([x, np.zeros_like(x)]), None),
        ("duplicates", np.stack([x, x, par]), None),
        ("cross x and -x", np.stack([x, par]), np.stack([-x, -3.0 * par, patched])),
        ("1x1 image", rng.standard_normal((3, c, 1, 1)) * np.array([1.0, -2.0, 1e-50])[:, None, None, None], None),
    ]
    return [(name, _to_layout(a, layout).astype(dtype), None if b is None else _to_layout(b, layout).astype(dtype))
            for name, a, b in cases]


def _scaled_bound(b, d1, d2):
    """A per-entry absolute bound b → the scaled measure (divide by √(R(x,x)R(x′,x′)))."""
    b = host(b)
    scale = np.sqrt(np.maximum(d1, 0.0))[:, None] * np.sqrt(np.maximum(d2, 0.0))[None, :]
    with np.errstate(all="ignore"):
        return np.where(scale > 0, b / np.where(scale > 0, scale, 1.0), 0.0)


def cntk_reference(which, params, backend, depth, dtype="float64"):
    """reference(x1, x2) -> (K, diag1, diag2, bound) from ``kernels.cntk`` on NCHW host arrays."""
    bound, _ = cntk_bound(depth, dtype)

    def ntkref_cntk(a1, a2):
        return getattr(kernels.cntk(a1, a2, **params), which)

    def reference(x1, x2):
        put = mover(backend)
        a1 = put(host(x1))
        a2 = None if x2 is None else put(host(x2))
        K = ntkref_cntk(a1, a2)
        d1 = np.diagonal(host(K)).copy() if a2 is None else _self_diagonal(a1)
        d2 = d1 if a2 is None else _self_diagonal(a2)
        return host(K), d1, d2, bound

    def _self_diagonal(a):
        return np.array([float(host(ntkref_cntk(a[i:i + 1, ...], None))[0, 0]) for i in range(a.shape[0])])

    return reference


def check_cntk(
    candidate,
    *,
    depth=None,
    readout=None,
    filter_size=3,
    W_std=None,
    b_std=None,
    fix_first_last=False,
    which=None,
    layout="NCHW",
    diag_tol=None,
    offdiag_tol=None,
    atol=0.0,
    max_examples=50,
    battery=None,
    inputs=None,
    dtype="float64",
    backend=None,
    pass_none=True,
    seed=0,
    shrink=True,
    raise_on_failure=True,
    mode="assert",
    convention_threshold=None,
    record_entries=None,
    factory=False,
):
    r"""Search for images on which ``candidate(x1, x2)`` differs from ``ntkref.kernels.cntk``.

    The reference is ``kernels.cntk(x1, x2, depth=depth, readout=readout, filter_size=filter_size,
    W_std=W_std, b_std=b_std, fix_first_last=fix_first_last).<which>`` (seed 004's CNTK in
    neural-tangents' conventions: SAME padding, stride 1, 1/C and the patch mean in the first layer's
    variance; docs/conventions.md).  The candidate gets the images in ``layout`` (``"NHWC"`` for
    neural-tangents' default ``stax.Conv``); the reference always gets them as NCHW.

    Error measure, verdict, modes, battery and report: as in :func:`ntkref.testing.check_kernel`, with
    :func:`image_inputs` as the default strategy (all :data:`IMAGE_KINDS`), :func:`hard_images` as the
    battery, and ntkref's CNTK bound (module docstring) in the verdict tolerance.

    Parameters
    ----------
    candidate : callable (x1, x2) -> array-like, shape (n1, n2)
        If its signature names some of ``depth``, ``readout``, ``W_std``, ``b_std``, ``which``, those are passed
        as keywords and swept when not pinned (as in :func:`ntkref.testing.check_kernel`; ``factory=True``: the
        candidate builds the kernel callable of a configuration).
    depth, readout, W_std, b_std : as in :func:`ntkref.kernels.cntk`, or None (default: not pinned)
        Swept over :data:`ntkref.testing.CNTK_BATTERY` (depth 1–2 × GAP/Flatten × NNGP/NTK, b_std 0/0.5 and W_std
        1/1.5 so that every pair of values occurs) when the candidate takes them; else depth 1, ``"gap"``, 1.0,
        0.0 with a :class:`~ntkref.testing.CoverageWarning`.
    filter_size, fix_first_last : as in :func:`ntkref.kernels.cntk` (not swept)
    which : {"ntk", "nngp"} or None
    layout : {"NCHW", "NHWC"}
    diag_tol, offdiag_tol, atol, max_examples, battery, inputs, dtype, backend, pass_none, seed, shrink,
    raise_on_failure, mode, convention_threshold, record_entries : as in :func:`ntkref.testing.check_kernel`
        (``inputs`` draws images in ``layout``; default ``max_examples`` 50: a CNTK costs O(P²) per pair; the
        float32 default tolerance is 1e-5, not a certified bound for the CNTK).
    factory : bool
        As in :func:`ntkref.testing.check_kernel`.

    Returns
    -------
    CheckReport

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import kernels
    >>> from ntkref.testing import check_cntk
    >>> def my_cntk(x1, x2=None, *, depth, readout, W_std, b_std, which):
    ...     k = kernels.cntk(x1, x2, depth=depth, readout=readout, W_std=W_std, b_std=b_std)
    ...     return np.asarray(getattr(k, which))
    >>> report = check_cntk(my_cntk, max_examples=8)          # GAP and Flatten, depth 1-2, with/without biases
    >>> report.passed, report.coverage["exercised"]["readout"]
    (True, ['gap', 'flatten'])
    """
    caller = "check_cntk"
    if not callable(candidate):
        raise InvalidParameterError(f"The 'candidate' parameter of {caller} must be callable. Got {candidate!r}.")
    plan = _coverage.plan("cntk", candidate, factory=factory, reference=None, depth=depth, readout=readout,
                          W_std=W_std, b_std=b_std, which=which)
    plan.warn(caller)
    if plan.sweep:
        mode = check_mode(mode, caller)
        max_examples = check_int(max_examples, "max_examples", caller=caller, low=0)
        common = dict(filter_size=filter_size, fix_first_last=fix_first_last, layout=layout, diag_tol=diag_tol,
                      offdiag_tol=offdiag_tol, atol=atol, battery=battery, inputs=inputs, dtype=dtype,
                      backend=backend, pass_none=pass_none, shrink=shrink, raise_on_failure=False, mode=mode,
                      convention_threshold=convention_threshold, record_entries=record_entries)

        def one(f, config, *, max_examples, seed):
            return check_cntk(f, **config, max_examples=max_examples, seed=seed, **common)

        report = _coverage.run_sweep(caller, plan, call=one, max_examples=max_examples, mode=mode, seed=seed)
        return finish(report, raise_on_failure)
    depth, readout, W_std, b_std, which = (plan.configs[0][p] for p in _coverage.CNTK_PARAMS)
    candidate = plan.bind(plan.configs[0])
    which = check_option(which, "which", ("ntk", "nngp"), caller=caller)
    layout = check_option(layout, "layout", ("NCHW", "NHWC"), caller=caller)
    dtype = check_dtype(dtype, caller)
    tol_default, dtype_bound, user_source = _coverage.default_tolerance("cntk", dtype, depth,
                                                                        given=(diag_tol, offdiag_tol))
    diag_tol = tol_default if diag_tol is None else diag_tol
    offdiag_tol = tol_default if offdiag_tol is None else offdiag_tol
    diag_tol = check_real(diag_tol, "diag_tol", caller=caller, low=0.0, allow_inf=True)
    offdiag_tol = check_real(offdiag_tol, "offdiag_tol", caller=caller, low=0.0, allow_inf=True)
    atol = check_real(atol, "atol", caller=caller, low=0.0)
    mode = check_mode(mode, caller)
    check_convention_threshold(convention_threshold, dtype, caller, kinds_by_cause=True)
    use_battery = battery_flag(battery, inputs, caller)
    if not callable(candidate):
        raise InvalidParameterError(f"The 'candidate' parameter of {caller} must be callable. Got {candidate!r}.")
    params = dict(depth=depth, readout=readout, filter_size=filter_size, W_std=W_std, b_std=b_std,
                  fix_first_last=fix_first_last)
    kernels.cntk(np.ones((1, 1, 1, 1)), **params)  # ntkref's own parameter checks, with its messages
    ref = cntk_reference(which, params, backend, depth, dtype)
    bound, bound_source = cntk_bound(depth, dtype)
    if inputs is None:
        inputs = image_inputs(layout=layout, dtype=dtype)
    name = getattr(candidate, "__qualname__", repr(candidate))
    desc = (f"check_cntk({name}, which={which!r}, depth={depth}, readout={readout!r}, filter_size={filter_size}, "
            f"W_std={W_std!r}, b_std={b_std!r}, fix_first_last={fix_first_last}, layout={layout!r}, "
            f"diag_tol={diag_tol:g}, offdiag_tol={offdiag_tol:g}, atol={atol:g}, dtype={dtype})")

    def reference(x1, x2):  # the report's inputs are in the candidate's layout
        return ref(_to_nchw(x1, layout), _to_nchw(x2, layout))

    comparison = KernelComparison(candidate, reference, diag_tol=diag_tol, offdiag_tol=offdiag_tol, atol=atol,
                                  pass_none=pass_none)
    comparison.why_tested = ("the CNTK has no proven error bound yet: every entry is judged by the tested bound "
                             f"({bound_source}), not proven")

    def build(p, w):  # ntkref's CNTK under another convention, on the candidate's layout
        alt = cntk_reference(w, p, backend, p["depth"], dtype)
        return lambda x1, x2: alt(_to_nchw(x1, layout), _to_nchw(x2, layout))

    comparison.diagnoser = KernelDiagnoser(comparison, family="cntk", params=params, which=which, build=build,
                                           dtype=dtype, layout=layout)

    def cast(x):
        return None if x is None else np.asarray(x).astype(dtype)

    observer = _coverage.InputObserver("cntk", dtype)

    def evaluate(pair, rec):
        x1, x2 = cast(pair[0]), cast(pair[1])
        observer.observe(x1, x2, layout)
        return comparison.evaluate(x1, x2, rec)

    cases = ([(n, (a, b)) for n, a, b in hard_images(seed=seed, layout=layout, dtype=dtype)] if use_battery else [])
    report = drive(
        caller, strategy=inputs, evaluate=evaluate, battery_cases=cases, order=("x1", "x2"), mode=mode,
        max_examples=max_examples, seed=seed, shrink=shrink, description=desc,
        tolerance={"user": {"diagonal": diag_tol, "off-diagonal": offdiag_tol, "atol": atol},
                   "ntkref_bound": bound if isinstance(bound, float) else None, "bound_source": bound_source,
                   "user_source": user_source, **dtype_bound},
        reduce=comparison.reduce, hint=comparison.hint, pin=comparison.diagnoser.pin,
        record_entries=(mode == "measure") if record_entries is None else bool(record_entries),
    )
    _coverage.annotate(report, plan, observer, family="cntk", dtype=dtype, diag_tol=diag_tol,
                       offdiag_tol=offdiag_tol, atol=atol, reference=None,
                       extra={"filter_size": filter_size, "fix_first_last": bool(fix_first_last), "layout": layout})
    return finish(report, raise_on_failure)
