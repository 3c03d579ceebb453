"""Trains a sharded embedding classifier on synthetic data, locally or on a Dask cluster with
parameter servers.

    python examples/train_embedding.py                       # local: 400 steps
    python examples/train_embedding.py --steps 1000 --every 100 --checkpoint /tmp/emb.ckpt
    python examples/train_embedding.py --cluster             # a LocalCluster: 2 ps, 1 worker

The model (as the training benchmark's): an embedding table of VOCAB x DIM float32 rows, split
"mod"-wise into two variable shards; each example is 8 ids, looked up (embedding_lookup: a
ResourceGather per shard, only the rows named are read), averaged, and mapped by one dense
layer to 10 classes; the loss is the mean sparse softmax cross-entropy, minimised by Adagrad
(learning rate 0.1, initial accumulator 0.001). The gradient of each shard is an
IndexedSlices, so a step updates only the rows its ids name (ResourceSparseApplyAdagrad),
never the whole table.

The data is learnable: every id has a hidden class, and an example of class c draws most of
its ids among the ids of class c, the rest at random. The script prints a progress line every
`--every` steps (step, the mean loss since the last line, steps per second), the accuracy on
held-out examples, and writes a checkpoint of every variable (`minigraph.train.Saver`) to
`--checkpoint` (default: a file in a new temporary directory).

With `--cluster`, a LocalCluster of three processes serves `/job:ps/task:0`, `/job:ps/task:1`
(one shard each, with its Adagrad slot: the state stays in those workers' memory across steps)
and `/job:worker/task:0` (the dense layer and the loss); a step sends each ps task its ids and
gradient rows only. Needs the `distributed` extra: pip install -e '.[distributed]'.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import minigraph as mg
import ops

VOCAB, DIM, CLASSES, IDS_PER_EXAMPLE, BATCH = 2_000, 16, 10, 8, 64
SIGNAL = 0.6  # the share of an example's ids drawn from its class's ids


class Data:
    """Synthetic examples: (ids [n, 8] int32, labels [n] int32)."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.id_class = self.rng.integers(0, CLASSES, VOCAB)
        self.by_class = [np.flatnonzero(self.id_class == c) for c in range(CLASSES)]

    def batch(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        labels = self.rng.integers(0, CLASSES, n).astype(np.int32)
        ids = self.rng.integers(0, VOCAB, (n, IDS_PER_EXAMPLE))
        own = self.rng.random((n, IDS_PER_EXAMPLE)) < SIGNAL
        for c in range(CLASSES):
            pick = own & (labels == c)[:, None]
            ids[pick] = self.rng.choice(self.by_class[c], int(pick.sum()))
        return ids.astype(np.int32), labels


class Model:
    """The graph: placeholders, the shards, the loss, the train op, the accuracy."""

    def __init__(self, ps: list[str] | None, worker: str | None):
        scope = mg.Scope.new_root_scope()
        rng = np.random.default_rng(1)
        table = (rng.standard_normal((VOCAB, DIM)) * 0.1).astype(np.float32)
        places = ps or [None, None]
        self.shards = [
            mg.Variable(
                scope if place is None else scope.with_device(place),
                table[k :: len(places)],  # "mod": id i is row i // 2 of shard i % 2
                name=f"embedding{k}",
            )
            for k, place in enumerate(places)
        ]  # fmt: skip
        s = scope if worker is None else scope.with_device(worker)
        self.ids = mg.Placeholder(s.with_op_name("ids"), mg.int32, [None, IDS_PER_EXAMPLE])
        self.labels = mg.Placeholder(s.with_op_name("labels"), mg.int32, [None])
        weights = mg.Variable(s, (rng.standard_normal((DIM, CLASSES)) * 0.1).astype(np.float32),
                              name="weights")  # fmt: skip
        bias = mg.Variable(s, np.zeros(CLASSES, np.float32), name="bias")
        rows = ops.embedding_lookup(s, self.shards, self.ids)
        logits = ops.BiasAdd(s, ops.MatMul(s, ops.Mean(s, rows, 1), weights), bias)
        xent = ops.SparseSoftmaxCrossEntropyWithLogits(s, logits, self.labels)
        self.loss = ops.Mean(s, xent.loss, 0).output
        self.global_step = mg.Variable(s, np.int64(0), trainable=False, name="global_step")
        # A small initial accumulator: with TF's default (0.1) the first steps of a row, whose
        # gradients are small (a mean over the batch and the ids), barely move it.
        self.optimizer = mg.train.AdagradOptimizer(0.1, initial_accumulator_value=0.001)
        self.train = self.optimizer.minimize(self.loss, global_step=self.global_step)
        predicted = ops.ArgMax(s, logits, 1, output_type=mg.int32)
        correct = ops.Cast(s, ops.Equal(s, predicted, self.labels), mg.float32)
        self.accuracy = ops.Mean(s, correct, 0).output
        self.init = mg.global_variables_initializer(scope)
        self.saver = mg.train.Saver()
        self.scope = scope


def train(sess: mg.Session, model: Model, data: Data, steps: int, every: int) -> mg.RunMetadata:
    """Runs the steps, printing the progress lines; returns the first step's RunMetadata."""
    print(f"{'step':>6}  {'loss':>8}  {'steps/s':>8}")
    losses: list[float] = []
    first = mg.RunMetadata()
    start = time.perf_counter()
    for step in range(1, steps + 1):
        ids, labels = data.batch(BATCH)
        loss, _ = sess.run([model.loss, model.train], {model.ids: ids, model.labels: labels},
                           run_metadata=first if step == 1 else None)  # fmt: skip
        losses.append(float(loss))
        if step % every == 0 or step == steps:
            elapsed = time.perf_counter() - start
            print(f"{step:>6}  {np.mean(losses):>8.4f}  {len(losses) / elapsed:>8.1f}",
                  flush=True)  # fmt: skip
            losses, start = [], time.perf_counter()
    return first


def run(args: argparse.Namespace, target: Any = None, cluster: bool = False) -> int:
    if cluster:
        model = Model(["/job:ps/task:0", "/job:ps/task:1"], "/job:worker/task:0")
        config = mg.SessionConfig(cluster={"ps": 2, "worker": 1})
    else:
        model, config = Model(None, None), None
    data = Data(seed=2)
    held_out = Data(seed=2)  # the same hidden classes, other examples
    held_out.rng = np.random.default_rng(3)
    test_ids, test_labels = held_out.batch(2048)
    checkpoint = args.checkpoint or str(Path(tempfile.mkdtemp()) / "train_embedding.ckpt")
    Path(checkpoint).parent.mkdir(parents=True, exist_ok=True)
    with mg.Session(model.scope, config, target=target) as sess:
        sess.run(model.init)
        placed = train(sess, model, data, args.steps, args.every).placement
        if cluster:  # where the shards and their Adagrad slots (the state) live
            for shard in model.shards:
                slot = model.optimizer.get_slot(shard, "accumulator")
                print(f"{shard.op.name}: {placed[shard.op.name]}, "
                      f"{slot.op.name}: {placed[slot.op.name]}")  # fmt: skip
        accuracy = sess.run(model.accuracy, {model.ids: test_ids, model.labels: test_labels})
        print(f"accuracy {accuracy:.3f} on {len(test_labels)} held-out examples "
              f"(chance {1 / CLASSES:.2f})")  # fmt: skip
        path = model.saver.save(sess, checkpoint, global_step=model.global_step)
        print(f"checkpoint written: {path} (global_step {sess.run(model.global_step)})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=400, help="training steps (400)")
    parser.add_argument("--every", type=int, default=100, help="steps per progress line (100)")
    parser.add_argument(
        "--checkpoint", default=None, help="checkpoint path (default: in a new temporary directory)"
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="train on a Dask LocalCluster: 2 ps tasks and 1 worker",
    )
    args = parser.parse_args(argv)
    if args.steps < 1 or args.every < 1:
        parser.error("--steps and --every must be positive")
    if not args.cluster:
        return run(args)
    # Imported here, not at the top: the local mode works without the `distributed` extra.
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=3, processes=True, threads_per_worker=1,
                      dashboard_address=None) as cluster:  # fmt: skip
        with Client(cluster, set_as_default=False) as client:
            return run(args, target=client, cluster=True)


if __name__ == "__main__":
    sys.exit(main())
