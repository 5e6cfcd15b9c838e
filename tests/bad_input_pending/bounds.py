"""Pending bad-input cases: bounds (see the package docstring)."""

NUMPY = {
    'bounds.convex_gap_bound[discrete]|times_or_lr|-1.0': "pending fix in ntkref/bounds.py: InvalidParameterError does not name ['times_or_lr']: The 'lr' parameter of convex_gap_bound must be a real num",
    'bounds.convex_gap_bound[discrete]|times_or_lr|-inf': "pending fix in ntkref/bounds.py: InvalidParameterError does not name ['times_or_lr']: The 'lr' parameter of convex_gap_bound must be a finite r",
    'bounds.convex_gap_bound[discrete]|times_or_lr|0.0': "pending fix in ntkref/bounds.py: InvalidParameterError does not name ['times_or_lr']: The 'lr' parameter of convex_gap_bound must be a real num",
    'bounds.convex_gap_bound[discrete]|times_or_lr|inf': "pending fix in ntkref/bounds.py: InvalidParameterError does not name ['times_or_lr']: The 'lr' parameter of convex_gap_bound must be a finite r",
    'bounds.convex_gap_bound[discrete]|times_or_lr|nan': "pending fix in ntkref/bounds.py: InvalidParameterError does not name ['times_or_lr']: The 'lr' parameter of convex_gap_bound must be a finite r",
    'bounds.convex_gap_bound[discrete]|times_or_lr|str': "pending fix in ntkref/bounds.py: InvalidParameterError does not name ['times_or_lr']: The 'lr' parameter of convex_gap_bound must be a real num",
    'bounds.convex_gap_bound|times_or_lr|-inf': "pending fix in ntkref/bounds.py: InvalidParameterError does not name ['times_or_lr']: The 'times' parameter of convex_gap_bound must be a finit",
    'bounds.convex_gap_bound|times_or_lr|complex': "pending fix in ntkref/bounds.py: InvalidParameterError does not name ['times_or_lr']: The 'times' parameter of convex_gap_bound must be a real ",
    'bounds.convex_gap_bound|times_or_lr|empty': "pending fix in ntkref/bounds.py: InvalidParameterError does not name ['times_or_lr', 'integrand']: The 'times' parameter of convex_gap_bound mu",
    'bounds.convex_gap_bound|times_or_lr|inf': "pending fix in ntkref/bounds.py: InvalidParameterError does not name ['times_or_lr']: The 'times' parameter of convex_gap_bound must be a finit",
    'bounds.convex_gap_bound|times_or_lr|nan': "pending fix in ntkref/bounds.py: InvalidParameterError does not name ['times_or_lr']: The 'times' parameter of convex_gap_bound must be a finit",
    'bounds.convex_gap_bound|times_or_lr|ndim': "pending fix in ntkref/bounds.py: InvalidParameterError does not name ['times_or_lr']: The 'times' parameter of convex_gap_bound must be a finit",
    'bounds.convex_gap_bound|times_or_lr|object': "pending fix in ntkref/bounds.py: InvalidParameterError: The 'times' parameter of convex_gap_bound must be a real array: dtype object",
    'bounds.convex_gap_bound|times_or_lr|str': "pending fix in ntkref/bounds.py: InvalidParameterError does not name ['times_or_lr']: The 'times' parameter of convex_gap_bound must be a real ",
    'bounds.rademacher_bound|c|0.0': "pending fix in ntkref/bounds.py: InvalidParameterError does not name ['c']: The 'empirical_loss' parameter of rademacher_bound must be a real n",
}

OTHER = {}
