"""The seam: named points where an engine takes over a core function for its array type.

The core of ntkref is written against the array API standard only.  Two array types need more than that:
Dask arrays (lazy, blocked: one task per block, Grams larger than memory) and CuPy arrays (a fused CUDA
kernel instead of ~15 elementwise passes per layer).  Their code lives in *engines*
(``ntkref._engines.dask``, ``ntkref._engines.cuda``), which the core never imports.  Instead each core
function that an engine may take over asks its :class:`Seam` in one visible line at its top::

    engine = dispatch.solve.lookup(K)
    if engine is not None:           # a Dask K: working sets of gathered columns
        return engine(K, y, loss, lam, ...)

:meth:`Seam.lookup` looks at the deciding arguments (``K`` for ``solve``, ``x1``/``x2`` for ``fc``, ``x_test``
for ``certified_radius``).  The top-level package of an argument's type (``type(a).__module__``: ``"dask"``,
``"cupy"``) names its engine; the engine module is imported the first time such an array arrives and its
``register()`` fills the seams it serves (dask.array's ``dispatch.py`` with ``register_lazy("cupy")`` is the
model).  NumPy, array_api_strict, torch and JAX arrays find no engine and take the array-API path, which is
every engine's tested reference.  A NumPy run therefore never imports ``dask``, ``cupy`` or an engine.

:func:`table` lists *public function × engine*; the README's backend section prints it and a test checks that
the two agree and that each engine's ``register()`` fills exactly the seams it declares.
"""
from __future__ import annotations

import importlib
import threading

#: package of an array type -> the engine module that serves it
ENGINES = {"dask": "ntkref._engines.dask", "cupy": "ntkref._engines.cuda"}

_loaded = {}
_lock = threading.Lock()


def _engine_of(arg):
    top = type(arg).__module__.partition(".")[0]
    return top if top in ENGINES else None


def load(engine):
    """Import ``engine``'s module and run its ``register()`` (once); returns the module."""
    mod = _loaded.get(engine)
    if mod is None:
        with _lock:
            mod = _loaded.get(engine)
            if mod is None:
                mod = importlib.import_module(ENGINES[engine])
                mod.register()
                _loaded[engine] = mod
    return mod


class Seam:
    """A function of the core that an engine may take over for its array type.

    ``public`` names the public function(s) the seam serves (for :func:`table`).
    """

    def __init__(self, name, public, doc):
        self.name = name
        self.public = public
        self.__doc__ = doc
        self._impls = {}

    def __repr__(self):
        return f"<seam {self.name}: {sorted(self._impls) or 'no engine loaded'}>"

    def register(self, engine, impl):
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}; known: {sorted(ENGINES)}")
        self._impls[engine] = impl
        return impl

    def get(self, engine):
        """``engine``'s implementation (loading the engine), for seams not keyed by an argument's type."""
        load(engine)
        return self._impls[engine]

    def lookup(self, *args):
        """The engine's implementation for the first argument whose type an engine serves, else ``None``.

        ``None`` also when that engine does not serve this seam: the array-API path then runs (or refuses
        the array type with its own message).
        """
        for a in args:
            engine = _engine_of(a)
            if engine is not None:
                load(engine)
                return self._impls.get(engine)
        return None


# ------------------------------------------------------------------------------------------ the seams
fc = Seam("fc", "kernels.fc", "Lazy blocked FC NNGP/NTK Gram (Dask): fc(x1, x2, **kwargs).")
fc_relu_fused = Seam(
    "fc_relu_fused", "kernels.fc",
    "Fused bias-free ReLU FC Gram on prepared norms and unit rows (CUDA), called after validation with "
    "the arguments of the array-API block recursion it replaces.")
cntk = Seam("cntk", "kernels.cntk", "Lazy blocked CNTK Gram (Dask): cntk(x1, x2, **kwargs).")
empirical_ntk = Seam("empirical_ntk", "nets.empirical_ntk", "Lazy blocked empirical NTK (Dask).")
store_gram = Seam("store_gram", "kernels.store_gram", "Write a Dask Gram to disk block by block.")
open_gram = Seam("open_gram", "kernels.open_gram", "A stored Gram as a lazy Dask array.")
solve = Seam("solve", "machines.solve", "Kernel machine on a Gram the core cannot hold (Dask).")
hard_margin_svm = Seam("hard_margin_svm", "machines.hard_margin_svm", "Hard-margin SVM on a Dask Gram.")
predict = Seam("predict", "machines.predict", "Lazy predictions K(x, X)·α (Dask).")
checked_gram = Seam("checked_gram", "machines.checked_gram",
                    "The engine's answer for a Gram the dense checks cannot read (Dask: a refusal).")
gram_operator = Seam("gram_operator", "krr.solve_cg",
                     "The Gram as an operator for CG: mat-vec, diagonal, columns (Dask).")
gradient_flow = Seam("gradient_flow", "dynamics.gradient_flow",
                     "The engine's answer for gradient_flow (Dask: a refusal).")
subgradient_descent = Seam("subgradient_descent", "dynamics.subgradient_descent",
                           "Subgradient descent with one blocked mat-vec per step (Dask).")
certified_radius = Seam("certified_radius", "certify.certified_radius",
                        "Lazy certified radii, one task per row chunk of x_test (Dask).")
open_zarr = Seam("open_zarr", "ntkref compare --sample/--rows on a Zarr candidate",
                 "Open a Zarr array read-only for sampled reads: open_zarr(path) (zarr lives with the Dask engine).")
free_memory = Seam("free_memory", "the memory guard (every Gram-sized allocation)", "Bytes free where an array lives (CUDA: device memory).")

SEAMS = (fc, fc_relu_fused, cntk, empirical_ntk, store_gram, open_gram, solve, hard_margin_svm, predict, checked_gram,
         gram_operator, gradient_flow, subgradient_descent, certified_radius, open_zarr, free_memory)


def declared():
    """{engine: {seam name: what the engine does there}} from each engine module's ``SEAMS`` — without running
    ``register()`` (so without importing Dask or CuPy)."""
    return {engine: dict(importlib.import_module(path).SEAMS) for engine, path in ENGINES.items()}


def table():
    """Rows ``(public function, {engine: what it does})`` of what the engines take over, in the order of
    :data:`SEAMS` (no engine is loaded)."""
    by_engine = declared()
    rows = {}
    for seam in SEAMS:
        for engine in ENGINES:
            if seam.name in by_engine[engine]:
                rows.setdefault(seam.public, {})[engine] = by_engine[engine][seam.name]
    return list(rows.items())


def markdown_table():
    """:func:`table` as the Markdown table the README's backend section prints."""
    lines = ["| public function | Dask arrays (`ntkref/_engines/dask`) | CuPy arrays (`ntkref/_engines/cuda.py`) |",
             "|---|---|---|"]
    for public, cells in table():
        name = f"`{public}`" if "." in public and " " not in public else public
        lines.append(f"| {name} | {cells.get('dask', '—')} | {cells.get('cupy', '—')} |")
    return "\n".join(lines)
