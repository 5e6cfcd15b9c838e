"""The seed-000 task (MNIST 0 vs 1, labels −1/+1, pixels in [0, 1], no other normalisation) for the reproductions.

Default: the 2 128 embedded 0/1 digits (``ntkref.data.load_digits01``), split deterministically — the first
1 700 for training, the remaining 428 for testing (the images are already in the source subset's shuffled
order).  ``mnist_dir``: a full MNIST (``train-…``/``t10k-…`` IDX files, raw or .gz): 12 665 / 2 115 as in the paper.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EMBEDDED_N_TRAIN = 1700


@dataclass
class Task:
    x_train: np.ndarray  # (n, 784) float64 in [0, 1]
    y_train: np.ndarray  # (n,) ±1 (digit 1 → +1)
    x_test: np.ndarray
    y_test: np.ndarray
    source: str

    @property
    def n_train(self):
        return self.x_train.shape[0]

    @property
    def n_test(self):
        return self.x_test.shape[0]

    def subset(self, n_train=None, n_test=None):
        """The first ``n_train`` training and first ``n_test`` test points (deterministic)."""
        a = self.n_train if n_train is None else min(n_train, self.n_train)
        b = self.n_test if n_test is None else min(n_test, self.n_test)
        return Task(self.x_train[:a], self.y_train[:a], self.x_test[:b], self.y_test[:b],
                    self.source + ("" if (a, b) == (self.n_train, self.n_test) else f" (first {a} train / {b} test)"))


def _binary(images, labels):
    images = np.asarray(images).reshape(len(labels), -1)
    keep = (labels == 0) | (labels == 1)
    x = images[keep].astype(np.float64) / 255.0
    y = np.where(labels[keep] == 1, 1.0, -1.0)
    return x, y


def load_task(mnist_dir=None, n_train=None, n_test=None):
    """The 0-vs-1 task; see the module docstring.  ``n_train``/``n_test`` take the first points."""
    if mnist_dir is None:
        from ntkref.data import load_digits01

        images, labels = load_digits01()
        x, y = _binary(images, labels)
        k = EMBEDDED_N_TRAIN
        task = Task(x[:k], y[:k], x[k:], y[k:],
                    f"embedded MNIST 0/1 digits (ntkref.data, {len(y)} images): first {k} train, last {len(y) - k} test")
    else:
        from ntkref.datasets import load_mnist

        xtr, ytr = _binary(*load_mnist(mnist_dir, "train"))
        xte, yte = _binary(*load_mnist(mnist_dir, "test"))
        task = Task(xtr, ytr, xte, yte, f"MNIST 0/1 from {mnist_dir}: {len(ytr)} train, {len(yte)} test")
    return task.subset(n_train, n_test)
