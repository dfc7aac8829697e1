import keras


@keras.saving.register_keras_serializable(package="keras_transformer")
class OutputProjection(keras.layers.Dense):
    """Dense projection to vocabulary logits that ends the Keras mask (the loss masks by label)."""

    def compute_mask(self, inputs, mask=None):
        return None

    def quantize(self, mode=None, type_check=True, config=None):
        """Keras' `Dense` quantization (which refuses subclasses unless asked not to check the type)."""
        return super().quantize(mode, type_check=False, config=config)


@keras.saving.register_keras_serializable(package="keras_transformer")
class LogitsBias(keras.layers.Layer):
    """Adds a `[vocab]` bias to float32 logits: the bias of an output projection tied to the target embedding.

    Marian (OPUS-MT) checkpoints keep one (`final_logits_bias`) beside their tied projection. It is not trained
    (`trainable=False` by default), as in the checkpoints' own framework, where it is a buffer.

    `start_logit_from_padding=ID` also replaces the logit at id `ID` (the decoder's start token) by the padding
    id's (0). An imported model whose decoder starts from a token that also ends sentences (M2M-100 and NLLB start
    from `</s>`) has a start row that copies the end token's; with this, the logits at every id but 0 are the
    checkpoint's own logits (its padding logit included), so a softmax over them is the checkpoint's.

    Args:
        vocab_size: int. Size of the last axis.
        start_logit_from_padding: int or `None`. The id whose logit becomes the padding id's.
        **kwargs: base `keras.layers.Layer` arguments (`trainable=True` trains it).

    Example:

    >>> import numpy as np
    >>> layer = LogitsBias(4)
    >>> layer(np.zeros((1, 2, 4), "float32")).shape
    (1, 2, 4)
    """

    def __init__(self, vocab_size, start_logit_from_padding=None, **kwargs):
        kwargs.setdefault("trainable", False)
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.start_logit_from_padding = start_logit_from_padding

    def build(self, input_shape=None):
        self.bias = self.add_weight(name="bias", shape=(self.vocab_size,), initializer="zeros")
        self.built = True

    def call(self, logits):
        logits = keras.ops.cast(logits, "float32") + self.bias
        if self.start_logit_from_padding is None:
            return logits
        start = keras.ops.equal(keras.ops.arange(self.vocab_size, dtype="int32"), self.start_logit_from_padding)
        return keras.ops.where(start, logits[..., :1], logits)

    def compute_mask(self, inputs, mask=None):
        return None

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "start_logit_from_padding": self.start_logit_from_padding}
