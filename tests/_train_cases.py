"""The training cases tests/test_train_optimizers.py checks against TensorFlow's values
(tests/data/make_tf_train.py writes them): a model, an optimizer with its arguments, a dtype
and a step count per case, and the case's data (seeded: the same arrays for TF and minigraph).

Models: "dense" (tanh(x @ dense) @ w + b), "gather" (the mean of gathered rows of one table,
ids with repeats: an IndexedSlices gradient), "shards" (embedding_lookup over two shards, "mod");
each with a mean sparse softmax cross-entropy over 3 classes.
"""

from __future__ import annotations

import numpy as np

_OPTIMIZERS = {
    "gd": ("GradientDescentOptimizer", {"learning_rate": 0.5}),
    "gd_tensor_lr": ("GradientDescentOptimizer", {"learning_rate": 0.3, "lr_tensor": True}),
    "momentum": ("MomentumOptimizer", {"learning_rate": 0.2, "momentum": 0.9}),
    "nesterov": (
        "MomentumOptimizer",
        {"learning_rate": 0.2, "momentum": 0.9, "use_nesterov": True},
    ),
    "adagrad": ("AdagradOptimizer", {"learning_rate": 0.3, "initial_accumulator_value": 0.1}),
    "adam": ("AdamOptimizer", {"learning_rate": 0.05}),
    "adam_args": (
        "AdamOptimizer",
        {"learning_rate": 0.02, "beta1": 0.8, "beta2": 0.99, "epsilon": 1e-4},
    ),
}

CASES: dict[str, dict] = {}
for _model in ("dense", "gather", "shards"):
    for _opt, (_kind, _args) in _OPTIMIZERS.items():
        for _dtype in ("float32", "float64"):
            CASES[f"{_model}-{_opt}-{_dtype}"] = {
                "model": _model, "optimizer": _kind, "args": _args, "dtype": _dtype, "steps": 6,
            }  # fmt: skip


def case_data(case: str) -> dict[str, np.ndarray]:
    """The case's initial values and data (the same for every optimizer of a model)."""
    spec = CASES[case]
    dt = np.dtype(spec["dtype"])
    rng = np.random.default_rng(7)
    d, classes, batch = 4, 3, 6
    data = {
        "w": rng.normal(size=(d, classes)).astype(dt),
        "b": rng.normal(size=classes).astype(dt) * dt.type(0.1),
        "labels": rng.integers(0, classes, size=batch).astype(np.int32),
    }
    if spec["model"] == "dense":
        data["x"] = rng.normal(size=(batch, 5)).astype(dt)
        data["dense"] = rng.normal(size=(5, d)).astype(dt) * dt.type(0.5)
    else:
        table = rng.normal(size=(10, d)).astype(dt)
        # Repeats within a row and across rows; rows 8 and 9 are never named.
        data["ids"] = np.array(
            [[0, 0, 1], [2, 3, 3], [1, 4, 5], [6, 7, 0], [3, 3, 3], [5, 2, 6]], np.int32
        )
        if spec["model"] == "gather":
            data["emb"] = table
        else:
            data["emb0"], data["emb1"] = table[0::2].copy(), table[1::2].copy()
    return data
