"""Pending bad-input cases: dynamics (see the package docstring)."""

NUMPY = {
    'dynamics.continuous_closed_form|segment_times|-inf': "pending fix in ntkref/dynamics.py: InvalidParameterError does not name ['segment_times']: The 'times' parameter of continuous_closed_form must co",
    'dynamics.continuous_closed_form|segment_times|complex': "pending fix in ntkref/dynamics.py: TypeError does not name ['segment_times']: only 0-dimensional arrays can be converted to Python scalars",
    'dynamics.continuous_closed_form|segment_times|empty': "pending fix in ntkref/dynamics.py: InvalidParameterError does not name ['K', 'segment_times', 'segment_derivatives']: The 'times' parameter of co",
    'dynamics.continuous_closed_form|segment_times|inf': "pending fix in ntkref/dynamics.py: InvalidParameterError does not name ['segment_times']: The 'times' parameter of continuous_closed_form must co",
    'dynamics.continuous_closed_form|segment_times|nan': "pending fix in ntkref/dynamics.py: InvalidParameterError does not name ['segment_times']: The 'times' parameter of continuous_closed_form must co",
    'dynamics.continuous_closed_form|segment_times|ndim': 'pending fix in ntkref/dynamics.py: no error raised',
    'dynamics.continuous_closed_form|segment_times|str': "pending fix in ntkref/dynamics.py: InvalidParameterError does not name ['segment_times']: The 'times' parameter of continuous_closed_form must be",
    'dynamics.gradient_flow[squared]|times|complex': "pending fix in ntkref/dynamics.py: TypeError does not name ['times']: only 0-dimensional arrays can be converted to Python scalars",
    'dynamics.gradient_flow[squared]|times|ndim': 'pending fix in ntkref/dynamics.py: no error raised',
    'dynamics.gradient_flow|max_steps|0': 'pending fix in ntkref/dynamics.py: no error raised',
    'dynamics.gradient_flow|max_steps|nan': 'pending fix in ntkref/dynamics.py: no error raised',
    'dynamics.gradient_flow|times|complex': "pending fix in ntkref/dynamics.py: TypeError does not name ['times']: only 0-dimensional arrays can be converted to Python scalars",
    'dynamics.gradient_flow|times|ndim': 'pending fix in ntkref/dynamics.py: no error raised',
}

OTHER = {}
