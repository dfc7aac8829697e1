"""Loss for sequence-to-sequence training: masked, label-smoothed sparse cross-entropy from logits."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Sparse categorical cross-entropy from logits that ignores padding and smooths labels.

    The loss of a batch is the mean over its real (non-padding) target tokens, whatever the padding and whether
    or not the logits carry a Keras mask. With label smoothing `eps`, the target distribution is
    `(1 - eps) * one_hot(label) + eps / vocab_size` (the smoothing mass spread uniformly over the whole
    vocabulary, as in Szegedy et al. and the Transformer paper), computed without materializing one-hot targets.

    Args:
        label_smoothing: `eps` in `[0, 1)`.
        pad_id: label id of padding positions, which get no loss.
        rdrop: weight `alpha` of R-Drop's consistency term (Liang et al., 2021); 0 (default) turns it off. With
            `rdrop > 0` the batch must hold every example twice, row `i + n` repeating row `i` of a `2n`-row batch
            (`keras_transformer.data.pipeline.duplicate_rows`): dropout gives the copies different predictions
            `p` and `q`, and each token's loss gains `alpha / 2 * KL(p || q)` on one copy and `alpha / 2 * KL(q || p)`
            on the other, so a pair adds `alpha` times their mean symmetric KL divergence to the two
            cross-entropies, as in the paper. At inference (no dropout) the copies agree and the term is 0.
        name: name of the loss.
        reduction: `"mean_with_sample_weight"` (default) averages over real tokens (weighted by `sample_weight`
            when given); `"sum"` sums over real tokens; `None`/`"none"` returns the per-token losses `[B, T]`
            with 0 at padding.
        dtype: dtype of the loss computation; defaults to float32 whatever the model's compute dtype.

    Example:

    >>> import numpy as np
    >>> loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.0)
    >>> labels = np.array([[3, 1, 0]])  # the last position is padding
    >>> logits = np.zeros((1, 3, 5), "float32")
    >>> round(float(loss(labels, logits)), 4)  # log(5)
    1.6094

    References:
        Vaswani et al., 2017, "Attention Is All You Need", section 5.4 (https://arxiv.org/abs/1706.03762);
        Szegedy et al., 2016, "Rethinking the Inception Architecture" (https://arxiv.org/abs/1512.00567);
        Liang et al., 2021, "R-Drop: Regularized Dropout for Neural Networks" (https://arxiv.org/abs/2106.14448).
    """

    def __init__(
        self,
        label_smoothing=0.1,
        pad_id=0,
        name="masked_sparse_categorical_crossentropy",
        reduction="mean_with_sample_weight",
        dtype=None,
        rdrop=0.0,
    ):
        if not 0.0 <= float(label_smoothing) < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        if not 0.0 <= float(rdrop) < float("inf"):
            raise ValueError(f"rdrop must be a finite number >= 0, got {rdrop}")
        super().__init__(name=name, reduction=reduction, dtype=dtype or "float32")
        self.label_smoothing = float(label_smoothing)
        self.pad_id = int(pad_id)
        self.rdrop = float(rdrop)

    def __call__(self, y_true, y_pred, sample_weight=None):
        # The padding mask enters as a sample weight; "mean_with_sample_weight" then divides by the number of real
        # tokens. A Keras mask on the logits, if any, is multiplied in by the base class and changes nothing,
        # since it marks the same positions.
        weights = ops.cast(ops.not_equal(ops.convert_to_tensor(y_true), self.pad_id), self.dtype)
        if sample_weight is not None:
            sample_weight = ops.cast(sample_weight, self.dtype)
            while len(sample_weight.shape) < len(weights.shape):
                sample_weight = ops.expand_dims(sample_weight, -1)
            weights = weights * sample_weight
        return super().__call__(y_true, y_pred, sample_weight=weights)

    def call(self, y_true, y_pred):
        labels = ops.cast(y_true, "int32")
        log_probs = ops.log_softmax(ops.cast(y_pred, self.dtype), axis=-1)
        true_log_probs = ops.squeeze(ops.take_along_axis(log_probs, ops.expand_dims(labels, -1), axis=-1), -1)
        losses = -(1.0 - self.label_smoothing) * true_log_probs
        if self.label_smoothing:
            losses = losses - self.label_smoothing * ops.mean(log_probs, axis=-1)
        if self.rdrop:
            rows = log_probs.shape[0]
            if rows is not None and rows % 2:
                raise ValueError(f"rdrop = {self.rdrop} needs each example twice in the batch (rows i and i + n; "
                                 f"keras_transformer.data.pipeline.duplicate_rows), but the batch has {rows} rows")
            first, second = ops.split(log_probs, 2, axis=0)
            partner = ops.concatenate([second, first], axis=0)  # row i's copy, for every row
            kl = ops.sum(ops.exp(log_probs) * (log_probs - partner), axis=-1)
            losses = losses + 0.5 * self.rdrop * kl
        return ops.where(ops.not_equal(labels, self.pad_id), losses, ops.zeros_like(losses))

    def get_config(self):
        config = super().get_config()
        config.update({"label_smoothing": self.label_smoothing, "pad_id": self.pad_id, "rdrop": self.rdrop})
        return config
