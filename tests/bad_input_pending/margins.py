"""Pending bad-input cases: margins (see the package docstring)."""

NUMPY = {
    'margins.circle_directions|dtype|bogus': "pending fix in ntkref/margins.py: TypeError does not name ['dtype']: data type 'bogus' not understood",
    'margins.l1_interpolation|directions|1e-300': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['directions']: l1_interpolation: the LP failed (The problem is infeasible",
    'margins.l1_interpolation|directions|1e300': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['directions']: l1_interpolation: the LP failed ((HiGHS Status 2: Model er",
    'margins.l1_interpolation|directions|empty': "pending fix in ntkref/margins.py: ValueError does not name ['x', 'y', 'directions']: Invalid input for linprog: c must be a 1-D array and must n",
    'margins.l1_interpolation|x|1e-300': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['x']: l1_interpolation: the LP failed (The problem is infeasible. (HiGHS ",
    'margins.l1_interpolation|x|1e300': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['x']: l1_interpolation: the LP failed ((HiGHS Status 2: Model error)); is",
    'margins.l1_interpolation|y|1e300': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['y']: l1_interpolation: the LP failed ((HiGHS Status 2: Model error)); is",
    'margins.l1_svm|directions|1e300': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['directions']: l1_svm: the LP failed ((HiGHS Status 2: Model error)).",
    'margins.l1_svm|directions|empty': "pending fix in ntkref/margins.py: ValueError does not name ['x', 'y', 'directions']: zero-size array to reduction operation maximum which has no",
    'margins.l1_svm|x|1e-300': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['x']: l1_svm: the data are not separable by the ReLU features of these di",
    'margins.l1_svm|x|1e300': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['x']: l1_svm: the LP failed ((HiGHS Status 2: Model error)).",
    'margins.linear_max_margin|x|1e-300': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['x']: linear_max_margin: the data are not linearly separable (through the",
    'margins.linear_max_margin|x|1e300': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['x']: linear_max_margin: the data are not linearly separable (through the",
    'margins.regularized_loss_and_grad|params|1e300': 'pending fix in ntkref/margins.py: silent non-finite result: array(inf)',
    'margins.regularized_loss|params|1e300': 'pending fix in ntkref/margins.py: silent non-finite result: array(inf)',
    'margins.train_regularized|gtol|-1.0': 'pending fix in ntkref/margins.py: no error raised',
    'margins.train_regularized|gtol|-inf': 'pending fix in ntkref/margins.py: no error raised',
    'margins.train_regularized|gtol|inf': 'pending fix in ntkref/margins.py: no error raised',
    'margins.train_regularized|gtol|nan': 'pending fix in ntkref/margins.py: no error raised',
    'margins.train_regularized|gtol|str': 'pending fix in ntkref/margins.py: no error raised',
    'margins.train_regularized|params0|1e300': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['params0']: train_regularized: gradient descent diverged (objective inf);",
    'margins.train_regularized|params0|array': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['params0']: The 'params[0]' parameter of HomogeneousNet.apply must have 2",
    'margins.train_regularized|params0|complex': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['params0']: The 'dtype' parameter must be float32 or float64. Got dtype('",
    'margins.train_regularized|params0|inf': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['params0']: The 'params[0]' parameter of HomogeneousNet.apply contains Na",
    'margins.train_regularized|params0|nan': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['params0']: The 'params[0]' parameter of HomogeneousNet.apply contains Na",
    'margins.train_regularized|params0|short': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['params0']: The 'params' parameter of HomogeneousNet.apply must be a list",
    'margins.train_regularized|x|1e300': "pending fix in ntkref/margins.py: InvalidParameterError does not name ['x']: The 'params[0]' parameter of train_regularized contains NaN or infi",
}

OTHER = {}
