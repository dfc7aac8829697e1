"""Metrics for sequence-to-sequence training."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedAccuracy(keras.metrics.Metric):
    """Token accuracy of `argmax(logits)` against the labels, ignoring padding positions.

    Args:
        pad_id: label id of padding positions, which are not counted.
        name: name of the metric.
        dtype: dtype of the metric's variables.

    Example:

    >>> import numpy as np
    >>> metric = MaskedAccuracy()
    >>> labels = np.array([[1, 2, 0]])
    >>> logits = np.array([[[0, 9, 0], [9, 0, 0], [0, 0, 9]]], "float32")
    >>> metric.update_state(labels, logits)
    >>> float(metric.result())  # one of the two real tokens is right; the padding is ignored
    0.5
    """

    def __init__(self, pad_id=0, name="masked_accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype or "float32")
        self.pad_id = int(pad_id)
        self.correct = self.add_variable(shape=(), initializer="zeros", name="correct", dtype=self.dtype)
        self.count = self.add_variable(shape=(), initializer="zeros", name="count", dtype=self.dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = ops.cast(y_true, "int32")
        predictions = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        weights = ops.cast(ops.not_equal(labels, self.pad_id), self.dtype)
        if sample_weight is not None:
            sample_weight = ops.cast(sample_weight, self.dtype)
            while len(sample_weight.shape) < len(weights.shape):
                sample_weight = ops.expand_dims(sample_weight, -1)
            weights = weights * sample_weight
        matches = ops.cast(ops.equal(labels, predictions), self.dtype) * weights
        self.correct.assign_add(ops.sum(matches))
        self.count.assign_add(ops.sum(weights))

    def result(self):
        return ops.divide_no_nan(self.correct, self.count)

    def reset_state(self):
        self.correct.assign(ops.zeros((), self.dtype))
        self.count.assign(ops.zeros((), self.dtype))

    def get_config(self):
        return {"pad_id": self.pad_id, "name": self.name, "dtype": self.dtype}
