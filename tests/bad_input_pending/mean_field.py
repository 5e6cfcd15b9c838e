"""Pending bad-input cases: mean_field (see the package docstring)."""

NUMPY = {
    'mean_field.feature_map|theta|1e300': 'pending fix in ntkref/mean_field.py: silent non-finite result: array([[-inf, -inf, -0., -inf, -inf],',
    'mean_field.first_variation_gradient|lam|0.0': 'pending fix in ntkref/mean_field.py: no error raised',
    'mean_field.first_variation_gradient|theta|1e300': 'pending fix in ntkref/mean_field.py: silent non-finite result: array([[nan, nan, nan, nan],',
    'mean_field.first_variation|lam|0.0': 'pending fix in ntkref/mean_field.py: no error raised',
    'mean_field.first_variation|theta_eval|1e300': 'pending fix in ntkref/mean_field.py: silent non-finite result: array([inf, nan])',
    'mean_field.first_variation|theta|1e300': 'pending fix in ntkref/mean_field.py: silent non-finite result: array([nan, nan])',
    'mean_field.flow_time_derivative|lam|0.0': 'pending fix in ntkref/mean_field.py: no error raised',
    'mean_field.flow_time_derivative|sphere|1e300': 'pending fix in ntkref/mean_field.py: silent non-finite result: array(nan)',
    'mean_field.flow_time_derivative|sphere|empty': 'pending fix in ntkref/mean_field.py: silent non-finite result: array(nan)',
    'mean_field.flow_time_derivative|theta|1e300': 'pending fix in ntkref/mean_field.py: silent non-finite result: array(nan)',
    'mean_field.flow_time_derivative|x|1e300': 'pending fix in ntkref/mean_field.py: silent non-finite result: array(-inf)',
    'mean_field.functional|lam|0.0': 'pending fix in ntkref/mean_field.py: no error raised',
    'mean_field.functional|theta|1e300': 'pending fix in ntkref/mean_field.py: silent non-finite result: array(nan)',
    'mean_field.min_first_variation|lam|0.0': 'pending fix in ntkref/mean_field.py: no error raised',
    'mean_field.min_first_variation|theta|1e300': 'pending fix in ntkref/mean_field.py: silent non-finite result: array(nan)',
    'mean_field.network_objective|Theta|1e300': 'pending fix in ntkref/mean_field.py: silent non-finite result: array(nan)',
    'mean_field.network_objective|lam|0.0': 'pending fix in ntkref/mean_field.py: no error raised',
    'mean_field.optimality_certificate|theta|1e300': 'pending fix in ntkref/mean_field.py: silent non-finite result: array(nan)',
    'mean_field.outputs|theta|1e300': 'pending fix in ntkref/mean_field.py: silent non-finite result: array([ nan, nan, nan, nan, -inf])',
    'mean_field.perturbed_step|lam|0.0': 'pending fix in ntkref/mean_field.py: no error raised',
    'mean_field.perturbed_step|theta|1e300': 'pending fix in ntkref/mean_field.py: silent non-finite result: array([[ nan, nan, nan, nan],',
    'mean_field.perturbed_wasserstein_flow|lam|0.0': 'pending fix in ntkref/mean_field.py: no error raised',
    'mean_field.perturbed_wasserstein_flow|min_method|bogus': 'pending fix in ntkref/mean_field.py: no error raised',
    'mean_field.perturbed_wasserstein_flow|x|1e300': 'pending fix in ntkref/mean_field.py: silent non-finite result: array([7.53014886e+298, inf, nan, nan])',
    'mean_field.regularity_constants|lam|0.0': 'pending fix in ntkref/mean_field.py: no error raised',
    'mean_field.regularity_constants|x|1e300': "pending fix in ntkref/mean_field.py: LinAlgError does not name ['x']: Eigenvalues did not converge",
    'mean_field.sphere_uniform|dtype|bogus': "pending fix in ntkref/mean_field.py: TypeError does not name ['dtype']: data type 'bogus' not understood",
    'mean_field.sphere_uniform|n_points|0': 'pending fix in ntkref/mean_field.py: no error raised',
}

OTHER = {}
