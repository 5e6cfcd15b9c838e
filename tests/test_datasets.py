"""IDX reader: round trips of files written byte by byte from the format's definition, and bad files."""
import gzip
import struct

import numpy as np
import pytest

from ntkref.datasets import IDXFormatError, binary_digits, load_idx, load_mnist


def _write_idx(path, arr, code=0x08, compress=False):
    header = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    data = header + arr.astype(arr.dtype.newbyteorder(">")).tobytes()
    path.write_bytes(gzip.compress(data) if compress else data)


@pytest.mark.parametrize("compress", [False, True])
def test_round_trip(tmp_path, compress):
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, size=(5, 28, 28), dtype=np.uint8)
    labs = np.array([0, 1, 7, 1, 0], dtype=np.uint8)
    suffix = ".gz" if compress else ""
    _write_idx(tmp_path / f"images-idx3-ubyte{suffix}", imgs, compress=compress)
    _write_idx(tmp_path / f"labels-idx1-ubyte{suffix}", labs, compress=compress)
    a, b = load_mnist(str(tmp_path))
    assert np.array_equal(a, imgs) and np.array_equal(b, labs)
    X, y = binary_digits(a, b)
    assert X.shape == (4, 784) and np.array_equal(y, [-1, 1, 1, -1])
    assert np.array_equal(X[1], imgs[1].ravel() / 255.0)


def test_float_idx(tmp_path):
    arr = np.linspace(-1, 1, 12).reshape(3, 4)
    _write_idx(tmp_path / "f.idx", arr, code=0x0E)
    assert np.array_equal(load_idx(tmp_path / "f.idx"), arr)


def test_malformed_files(tmp_path):
    p = tmp_path / "bad"
    p.write_bytes(b"\x01\x00\x08\x01\x00\x00\x00\x02\x00\x00")
    with pytest.raises(IDXFormatError, match="magic"):
        load_idx(p)
    p.write_bytes(b"\x00\x00\x07\x01\x00\x00\x00\x02\x00\x00")
    with pytest.raises(IDXFormatError, match="element type"):
        load_idx(p)
    p.write_bytes(b"\x00\x00\x08\x01\x00\x00\x00\x05\x00\x00")
    with pytest.raises(IDXFormatError, match="5 bytes"):
        load_idx(p)
    with pytest.raises(FileNotFoundError):
        load_mnist(str(tmp_path / "nowhere"))


def test_shared_subset_if_present():
    import os

    d = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "mnist-subset")
    if not os.path.isdir(d):
        pytest.skip("shared MNIST subset not present on this machine")
    images, labels = load_mnist(d)
    assert images.shape == (10000, 28, 28) and labels.shape == (10000,)
    X, y = binary_digits(images, labels)
    assert X.shape[0] == int((labels == 0).sum() + (labels == 1).sum()) == 2128


def test_binary_digits_keeps_the_namespace_and_device():
    """binary_digits on arrays of array_api_strict's device1 (the CPU stand-in for a GPU): results on device1,
    equal to the NumPy route; the IDX readers themselves return host NumPy arrays (file contents)."""
    import array_api_compat

    from ntkref import to_numpy

    strict = pytest.importorskip("array_api_strict")
    dev = strict.Device("device1")
    rng = np.random.default_rng(1)
    imgs = rng.integers(0, 256, size=(6, 4, 4), dtype=np.uint8)
    labs = np.array([3, 0, 1, 1, 7, 0], dtype=np.uint8)
    X_np, y_np = binary_digits(imgs, labs)
    assert isinstance(X_np, np.ndarray) and isinstance(y_np, np.ndarray)
    X, y = binary_digits(strict.asarray(imgs, device=dev), strict.asarray(labs, device=dev))
    for a in (X, y):
        assert array_api_compat.array_namespace(a) is strict and array_api_compat.device(a) == dev
    assert X.dtype == strict.float64 and tuple(X.shape) == (4, 16)
    assert np.array_equal(to_numpy(X), X_np) and np.array_equal(to_numpy(y), y_np)
    assert np.array_equal(y_np, [-1, 1, 1, -1])
    # no digit of the pair present: empty, with the feature count kept
    X0, y0 = binary_digits(strict.asarray(imgs, device=dev), strict.asarray(labs, device=dev), negative=5, positive=6)
    assert tuple(X0.shape) == (0, 16) and tuple(y0.shape) == (0,) and array_api_compat.device(X0) == dev


def test_missing_paths_name_the_parameter(tmp_path):
    """A path that names nothing is a FileNotFoundError (as before) that is also an InvalidParameterError whose
    message names the parameter and carries the path; a non-path is refused naming it."""
    from ntkref import InvalidParameterError, data

    for call, name in [(lambda: load_idx(tmp_path / "nowhere.idx"), "path"),
                       (lambda: load_idx(tmp_path), "path"),  # a folder is not a file
                       (lambda: load_mnist(tmp_path / "nowhere"), "directory"),
                       (lambda: load_mnist(tmp_path), "directory"),  # a folder without the pair
                       (lambda: data.path("nowhere.npz"), "name")]:
        with pytest.raises(FileNotFoundError, match=f"'{name}'") as info:
            call()
        assert isinstance(info.value, InvalidParameterError)
    with pytest.raises(InvalidParameterError, match="'path'"):
        load_idx(3)
    assert not list(tmp_path.iterdir())  # nothing created


def test_binary_digits_validates_the_digits():
    """negative/positive are two different digits 0-9; the selection and the ±1 labels follow them."""
    from ntkref import InvalidParameterError

    imgs = np.arange(4 * 2 * 2, dtype=np.uint8).reshape(4, 2, 2)
    labels = np.array([3, 7, 1, 7])
    X, y = binary_digits(imgs, labels, negative=3, positive=7)
    assert X.shape == (3, 4) and np.array_equal(y, [-1.0, 1.0, 1.0])
    assert np.array_equal(X * 255, imgs[[0, 1, 3]].reshape(3, 4))
    for kw, name in [(dict(negative=-1), "negative"), (dict(negative=10), "negative"), (dict(positive=1.0), "positive"),
                     (dict(positive=float("nan")), "positive"), (dict(negative=1, positive=1), "'negative' and 'positive'")]:
        with pytest.raises(InvalidParameterError, match=name):
            binary_digits(imgs, labels, **kw)
