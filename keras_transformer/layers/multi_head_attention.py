import math

import keras
from keras import ops

from keras_transformer.layers.hash_dropout import HashDropout
from keras_transformer.layers.masking import is_per_row
from keras_transformer.layers.masking import masked_fill_value
from keras_transformer.layers.masking import merge_attention_masks
from keras_transformer.layers.rotary_embedding import RotaryEmbedding


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head scaled dot-product attention, with masks and a key/value cache.

    Projects queries, keys and values into `num_heads` heads, computes per head
    `softmax(Q K^T / sqrt(key_dim)) V`, concatenates the heads and projects the result back to
    the query's feature size (or `output_dim`). The softmax is computed in float32, and masked
    logits take a value that stays finite in float16, so mixed precision is safe.

    Where its semantics allow (no attention weights returned, no attention dropout in this call, keys and values
    computed in the call rather than read from a cache), the attention runs through
    `keras.ops.dot_product_attention`: the backend's fused kernel (cuDNN or flash attention on GPUs, PyTorch's
    `scaled_dot_product_attention`), which never writes the `[batch, heads, query, key]` weights to memory. The
    explicit softmax path serves the other calls (and every call with `fused_attention=False`); both give the
    same outputs to float rounding.

    Masks are booleans, `True` meaning "may attend". Keras masks on `query` and `value` (for
    example from `PositionalEmbedding`) are honoured, and merged with `attention_mask` and the
    causal mask in one place.

    The cache makes incremental decoding cheap. It is a pair `(keys, values)` of
    `[batch, num_heads, cache_length, key_dim]` tensors, heads before positions: the layout the per-head attention
    matmuls read, so a decoding step copies no cache (one tensor `[batch, 2, num_heads, cache_length, key_dim]`,
    keys at index 0 and values at index 1 of axis 1, is also accepted, and returned in the same form):
    - with `cache_index` (self-attention while decoding): the keys/values of `query`'s new
      positions are written into the cache at `cache_index`, and the query attends to every
      cached position up to its own (the causal mask is offset by `cache_index`);
    - without `cache_index` (cross-attention): the cache holds precomputed keys/values of the
      encoder output (`compute_cache(value)`), and `value`/`key` are not used.
    The cache has a fixed size, so decoding loops keep static shapes (XLA, SavedModel, TFLite).

    Args:
        num_heads: int. Number of attention heads.
        key_dim: int. Size of each head's query and key projection.
        value_dim: int. Size of each head's value projection. Defaults to `key_dim`.
        dropout: float. Dropout rate on the attention weights.
        use_bias: bool. Whether the query/key/value and output projections have a bias.
        output_dim: int. Output feature size. Defaults to the query's last dimension.
        use_rotary: bool. Apply rotary position embeddings (RoPE) to queries and keys.
        rotary_max_wavelength: int. Longest RoPE wavelength.
        kernel_initializer: initializer for the projection kernels.
        bias_initializer: initializer for the projection biases.
        fused_attention: bool. Use `keras.ops.dot_product_attention` where it applies (see above).
        flash_attention: `None` (the backend decides), `True` or `False`: passed to
            `keras.ops.dot_product_attention` (`keras.config.enable_flash_attention()` also turns it on).
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `[batch, query_length, dim]`.
        value: `[batch, value_length, dim]`; may be `None` when a cross-attention cache is given.
        key: `[batch, value_length, dim]`; defaults to `value`.
        attention_mask: boolean `[batch, query_length, value_length]`.
        use_causal_mask: bool. Block attention from each position to later positions.
        cache: `(keys, values)`, each `[batch, num_heads, cache_length, key_dim]`, or one stacked
            `[batch, 2, num_heads, cache_length, key_dim]` tensor (see above).
        cache_index: int or scalar int tensor, where the new positions go in the cache; or an int `[batch]`
            tensor, one position per row (one query position per call), for rows decoding at different depths.
        return_attention_scores: bool. Also return the attention weights
            `[batch, num_heads, query_length, value_length]`.
        training: bool. Dropout is active only in training.

    Returns:
        `output`, then `attention_scores` if requested, then the updated `cache` if one was given.

    Example:

    >>> import numpy as np
    >>> mha = MultiHeadAttention(num_heads=2, key_dim=4)
    >>> x = np.random.rand(3, 5, 8).astype("float32")
    >>> tuple(mha(x, x, use_causal_mask=True).shape)
    (3, 5, 8)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.2.
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        output_dim=None,
        use_rotary=False,
        rotary_max_wavelength=10000,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        fused_attention=True,
        flash_attention=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim or key_dim
        self.dropout = dropout
        self.use_bias = use_bias
        self.output_dim = output_dim
        self.use_rotary = use_rotary
        self.rotary_max_wavelength = rotary_max_wavelength
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.fused_attention = bool(fused_attention)
        self.flash_attention = flash_attention
        self._scale = 1.0 / math.sqrt(float(key_dim))

    def _projection(self, name, units, input_dim):
        # 2-D kernels ([dim, heads * head_dim]) and a reshape, rather than 3-D einsum kernels: one plain
        # matmul per projection, which XLA on CPU compiles far better (measured in benchmarks/decode.py).
        layer = keras.layers.Dense(
            units,
            use_bias=self.use_bias,
            kernel_initializer=keras.initializers.get(
                keras.initializers.serialize(self.kernel_initializer)
            ),
            bias_initializer=keras.initializers.get(
                keras.initializers.serialize(self.bias_initializer)
            ),
            dtype=self.dtype_policy,
            name=name,
        )
        layer.build((None, None, input_dim))
        return layer

    def build(self, query_shape, value_shape=None, key_shape=None):
        query_dim = query_shape[-1]
        value_dim_in = value_shape[-1] if value_shape is not None else query_dim
        key_dim_in = key_shape[-1] if key_shape is not None else value_dim_in
        output_dim = self.output_dim or query_dim
        h, dk, dv = self.num_heads, self.key_dim, self.value_dim
        self.query_dense = self._projection("query", h * dk, query_dim)
        self.key_dense = self._projection("key", h * dk, key_dim_in)
        self.value_dense = self._projection("value", h * dv, value_dim_in)
        self.output_dense = self._projection("output", output_dim, h * dv)
        self.dropout_layer = HashDropout(self.dropout, dtype=self.dtype_policy)
        self.rotary = (
            RotaryEmbedding(self.rotary_max_wavelength, dtype=self.dtype_policy)
            if self.use_rotary
            else None
        )
        self.built = True

    def _split_heads(self, x, head_dim):
        """`[B, T, heads * head_dim]` -> `[B, T, heads, head_dim]`."""
        shape = ops.shape(x)
        return ops.reshape(x, (shape[0], shape[1], self.num_heads, head_dim))

    def project_query(self, query):
        return self._split_heads(self.query_dense(query), self.key_dim)

    def project_key(self, key):
        return self._split_heads(self.key_dense(key), self.key_dim)

    def project_value(self, value):
        return self._split_heads(self.value_dense(value), self.value_dim)

    def compute_cache(self, value, key=None, separate=True):
        """Project `value`/`key` once into a cache: `(keys, values)`, each `[batch, heads, length, key_dim]`, or
        with `separate=False` one stacked `[batch, 2, heads, length, key_dim]` tensor."""
        key = value if key is None else key
        k = self.project_key(key)
        v = self.project_value(value)
        if self.rotary is not None:
            k = self.rotary(k)
        k, v = _heads_first(k), _heads_first(v)
        return (k, v) if separate else ops.stack([k, v], axis=1)

    def call(self, query, value=None, key=None, query_mask=None, value_mask=None, key_mask=None, attention_mask=None,
             use_causal_mask=False, cache=None, cache_index=None, return_attention_scores=False, training=None):
        if value is None and cache is None:
            raise ValueError("MultiHeadAttention needs `value` unless a cross-attention `cache` is given.")
        if cache is not None and cache_index is None and use_causal_mask:
            raise ValueError(
                "`use_causal_mask=True` with a precomputed cache needs `cache_index` "
                "(the position of the first query)."
            )
        q = self.project_query(query)
        query_offset = 0 if cache_index is None else cache_index
        if self.rotary is not None:
            q = self.rotary(q, start_index=query_offset)

        # The fused kernel reads keys and values as [B, T, heads, d]; a cache holds them heads first.
        fused = (self.fused_attention and cache is None and not return_attention_scores
                 and not (training and self.dropout > 0))
        if cache is None:
            key = value if key is None else key
            k = self.project_key(key)
            v = self.project_value(value)
            if self.rotary is not None:
                k = self.rotary(k)
            if not fused:
                k, v = _heads_first(k), _heads_first(v)
            key_padding = value_mask if key_mask is None else key_mask
        elif cache_index is None:
            k, v = _cache_pair(cache)
            key_padding = value_mask
        else:
            k, v, cache = self._extend_cache(cache, cache_index, value if key is None else key, value)
            key_padding = None  # decoding positions are never padding

        mask = merge_attention_masks(
            batch_size=ops.shape(q)[0],
            query_length=ops.shape(q)[1],
            key_length=ops.shape(k)[1 if fused else 2],
            query_mask=query_mask,
            key_mask=key_padding,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask or (cache is not None and cache_index is not None),
            query_offset=query_offset,
        )
        if fused:
            output, scores = self._attend_fused(q, k, v, mask), None
        else:
            output, scores = self._attend(q, k, v, mask, training)
        results = [output]
        if return_attention_scores:
            results.append(scores)
        if cache is not None:
            results.append(cache)
        return results[0] if len(results) == 1 else tuple(results)

    def _extend_cache(self, cache, cache_index, key, value):
        """`(keys, values, cache)`: the projected `key`/`value` positions written into the self-attention `cache`
        at `cache_index` (one index, or one per row), and the whole keys and values to attend to."""
        if self.value_dim != self.key_dim:
            raise ValueError("A key/value cache needs `value_dim == key_dim`.")
        new_k = self.project_key(key)
        new_v = self.project_value(value)
        if self.rotary is not None:
            new_k = self.rotary(new_k, start_index=cache_index)
        zero = ops.zeros((), dtype="int32")
        index = ops.cast(cache_index, "int32")
        if is_per_row(cache_index):
            cache = self._write_per_row(cache, new_k, new_v, index)
            k, v = _cache_pair(cache)
        elif isinstance(cache, (tuple, list)):
            start = (zero, zero, index, zero)
            k = ops.slice_update(cache[0], start, ops.cast(_heads_first(new_k), cache[0].dtype))
            v = ops.slice_update(cache[1], start, ops.cast(_heads_first(new_v), cache[1].dtype))
            cache = (k, v)
        else:
            update = ops.cast(ops.stack([_heads_first(new_k), _heads_first(new_v)], axis=1), cache.dtype)
            cache = ops.slice_update(cache, (zero, zero, zero, index, zero), update)
            k, v = cache[:, 0], cache[:, 1]
        return k, v, cache

    def _write_per_row(self, cache, new_k, new_v, index):
        """The cache with each row's one new key/value written at that row's own position `index` `[B]`: one
        scatter per tensor (in place inside a compiled loop or a donated buffer), not a pass over the cache."""
        if new_k.shape[1] is not None and new_k.shape[1] != 1:
            raise ValueError("A `cache_index` per row decodes one position per call; got "
                             f"{new_k.shape[1]} query positions.")
        stacked = not isinstance(cache, (tuple, list))
        keys, values = _cache_pair(cache)
        batch, heads = ops.shape(keys)[0], ops.shape(keys)[1]
        rows = ops.repeat(ops.arange(batch, dtype="int32"), heads)
        head = ops.tile(ops.arange(heads, dtype="int32"), [batch])
        slot = ops.repeat(ops.minimum(index, ops.shape(keys)[2] - 1), heads)
        where = ops.stack([rows, head, slot], axis=1)  # [B * heads, 3]

        def write(tensor, new):
            update = ops.reshape(ops.cast(new, tensor.dtype), (-1, ops.shape(tensor)[-1]))  # [B * heads, d]
            return ops.scatter_update(tensor, where, update)

        keys, values = write(keys, new_k), write(values, new_v)
        return ops.stack([keys, values], axis=1) if stacked else (keys, values)

    def _attend_fused(self, q, k, v, mask):
        # q, k, v: [B, T, heads, d]; the mask [B, Tq, Tk] broadcasts over the heads.
        context = ops.dot_product_attention(
            q, k, v, mask=None if mask is None else ops.expand_dims(mask, 1), scale=self._scale,
            flash_attention=self.flash_attention,
        )
        shape = ops.shape(context)
        context = ops.reshape(context, (shape[0], shape[1], self.num_heads * self.value_dim))
        return self.output_dense(context)

    def _attend(self, q, k, v, mask, training):
        # q: [B, Tq, heads, d]; k, v: [B, heads, Tk, d].
        q = q * ops.cast(self._scale, q.dtype)
        logits = ops.einsum("bqhd,bhkd->bhqk", q, k)
        logits = ops.cast(logits, "float32")
        if mask is not None:
            logits = ops.where(
                ops.expand_dims(mask, 1), logits, masked_fill_value("float32")
            )
        weights = ops.cast(ops.softmax(logits, axis=-1), self.compute_dtype)
        dropped = self.dropout_layer(weights, training=training)
        context = ops.einsum("bhqk,bhkd->bqhd", dropped, v)
        shape = ops.shape(context)
        context = ops.reshape(context, (shape[0], shape[1], self.num_heads * self.value_dim))
        return self.output_dense(context), weights

    def compute_mask(self, query, value=None, key=None, query_mask=None, **kwargs):
        return query_mask

    def compute_output_shape(self, query_shape, value_shape=None, key_shape=None):
        return tuple(query_shape[:-1]) + (self.output_dim or query_shape[-1],)

    def compute_output_spec(self, query, value=None, key=None, cache=None, return_attention_scores=False, **kwargs):
        out_shape = tuple(query.shape[:-1]) + (self.output_dim or query.shape[-1],)
        output = keras.KerasTensor(out_shape, dtype=self.compute_dtype)
        results = [output]
        if return_attention_scores:
            length = value.shape[1] if cache is None else _cache_pair(cache)[0].shape[2]
            results.append(
                keras.KerasTensor(
                    (query.shape[0], self.num_heads, query.shape[1], length),
                    dtype=self.compute_dtype,
                )
            )
        if cache is not None:
            results.append(keras.tree.map_structure(lambda c: keras.KerasTensor(c.shape, dtype=c.dtype), cache))
        return results[0] if len(results) == 1 else tuple(results)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "output_dim": self.output_dim,
                "use_rotary": self.use_rotary,
                "rotary_max_wavelength": self.rotary_max_wavelength,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "fused_attention": self.fused_attention,
                "flash_attention": self.flash_attention,
            }
        )
        return config


def _cache_pair(cache):
    """`(keys, values)` of a cache given as a pair or as one stacked `[B, 2, heads, length, d]` tensor."""
    if isinstance(cache, (tuple, list)):
        return cache[0], cache[1]
    return cache[:, 0], cache[:, 1]


def _heads_first(x):
    """`[B, T, heads, d]` -> `[B, heads, T, d]` (a free reshape when `T == 1`)."""
    return ops.transpose(x, (0, 2, 1, 3))
