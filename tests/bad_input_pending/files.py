"""Pending bad-input cases: files (see the package docstring)."""

NUMPY = {
    'data.path|name|bogus': 'pending fix in ntkref/data/__init__.py: no error raised',
    'datasets.binary_digits|negative|-1': 'pending fix in ntkref/datasets.py: no error raised',
    'datasets.binary_digits|negative|11': 'pending fix in ntkref/datasets.py: no error raised',
    'datasets.binary_digits|negative|nan': 'pending fix in ntkref/datasets.py: no error raised',
    'datasets.binary_digits|positive|0': 'pending fix in ntkref/datasets.py: no error raised',
    'datasets.binary_digits|positive|11': 'pending fix in ntkref/datasets.py: no error raised',
    'datasets.binary_digits|positive|nan': 'pending fix in ntkref/datasets.py: no error raised',
    'datasets.load_idx|path|bogus': "pending fix in ntkref/datasets.py: FileNotFoundError: [Errno 2] No such file or directory: 'bogus'",
    'datasets.load_mnist|directory|bogus': "pending fix in ntkref/datasets.py: FileNotFoundError: no images-idx3-ubyte[.gz] / labels-idx1-ubyte[.gz] in 'bogus'",
    'golden.case|case_id|bogus': "pending fix in ntkref/golden/__init__.py: KeyError: 'no golden case 'bogus'; see ntkref.golden.cases()'",
    'golden.inputs|name|bogus': "pending fix in ntkref/golden/__init__.py: KeyError: 'bogus'",
    'golden.path|name|bogus': 'pending fix in ntkref/golden/__init__.py: no error raised',
    'golden.values|case_id|bogus': "pending fix in ntkref/golden/__init__.py: KeyError: 'no golden case 'bogus'; see ntkref.golden.cases()'",
    'golden.values|output|bogus': "pending fix in ntkref/golden/__init__.py: KeyError: 'bogus'",
}

OTHER = {}
