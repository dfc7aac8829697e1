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

    Args:
        vocab_size: int. Size of the last axis.
        **kwargs: base `keras.layers.Layer` arguments (`trainable=True` trains it).

    Example:

    >>> import numpy as np
    >>> layer = LogitsBias(4)
    >>> layer(np.zeros((1, 2, 4), "float32")).shape
    (1, 2, 4)
    """

    def __init__(self, vocab_size, **kwargs):
        kwargs.setdefault("trainable", False)
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.vocab_size = vocab_size

    def build(self, input_shape=None):
        self.bias = self.add_weight(name="bias", shape=(self.vocab_size,), initializer="zeros")
        self.built = True

    def call(self, logits):
        return keras.ops.cast(logits, "float32") + self.bias

    def compute_mask(self, inputs, mask=None):
        return None

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size}
