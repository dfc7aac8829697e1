import math

import keras
import numpy as np
from keras import ops

from keras_transformer.layers.masking import is_per_row

POSITION_TYPES = ("sinusoidal", "sinusoidal_concat", "sinusoidal_fairseq", "learned", "none")
# fairseq (M2M-100, NLLB) numbers positions from padding_idx + 1 = 2: our position 0 is its row 2.
FAIRSEQ_POSITION_OFFSET = 2


def sinusoidal_encoding(positions, d_model, max_wavelength=10000.0, concat=False, fairseq=False):
    """The paper's fixed encoding, `[T] -> [T, d_model]`.

    Frequency `i` is `1 / max_wavelength ** (2i / d_model)`. By default its `sin` and `cos` interleave (even and odd
    features); `concat=True` puts all the sines first and the cosines after them, the layout of Marian (OPUS-MT)
    and tensor2tensor checkpoints. `fairseq=True` is fairseq's table (M2M-100, NLLB-200): sines then cosines, with
    frequency `i` of `h = d_model // 2` being `1 / max_wavelength ** (i / (h - 1))`, a zero feature last when
    `d_model` is odd, and positions counted from `FAIRSEQ_POSITION_OFFSET`.
    """
    positions = ops.cast(positions, "float32")
    if fairseq:
        half = d_model // 2
        inv_freq = ops.exp(-math.log(max_wavelength) * ops.arange(half, dtype="float32") / float(max(half - 1, 1)))
        angles = ops.einsum("t,f->tf", positions + float(FAIRSEQ_POSITION_OFFSET), inv_freq)
        encoding = ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1)
        return encoding if d_model % 2 == 0 else ops.pad(encoding, [[0, 0], [0, 1]])
    dims = ops.arange(0, d_model, 2, dtype="float32")
    inv_freq = ops.exp(-math.log(max_wavelength) * dims / float(d_model))
    angles = ops.einsum("t,f->tf", positions, inv_freq)  # [T, ceil(d/2)]
    if concat:
        return ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1)[:, :d_model]
    encoding = ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1)
    encoding = ops.reshape(encoding, (-1, 2 * ops.shape(inv_freq)[0]))
    return encoding[:, :d_model]


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionalEmbedding(keras.layers.Layer):
    """Token embedding scaled by `sqrt(d_model)`, plus a position encoding, with a padding mask.

    Id 0 is padding: the layer produces a Keras mask (`True` on real tokens), which the encoder
    and decoder blocks of this package honour. With `position="sinusoidal"` (the paper's default)
    the encoding is computed for any length, so a model can read sequences longer than it saw in
    training (`"sinusoidal_concat"`: the same frequencies, all sines before all cosines, as Marian and
    tensor2tensor lay them out; `"sinusoidal_fairseq"`: fairseq's table, as M2M-100 and NLLB-200 have it);
    `"learned"` uses a trainable table of `max_length` positions; `"none"` adds nothing
    (use it with rotary attention).

    Called with `reverse=True` on a `[batch, length, d_model]` tensor, the layer multiplies by
    the transposed embedding matrix and returns float32 logits over the vocabulary: this is how
    a model ties its output projection to its target embedding.

    Args:
        vocab_size: int. Number of token ids.
        d_model: int. Embedding size.
        max_length: int. Longest sequence for `"learned"` positions (and a documented limit
            for the others).
        position: str. `"sinusoidal"`, `"sinusoidal_concat"`, `"sinusoidal_fairseq"`, `"learned"` or `"none"`.
        scale: bool. Multiply token embeddings by `sqrt(d_model)` as the paper does.
        mask_zero: bool. Produce a padding mask for id 0.
        embeddings_initializer: initializer for the token embedding.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        inputs: int ids `[batch, length]`, or with `reverse=True` floats `[batch, length, d_model]`.
        start_index: int or scalar int tensor, the position of the first token (for cached decoding); or an int
            `[batch]` tensor, one first position per row (rows decoding at different depths).
        reverse: bool. Project features back to vocabulary logits with the embedding matrix.

    Example:

    >>> import numpy as np
    >>> emb = PositionalEmbedding(vocab_size=100, d_model=16, max_length=32)
    >>> ids = np.array([[5, 7, 9, 0, 0]])
    >>> tuple(emb(ids).shape)
    (1, 5, 16)
    >>> np.asarray(emb.compute_mask(ids)).tolist()
    [[True, True, True, False, False]]

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), sections 3.4 and 3.5.
    """

    def __init__(
        self,
        vocab_size,
        d_model,
        max_length=512,
        position="sinusoidal",
        scale=True,
        mask_zero=True,
        embeddings_initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if position not in POSITION_TYPES:
            raise ValueError(f"`position` must be one of {POSITION_TYPES}; got {position!r}.")
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.max_length = max_length
        self.position = position
        self.scale = scale
        self.mask_zero = mask_zero
        if embeddings_initializer is None:
            embeddings_initializer = keras.initializers.RandomNormal(stddev=d_model**-0.5)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.supports_masking = mask_zero

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocab_size, self.d_model),
            initializer=self.embeddings_initializer,
        )
        if self.position == "learned":
            self.position_embeddings = self.add_weight(
                name="position_embeddings",
                shape=(self.max_length, self.d_model),
                initializer=keras.initializers.RandomNormal(stddev=0.02),
            )
        self.built = True

    def embedding_matrix(self):
        """The token embedding table `[vocab_size, d_model]`, in float (dequantized after `quantize("int8")`)."""
        if self.quantization_mode == "int8":
            return ops.cast(self.embeddings, self.compute_dtype) * ops.cast(self.embeddings_scale, self.compute_dtype)[
                :, None]
        return self.embeddings

    def quantize(self, mode=None, type_check=True, config=None):
        """`"int8"`: the token table becomes int8 with one float scale per row (symmetric, absolute maximum), as
        Keras' `Embedding` quantizes; the tied output projection multiplies by the dequantized table."""
        if mode != "int8":
            raise self._quantization_mode_error(mode)
        table = ops.convert_to_numpy(ops.cast(self.embeddings, "float32"))
        scale = np.maximum(np.abs(table).max(axis=1), 1e-12) / 127.0
        del self.embeddings
        self.embeddings = self.add_weight(name="embeddings", shape=table.shape, initializer="zeros", dtype="int8",
                                          trainable=False)
        self.embeddings_scale = self.add_weight(name="embeddings_scale", shape=(table.shape[0],), initializer="ones",
                                                trainable=False)
        self.embeddings.assign(np.clip(np.round(table / scale[:, None]), -127, 127).astype("int8"))
        self.embeddings_scale.assign(scale.astype("float32"))
        self._is_quantized = True
        self.dtype_policy = keras.dtype_policies.get(f"int8_from_{self.dtype_policy.name}")

    def _int8_call(self, *args, **kwargs):
        return self.call(*args, **kwargs)

    def call(self, inputs, start_index=0, reverse=False):
        if reverse:
            kernel = ops.cast(self.embedding_matrix(), "float32")
            return ops.matmul(ops.cast(inputs, "float32"), ops.transpose(kernel))
        ids = ops.cast(inputs, "int32")
        if self.quantization_mode == "int8":
            x = ops.cast(ops.take(self.embeddings, ids, axis=0), self.compute_dtype) * ops.cast(
                ops.take(self.embeddings_scale, ids, axis=0), self.compute_dtype)[..., None]
        else:
            x = ops.take(self.embeddings, ids, axis=0)
        if self.scale:
            x = x * ops.cast(math.sqrt(self.d_model), x.dtype)
        if self.position != "none":
            length = ops.shape(ids)[1]
            static_length = ids.shape[1]
            if self.position == "learned" and static_length is not None and static_length > self.max_length:
                raise ValueError(
                    f"Sequence length {static_length} exceeds max_length={self.max_length} of the "
                    "learned position table; truncate inputs or use position='sinusoidal'."
                )
            x = x + ops.cast(self._position_encoding(length, start_index), x.dtype)
        return x

    def _position_encoding(self, length, start_index):
        """`[1, T, d]` for one start position, `[B, T, d]` for an int `[B]` of them (one per row)."""
        positions = ops.arange(length, dtype="int32")
        per_row = is_per_row(start_index)
        if per_row:
            rows = ops.expand_dims(ops.cast(start_index, "int32"), 1) + ops.expand_dims(positions, 0)
            positions = ops.reshape(rows, (-1,))
        else:
            positions = positions + ops.cast(start_index, "int32")
        if self.position.startswith("sinusoidal"):
            pos = sinusoidal_encoding(positions, self.d_model, concat=self.position == "sinusoidal_concat",
                                      fairseq=self.position == "sinusoidal_fairseq")
        else:
            pos = ops.take(self.position_embeddings, positions, axis=0)
        return ops.reshape(pos, (-1, length, self.d_model)) if per_row else pos[None]

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero or len(inputs.shape) != 2:
            return None
        return ops.not_equal(inputs, 0)

    def compute_output_shape(self, input_shape):
        if len(input_shape) == 3:
            return tuple(input_shape[:-1]) + (self.vocab_size,)
        return tuple(input_shape) + (self.d_model,)

    def compute_output_spec(self, inputs, start_index=0, reverse=False):
        if reverse:
            return keras.KerasTensor(tuple(inputs.shape[:-1]) + (self.vocab_size,), dtype="float32")
        return keras.KerasTensor(tuple(inputs.shape) + (self.d_model,), dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "d_model": self.d_model,
                "max_length": self.max_length,
                "position": self.position,
                "scale": self.scale,
                "mask_zero": self.mask_zero,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config
