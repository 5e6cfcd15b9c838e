"""Engines: implementations for array types the array API standard does not cover.

An engine serves one array type — ``dask`` (lazy blocked graphs: Grams larger than memory, clusters) or
``cupy`` (fused CUDA kernels) — and takes over named points of the core (the seams of
:mod:`ntkref._lib.dispatch`) for arrays of that type.  The core never imports an engine: the seam imports it
the first time such an array arrives and calls its ``register()``.  Engines import the core downward
(validation, the kernels' block code, the machines' duality helpers) and are independent of each other.

What an engine module must provide:

- ``SEAMS``: the names of the seams it fills (read without loading Dask or CuPy, for the README's table);
- ``register()``: fill exactly those seams (a test checks the two agree);
- for every implementation, a test against the array-API path through the *public* function.
"""
