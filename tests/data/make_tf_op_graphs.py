"""Writes the TensorFlow-made graphs of every interop case (tests/_interop_cases.py), one file
per op family, with TensorFlow's results, so that tests/test_interop_ops.py checks, without TF,
that minigraph imports and runs what TF writes:

- tf_ops_<family>.pb: the binary GraphDef (serialized deterministically) of a TF graph holding
  every case of the family, each built with TF's own API (`tf.raw_ops.<Op>`, `tf.constant`,
  `tf.compat.v1.placeholder`) under the name scope `case.name`.
- tf_ops_<family>.npz: the inputs fed and TF's outputs, by tensor name (`Cast_float32_to_int8/x:0`,
  `Cast_float32_to_int8/op:0`), stored compactly (`_interop_cases.pack`: one pool per dtype,
  bfloat16 as its bits, strings as bytes and lengths; no pickle), and for the cases TF refuses
  to run, `error_cases`, `error_classes` and `error_messages` (TF's error, UTF-8).

Each case runs on its own, on TF's CPU: `Session.run` of its setup (variables' initial values),
of its fetches with its feeds, then of what it reads after (variables' values).
Run it only where TensorFlow 2.21 is installed (never a minigraph dependency), after
make_tf_op_defs.py (the table reads tf_cpu_kernels.txt), from anywhere:

    python tests/data/make_tf_op_graphs.py [FAMILY ...]
"""

from __future__ import annotations

import os
import re
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path[:0] = [TESTS, os.path.dirname(TESTS)]  # _interop_cases, and the checkout's minigraph

import _interop_cases as cases  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1


def _message(text: str) -> str:
    """TF's error message without the traceback of where the node was built (paths of the
    machine that ran this script) and without the trailing node reference."""
    text = re.split(r"\nNode: '[^']*'\n", text)[-1]
    return text.split("\n\t [[")[0].strip()


def write_family(family: str) -> tuple[int, int]:
    """Writes tf_ops_<family>.pb/.npz; returns the number of cases and of TF errors."""
    chosen = [c for c in cases.CASES if c.family == family]
    graph = tf.Graph()
    plans = []
    with graph.as_default():
        for case in chosen:
            plans.append((case, cases.build_tf(case, tf, graph)))
    graph_def = graph.as_graph_def()
    with open(os.path.join(HERE, f"tf_ops_{family}.pb"), "wb") as f:
        f.write(graph_def.SerializeToString(deterministic=True))
    records: list[tuple[str, np.ndarray]] = []
    errors: list[tuple[str, str, str]] = []
    config = tf1.ConfigProto(device_count={"GPU": 0})
    with tf1.Session(graph=graph, config=config) as session:
        for case, plan in plans:
            records += [(name, np.asarray(value)) for name, value in plan.feeds.items()]
            if plan.setup:
                session.run(plan.setup)
            try:
                values = session.run(plan.fetches, plan.feeds)
            except tf.errors.OpError as e:
                errors.append((case.name, type(e).__name__, _message(e.message)))
                if case.error is None:
                    print(f"{case.id}: TF raised {errors[-1][1]}: {errors[-1][2]}")
                values = [None] * len(plan.fetches)
            if plan.after:
                values += session.run(plan.after)
            fetched = plan.fetches + plan.after
            records += [(n, np.asarray(v)) for n, v in zip(fetched, values) if v is not None]
    arrays = cases.pack(records)
    arrays["error_cases"] = np.array([e[0].encode() for e in errors], dtype="S")
    arrays["error_classes"] = np.array([e[1].encode() for e in errors], dtype="S")
    arrays["error_messages"] = np.array([e[2].encode("utf-8") for e in errors], dtype="S")
    np.savez_compressed(os.path.join(HERE, f"tf_ops_{family}.npz"), **arrays)
    return len(chosen), len(errors)


def main(argv: list[str] | None = None) -> int:
    names = list(sys.argv[1:] if argv is None else argv) or list(cases.FAMILIES)
    unknown = [n for n in names if n not in cases.FAMILIES]
    if unknown:
        print(f"unknown families {unknown}; choose from {list(cases.FAMILIES)}", file=sys.stderr)
        return 2
    if not tf.__version__.startswith("2.21"):
        print(f"warning: the committed files were made with TF 2.21; this is {tf.__version__}")
    tf1.disable_eager_execution()
    for name in names:
        count, failed = write_family(name)
        print(f"tf_ops_{name}: {count} cases, {failed} TF errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
