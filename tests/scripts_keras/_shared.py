"""What several of the Keras test scripts share (they import it by name: a script's
own folder is first on ``sys.path``): a ``train_step`` of the user's own, and a
monitor's events kept as they are emitted."""

import tensorflow as tf
from keras import Model


class OwnStep(Model):
    """A custom ``train_step`` as Keras's guide writes one: no loss tracker update."""

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            loss = self.compute_loss(x=x, y=y, y_pred=self(x, training=True))
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables, strict=True))
        return {"loss": loss}


def watched(monitor) -> list:
    """The list the monitor's events go to as well, from now on."""
    events: list = []
    emit = monitor._emit

    def keep(event):
        events.append(event)
        emit(event)

    monitor._emit = keep
    return events
