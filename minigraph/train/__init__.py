"""Training: checkpoints of a session's variables (`Saver`), as TF 1.x's `tf.compat.v1.train`.

saver = minigraph.train.Saver()
saver.save(sess, "model.ckpt")
saver.restore(sess, "model.ckpt")
"""

from minigraph.train.saver import Saver, list_variables, load_checkpoint

__all__ = ["Saver", "load_checkpoint", "list_variables"]
