import keras
from keras import ops

from keras_transformer.layers.masking import is_per_row


@keras.saving.register_keras_serializable(package="keras_transformer")
class RotaryEmbedding(keras.layers.Layer):
    """Rotary position embedding (RoPE) applied to per-head query or key projections.

    Rotates each pair of feature dimensions by an angle proportional to the token's position, so
    that the dot product of a rotated query and key depends only on their relative offset. Used by
    `MultiHeadAttention(use_rotary=True)`; it has no weights.

    Args:
        max_wavelength: int. The longest wavelength of the rotation frequencies.

    Call arguments:
        inputs: float tensor `[batch, length, num_heads, head_dim]` (`head_dim` even).
        start_index: int or scalar int tensor. Absolute position of `inputs[:, 0]` (used when
            decoding one token at a time with a cache); or an int `[batch]` tensor, one per row.

    Example:

    >>> import numpy as np
    >>> rope = RotaryEmbedding()
    >>> tuple(rope(np.ones((2, 5, 4, 8), "float32")).shape)
    (2, 5, 4, 8)

    References:
        - [Su et al., 2021](https://arxiv.org/abs/2104.09864)
    """

    def __init__(self, max_wavelength=10000, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = max_wavelength
        self.supports_masking = True

    def call(self, inputs, start_index=0):
        head_dim = inputs.shape[-1]
        if head_dim is None or head_dim % 2:
            raise ValueError(
                f"RotaryEmbedding needs an even, known head dimension; got {head_dim}."
            )
        length = ops.shape(inputs)[1]
        inv_freq = 1.0 / (
            self.max_wavelength
            ** (ops.arange(0, head_dim, 2, dtype="float32") / float(head_dim))
        )
        if is_per_row(start_index):  # one first position per row: [B, T, D/2]
            positions = ops.expand_dims(ops.cast(start_index, "int32"), 1) + ops.arange(length, dtype="int32")[None]
            angles = ops.einsum("bt,f->btf", ops.cast(positions, "float32"), inv_freq)
            angles = ops.concatenate([angles, angles], axis=-1)[:, :, None, :]
        else:
            positions = ops.cast(ops.arange(length) + start_index, "float32")
            angles = ops.einsum("t,f->tf", positions, inv_freq)  # [T, D/2]
            angles = ops.concatenate([angles, angles], axis=-1)[None, :, None, :]
        cos = ops.cast(ops.cos(angles), inputs.dtype)
        sin = ops.cast(ops.sin(angles), inputs.dtype)
        half = head_dim // 2
        rotated = ops.concatenate([-inputs[..., half:], inputs[..., :half]], axis=-1)
        return inputs * cos + rotated * sin

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength})
        return config
