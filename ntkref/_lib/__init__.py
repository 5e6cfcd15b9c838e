"""ntkref's ground floor: arrays, parameters, memory, files and the engine seam — no mathematics.

Every module of ntkref may import from here; nothing here imports a module of ntkref outside ``_lib``
(a test and import-linter's ``layers`` contract check it).

- :mod:`.backend` — ``NTKREF_BACKEND`` / ``NTKREF_DEVICE``, namespaces, devices, explicit host copies.
- :mod:`.compat` — what the array API standard lacks (erf, eigh with a host route, LAPACK shortcuts).
- :mod:`.validation` — parameter checks with one message template (:class:`InvalidParameterError`).
- :mod:`.memory` — the one memory guard: refuse a Gram-sized temporary that would not fit.
- :mod:`.files` — the one atomic file writer (temporary sibling, then ``os.replace``).
- :mod:`.dispatch` — the seam: named points where an engine (Dask, CUDA) takes over for its array type.
- :mod:`.api` — faces: private objects report the public module that exports them.
"""
