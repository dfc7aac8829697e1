import keras
from keras import ops

from keras_transformer.layers.hash_dropout import HashDropout


@keras.saving.register_keras_serializable(package="keras_transformer")
class WordDropout(HashDropout):
    """Dropout of whole tokens: in training, each token's vector is zeroed with probability `rate`.

    Where ordinary dropout zeroes single features, word dropout removes whole input words: for a
    `[batch, length, features]` input, one keep/drop decision is drawn per `(batch, position)` and applied to all
    the features of that position; kept vectors are scaled by `1 / (1 - rate)`, as with `keras.layers.Dropout`
    and a `noise_shape` of `(batch, length, 1)`. The decisions are `HashDropout`'s (hashed bits, cheap under
    XLA), drawn for one value per token. Placed after an embedding it makes the model translate with some
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

    def call(self, inputs, training=False):
        if not training or self.rate == 0:
            return inputs
        shape = ops.shape(inputs)
        # HashDropout's mask (0 or 1 / (1 - rate)) drawn for one feature per token, broadcast over the features.
        token_scale = super().call(ops.ones((shape[0], shape[1], 1), dtype=inputs.dtype), training=True)
        return inputs * token_scale
