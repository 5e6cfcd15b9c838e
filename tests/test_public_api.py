"""The public API of 0ba5a20 stays importable from the same paths (SciPy's ``test_api_importable``).

The list below was generated once, from each public module's ``__all__`` at that commit, and is frozen: a
restructuring of the package's private modules must not move a public name. Objects defined by ntkref also
report a public module as their ``__module__`` (the faces set it), so reprs, pickles and docs show the path
a user imports them from.
"""
import importlib
import inspect
import pickle

import pytest

PUBLIC_API = {
    "ntkref": (
        "BACKENDS", "BackendError", "InvalidParameterError", "adversarial", "backend_name", "bounds", "certify",
        "cli", "data", "datasets", "default_namespace", "distributions", "dynamics", "enclosures", "equivalence",
        "golden", "intervals", "kernels", "kkt", "krr", "losses", "machines", "margins", "mean_field", "nets",
        "regularizers", "sparsity", "testing", "to_numpy",
    ),
    "ntkref.adversarial": (
        "AdversarialTrajectory", "adversarial_gradient_step", "adversarial_training", "attack_displacement_bound",
        "fgsm", "input_gradient", "log_softmax", "loss_gradient_lipschitz", "loss_input_gradient",
        "mixed_tangent_kernel", "mixed_tangent_kernel_diagonal", "mtk_output_change", "pgd", "project_ball",
        "robust_accuracy", "softmax", "softmax_cross_entropy", "softmax_cross_entropy_gradient",
    ),
    "ntkref.bounds": (
        "convex_gap_bound", "gap_bound_test_points", "gronwall_gap_bound", "gronwall_gap_bound_discrete",
        "pl_condition", "printed_gap_bound", "rademacher_bound", "ramp_loss",
    ),
    "ntkref.certify": (
        "H_ARGMIN", "H_MIN", "certified_radius", "dot_norm_ranges", "ibp_bounds", "ibp_radius", "ntk_h",
        "ntk_interval", "output_bounds",
    ),
    "ntkref.cli": (
        "CLIError", "build_parser", "kernel_error", "main",
    ),
    "ntkref.data": (
        "DIGITS01_FILE", "N_DIGITS01", "load_digits01", "path",
    ),
    "ntkref.datasets": (
        "IDXFormatError", "binary_digits", "load_idx", "load_mnist",
    ),
    "ntkref.distributions": (
        "KernelPredictor", "ORBIT_LABELS", "OrbitBound", "OrbitValues", "PREDICTOR_METHODS", "fit_kernel_predictor",
        "hypercube", "lemma_b2_functions", "lemma_b5_coefficients", "orbit_error_bound", "quadratic_feature_gram",
        "sample_hypercube", "sample_sparse_xor", "sign_orbit",
    ),
    "ntkref.dynamics": (
        "Trajectory", "continuous_closed_form", "discrete_closed_form", "gradient_flow", "subgradient_descent",
        "svm_limit_printed",
    ),
    "ntkref.enclosures": (
        "Enclosure", "arora_ntk", "cntk", "empirical_ntk", "fc", "fc_diagonal", "fc_pairs", "two_layer_relu_ntk",
        "wei_k1_k2", "wei_kernel",
    ),
    "ntkref.equivalence": (
        "Comparison", "compare",
    ),
    "ntkref.golden": (
        "RECORD_FORMAT", "RECORD_VERSION", "ReplayMismatch", "ReplayResult", "case", "cases", "inputs",
        "load_record", "manifest", "path", "record", "replay", "values",
    ),
    "ntkref.intervals": (
        "Interval", "LIBRARY_ULPS", "abs", "acos", "asin", "atan2", "constant", "erf", "exp", "log", "matmul",
        "maximum", "minimum", "relu", "sqrt", "square", "sum", "where",
    ),
    "ntkref.kernels": (
        "ACTIVATIONS", "Activation", "BoundedKernel", "Kernel", "arora_ntk", "chen_ntk", "cntk", "fc", "fc_diagonal", "open_gram",
        "relu_h", "store_gram", "two_layer_relu_ntk", "wei_k1_k2", "wei_kernel",
    ),
    "ntkref.kkt": (
        "InterceptMachine", "KKTDiagnosis", "diagnose", "duality_gap", "fit_with_intercept", "from_sklearn_svc",
        "kkt_residual",
    ),
    "ntkref.krr": (
        "KRRMachine", "PRECONDITIONERS", "fit_cg", "solve_cg",
    ),
    "ntkref.losses": (
        "Loss", "LossOverflowError", "NAMES", "get",
    ),
    "ntkref.machines": (
        "CheckedGram", "ConvergenceWarning", "KernelMachine", "checked_gram", "dual_objective", "duality_gap",
        "fit", "hard_margin_svm", "kernel_gram", "objective", "predict", "rkhs_norm", "solve",
    ),
    "ntkref.margins": (
        "L1Solution", "LinearMaxMargin", "MarginCertificate", "TrainingRecord", "circle_directions",
        "l1_interpolation", "l1_svm", "linear_max_margin", "margin_certificate", "margin_lower_bound", "margins",
        "normalized_margin", "regularized_loss", "regularized_loss_and_grad", "relu_features", "train_regularized",
        "width4_loss_upper_bound",
    ),
    "ntkref.mean_field": (
        "FlowRecord", "cap_measure_lower_bound", "feature_map", "first_variation", "first_variation_gradient",
        "flow_time_derivative", "from_network", "functional", "min_first_variation", "network_objective",
        "optimality_certificate", "outputs", "perturbed_step", "perturbed_wasserstein_flow", "regularity_constants",
        "sphere_uniform", "to_network",
    ),
    "ntkref.nets": (
        "Antisymmetric", "ConvNet", "FullyConnected", "HomogeneousNet", "Linearized", "NetTrajectory", "Scaled",
        "balanced_two_layer", "empirical_ntk", "flatten_params", "rebalance", "train", "two_layer_measure",
        "unflatten_params", "width4_net", "zero_pad",
    ),
    "ntkref.regularizers": (
        "Flow", "RegularizedTrajectory", "continual_learning_penalty", "flow_gap_bound", "fs_map_log_prior",
        "fs_map_objective", "gaussian_logpdf", "gaussian_marginal", "kernel_generalization_bound", "krr_fit",
        "krr_norm_bound", "krr_objective", "krr_predict", "linearized_mse_flow", "linearized_prior",
        "ntk_regularized_generalization_bound", "ntk_regularizer", "regularized_flow", "regularized_gd_linear",
        "rkhs_norm_sq", "rkhs_norm_sq_dual", "sub_batch_rkhs_norm", "sub_batch_term", "tau_from_zeta",
        "train_regularized",
    ),
    "ntkref.sparsity": (
        "AWTSearchResult", "AWTValue", "LinearModel", "adversarial_linear_direction", "apply_mask", "awt_distances",
        "awt_gap_bound", "awt_gradient", "awt_objective", "awt_objective_general", "awt_search", "awt_step_size",
        "direction_angle", "full_mask", "gaussian_mixture", "linear_awt_objective", "linear_gmm_accuracy",
        "linear_gmm_adversarial_accuracy", "magnitude_mask", "mask_density", "masked_adversarial_training",
        "masked_apply", "masked_empirical_ntk", "masked_jacobian", "masked_vjp", "normal_cdf", "random_mask",
        "svm_direction",
    ),
    "ntkref.testing": (
        "CNTK_BATTERY", "CheckReport", "CoverageWarning", "ENTRY_COLUMNS", "FC_BATTERY", "FAILURE_KINDS", "IMAGE_KINDS", "KindSummary", "MODES", "Mismatch",
        "OracleMismatch", "REPORT_SCHEMA", "ROW_KINDS", "SampledCheck", "certified_bound", "check_certificate",
        "EMPIRICAL_NTK_BOUND", "check_empirical_ntk",
        "check_cntk", "check_dynamics", "check_fit", "check_gram_sample", "check_kernel", "fit_convention_hint", "generic_kernel_inputs",
        "hard_images", "hard_inputs", "ill_conditioned_kernels", "image_inputs", "images", "json_safe",
        "kernel_error", "kernel_inputs", "labels", "learning_rates", "machine_problems", "rows", "widths",
    ),
    "ntkref.adapters": (
        "from_kernel_ridge", "from_svc", "kernel_ridge_alpha", "stax_cntk", "stax_fc", "svc_C",
    ),
    "ntkref.pytest_plugin": (
        "Oracle", "ntkref_oracle", "pytest_addoption", "pytest_configure", "pytest_terminal_summary",
    ),
}


@pytest.mark.parametrize("module", sorted(PUBLIC_API))
def test_api_importable(module):
    mod = importlib.import_module(module)
    missing = [name for name in PUBLIC_API[module] if not hasattr(mod, name)]
    assert not missing, f"{module} lost public names: {missing}"
    for name in PUBLIC_API[module]:
        exec(f"from {module} import {name}", {})


def _is_public_path(path):
    return all(not part.startswith("_") for part in path.split("."))


@pytest.mark.parametrize("module", sorted(PUBLIC_API))
def test_objects_report_a_public_module(module):
    """A class or function of ntkref names a public module that exports it (reprs, pickles, docs)."""
    mod = importlib.import_module(module)
    wrong = []
    for name in PUBLIC_API[module]:
        obj = getattr(mod, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        home = getattr(obj, "__module__", "") or ""
        if not home.startswith("ntkref"):
            continue  # re-exported from another library
        if not _is_public_path(home) or not hasattr(importlib.import_module(home), obj.__name__):
            wrong.append(f"{name}: {home}")
    assert not wrong, f"{module}: objects reporting a private or wrong module: {wrong}"


def test_public_classes_pickle_by_their_public_path():
    from ntkref.machines import ConvergenceWarning, KernelMachine

    assert pickle.loads(pickle.dumps(KernelMachine)) is KernelMachine
    assert "ntkref.machines" in repr(KernelMachine)
    assert pickle.loads(pickle.dumps(ConvergenceWarning("x"))).args == ("x",)
