import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class WordDropout(keras.layers.Layer):
    """Dropout of whole tokens: in training, each token's vector is zeroed with probability `rate`.

    Where ordinary dropout zeroes single features, word dropout removes whole input words: for a
    `[batch, length, features]` input, one keep/drop decision is drawn per `(batch, position)` and applied to all
    the features of that position; kept vectors are scaled by `1 / (1 - rate)`, as with `keras.layers.Dropout`
    and a `noise_shape` of `(batch, length, 1)`. Placed after an embedding it makes the model translate with some
    of its input words missing, a regularizer recommended for low-resource translation (Sennrich and Zhang, 2019,
    who apply it to source and target words). At inference it is the identity. The Keras padding mask passes
    through unchanged, so a dropped word still occupies its position.

    Args:
        rate: float in `[0, 1)`. Fraction of the tokens to drop.
        seed: int, optional. Seed of the layer's random generator, for reproducible masks.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor `[batch, length, features]`.
        training: bool. Drop only when true.

    Example:

    >>> import numpy as np
    >>> out = np.asarray(WordDropout(0.5, seed=0)(np.ones((2, 6, 4), "float32"), training=True))
    >>> sorted({tuple(vector) for vector in out.reshape(-1, 4).tolist()})  # each token all dropped or all kept
    [(0.0, 0.0, 0.0, 0.0), (2.0, 2.0, 2.0, 2.0)]

    References:
        - [Gal and Ghahramani, 2016](https://arxiv.org/abs/1512.05287) (dropping words of the input)
        - [Sennrich and Zhang, 2019](https://aclanthology.org/P19-1021/) (word dropout at low resource)
    """

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not 0 <= rate < 1:
            raise ValueError(f"WordDropout `rate` must be in [0, 1); got {rate}.")
        self.rate = rate
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.supports_masking = True
        self.built = True

    def call(self, inputs, training=False):
        if not training or self.rate == 0:
            return inputs
        shape = ops.shape(inputs)
        draws = keras.random.uniform((shape[0], shape[1], 1), seed=self.seed_generator)
        keep = ops.greater_equal(draws, self.rate)
        scale = ops.cast(1.0 / (1.0 - self.rate), inputs.dtype)
        return ops.where(keep, inputs * scale, ops.zeros_like(inputs))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "seed": self.seed})
        return config
