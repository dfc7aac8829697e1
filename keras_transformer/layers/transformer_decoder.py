import keras

from keras_transformer.layers.feed_forward import make_feed_forward
from keras_transformer.layers.hash_dropout import HashDropout
from keras_transformer.layers.multi_head_attention import MultiHeadAttention


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerDecoder(keras.layers.Layer):
    """One Transformer decoder block: causal self-attention, cross-attention, feed-forward network.

    Self-attention is always causal (a position never sees later positions). Cross-attention
    reads `encoder_sequence`, skipping its padding. Each sub-block is wrapped in dropout, a
    residual connection and layer normalization, post-norm (the paper) or pre-norm
    (`norm_first=True`). Padding masks come from the inputs' Keras masks or from the explicit
    `decoder_padding_mask` / `encoder_padding_mask` arguments.

    For incremental decoding pass `self_attention_cache` (a `(keys, values)` pair of `[batch, heads, max_length,
    head_dim]` zeros to start, or one stacked `[batch, 2, heads, max_length, head_dim]` tensor; see
    `MultiHeadAttention`) with `self_attention_cache_index`, and a `cross_attention_cache`
    from `compute_cross_attention_cache(encoder_sequence)`: the call then returns
    `(outputs, self_attention_cache, cross_attention_cache)` and costs one position's work.

    Args:
        d_model: int. Feature size of inputs and outputs.
        num_heads: int. Attention heads; `d_model` must be divisible by it.
        d_ff: int. Hidden size of the feed-forward network.
        dropout: float. Dropout on each sub-block's output (and inside the FFN unless `activation_dropout`).
        attention_dropout: float. Dropout on attention weights. Defaults to `dropout`.
        activation_dropout: float. Dropout on the FFN's hidden activations (inside the FFN). Defaults to
            `dropout`; 0 gives the paper's (and keras-hub's) block, and saves the `d_ff`-wide random mask.
        activation: str or callable. FFN activation.
        norm_first: bool. Pre-norm if `True`, post-norm (the paper) if `False`.
        layer_norm_epsilon: float. Epsilon of the layer normalizations.
        use_bias: bool. Biases in the attention projections.
        use_rotary: bool. Rotary position embeddings in self-attention.
        kernel_initializer: initializer for kernels.
        bias_initializer: initializer for biases.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        decoder_sequence: `[batch, target_length, d_model]`.
        encoder_sequence: `[batch, source_length, d_model]`; may be `None` when
            `cross_attention_cache` is given.
        decoder_padding_mask: boolean `[batch, target_length]`; defaults to the Keras mask.
        encoder_padding_mask: boolean `[batch, source_length]`; defaults to the Keras mask.
        self_attention_cache: key/value cache of the self-attention, or `None`.
        self_attention_cache_index: int or scalar int tensor, position of `decoder_sequence[:, 0]`.
        cross_attention_cache: precomputed keys/values of the encoder output, or `None`.
        return_attention_scores: bool. Also return the cross-attention weights
            `[batch, heads, target_length, source_length]` (after the outputs).
        training: bool.

    Example:

    >>> import numpy as np
    >>> dec = TransformerDecoder(d_model=16, num_heads=2, d_ff=32)
    >>> y = np.random.rand(2, 5, 16).astype("float32")
    >>> x = np.random.rand(2, 7, 16).astype("float32")
    >>> tuple(dec(y, x).shape)
    (2, 5, 16)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.1.
    """

    def __init__(
        self,
        d_model,
        num_heads,
        d_ff,
        dropout=0.0,
        attention_dropout=None,
        activation="relu",
        activation_dropout=None,
        norm_first=False,
        layer_norm_epsilon=1e-6,
        use_bias=True,
        use_rotary=False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}.")
        self.supports_masking = True
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.dropout = dropout
        self.attention_dropout = dropout if attention_dropout is None else attention_dropout
        self.activation_dropout = dropout if activation_dropout is None else activation_dropout
        self.activation = keras.activations.get(activation)
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.use_bias = use_bias
        self.use_rotary = use_rotary
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    @property
    def head_dim(self):
        return self.d_model // self.num_heads

    def _norm(self, name):
        norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )
        norm.build((None, None, self.d_model))
        return norm

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        init = keras.initializers.serialize(self.kernel_initializer)
        binit = keras.initializers.serialize(self.bias_initializer)
        shape = (None, None, self.d_model)
        enc_shape = encoder_sequence_shape or shape

        def attention(name, rotary):
            return MultiHeadAttention(
                self.num_heads,
                self.head_dim,
                dropout=self.attention_dropout,
                use_bias=self.use_bias,
                use_rotary=rotary,
                kernel_initializer=init,
                bias_initializer=binit,
                dtype=self.dtype_policy,
                name=name,
            )

        self.self_attention = attention("self_attention", self.use_rotary)
        self.self_attention.build(shape, shape)
        self.self_attention_norm = self._norm("self_attention_norm")
        self.self_attention_dropout = HashDropout(self.dropout, dtype=self.dtype_policy)
        self.cross_attention = attention("cross_attention", False)
        self.cross_attention.build(shape, enc_shape)
        self.cross_attention_norm = self._norm("cross_attention_norm")
        self.cross_attention_dropout = HashDropout(self.dropout, dtype=self.dtype_policy)
        self.ffn_inner, self.ffn_dropout, self.ffn_outer = make_feed_forward(
            self.d_model, self.d_ff, self.activation, self.activation_dropout, init, binit,
            self.dtype_policy, "ffn",
        )
        self.ffn_norm = self._norm("ffn_norm")
        self.ffn_output_dropout = HashDropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def compute_cross_attention_cache(self, encoder_sequence, separate=True):
        """Keys/values of `encoder_sequence` for cross-attention, computed once per sequence: a `(keys, values)`
        pair, or one stacked tensor with `separate=False` (`MultiHeadAttention.compute_cache`)."""
        return self.cross_attention.compute_cache(encoder_sequence, separate=separate)

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        decoder_sequence_mask=None,
        encoder_sequence_mask=None,
        self_attention_cache=None,
        self_attention_cache_index=None,
        cross_attention_cache=None,
        return_attention_scores=False,
        training=None,
    ):
        if encoder_sequence is None and cross_attention_cache is None:
            raise ValueError(
                "TransformerDecoder needs `encoder_sequence` (or a `cross_attention_cache`)."
            )
        if (self_attention_cache is None) != (self_attention_cache_index is None):
            raise ValueError(
                "Pass `self_attention_cache` and `self_attention_cache_index` together."
            )
        if decoder_padding_mask is None:
            decoder_padding_mask = decoder_sequence_mask
        if encoder_padding_mask is None:
            encoder_padding_mask = encoder_sequence_mask

        x = decoder_sequence
        residual = x
        if self.norm_first:
            x = self.self_attention_norm(x)
        if self_attention_cache is None:
            x = self.self_attention(
                x, x,
                query_mask=decoder_padding_mask,
                value_mask=decoder_padding_mask,
                use_causal_mask=True,
                training=training,
            )
        else:
            x, self_attention_cache = self.self_attention(
                x, x,
                query_mask=decoder_padding_mask,
                cache=self_attention_cache,
                cache_index=self_attention_cache_index,
                training=training,
            )
        x = residual + self.self_attention_dropout(x, training=training)
        if not self.norm_first:
            x = self.self_attention_norm(x)

        residual = x
        if self.norm_first:
            x = self.cross_attention_norm(x)
        x, scores = self.cross_attention(
            x,
            encoder_sequence,
            query_mask=decoder_padding_mask,
            value_mask=encoder_padding_mask,
            cache=cross_attention_cache,
            return_attention_scores=True,
            training=training,
        )[:2]
        x = residual + self.cross_attention_dropout(x, training=training)
        if not self.norm_first:
            x = self.cross_attention_norm(x)

        residual = x
        if self.norm_first:
            x = self.ffn_norm(x)
        x = self.ffn_outer(self.ffn_dropout(self.ffn_inner(x), training=training))
        x = residual + self.ffn_output_dropout(x, training=training)
        if not self.norm_first:
            x = self.ffn_norm(x)

        outputs = [x]
        if return_attention_scores:
            outputs.append(scores)
        if self_attention_cache is not None or cross_attention_cache is not None:
            outputs += [self_attention_cache, cross_attention_cache]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def compute_mask(self, decoder_sequence, encoder_sequence=None, decoder_sequence_mask=None, **kwargs):
        return decoder_sequence_mask

    def compute_output_shape(self, decoder_sequence_shape, encoder_sequence_shape=None):
        return decoder_sequence_shape

    def compute_output_spec(
        self,
        decoder_sequence,
        encoder_sequence=None,
        self_attention_cache=None,
        cross_attention_cache=None,
        return_attention_scores=False,
        **kwargs,
    ):
        outputs = [keras.KerasTensor(decoder_sequence.shape, dtype=self.compute_dtype)]
        if return_attention_scores:
            src = (encoder_sequence.shape[1] if cross_attention_cache is None
                   else keras.tree.flatten(cross_attention_cache)[0].shape[-2])
            outputs.append(keras.KerasTensor(
                (decoder_sequence.shape[0], self.num_heads, decoder_sequence.shape[1], src),
                dtype=self.compute_dtype,
            ))
        if self_attention_cache is not None or cross_attention_cache is not None:
            for cache in (self_attention_cache, cross_attention_cache):
                outputs.append(None if cache is None else keras.tree.map_structure(
                    lambda c: keras.KerasTensor(c.shape, dtype=c.dtype), cache))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "num_heads": self.num_heads,
                "d_ff": self.d_ff,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation_dropout": self.activation_dropout,
                "activation": keras.activations.serialize(self.activation),
                "norm_first": self.norm_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "use_bias": self.use_bias,
                "use_rotary": self.use_rotary,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
