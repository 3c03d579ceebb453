"""Training, as TF 1.x's `tf.compat.v1.train`: optimizers over resource variables and checkpoints
of a session's variables (`Saver`).

train_op = minigraph.train.AdagradOptimizer(0.1).minimize(loss)
saver = minigraph.train.Saver()
saver.save(sess, "model.ckpt")
saver.restore(sess, "model.ckpt")
"""

from minigraph.train.optimizer import (
    TRAIN_OP,
    AdagradOptimizer,
    AdamOptimizer,
    GradientDescentOptimizer,
    MomentumOptimizer,
    Optimizer,
)
from minigraph.train.saver import Saver, list_variables, load_checkpoint

__all__ = [
    "Saver",
    "load_checkpoint",
    "list_variables",
    "Optimizer",
    "GradientDescentOptimizer",
    "MomentumOptimizer",
    "AdagradOptimizer",
    "AdamOptimizer",
    "TRAIN_OP",
]
