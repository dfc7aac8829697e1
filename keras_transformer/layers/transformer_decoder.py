import keras

from keras_transformer.layers.transformer_block import TransformerBlock


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerDecoder(TransformerBlock):
    """One Transformer decoder block: causal self-attention, cross-attention, feed-forward network.

    Self-attention is always causal (a position never sees later positions). Cross-attention
    reads `encoder_sequence`, skipping its padding. Each sub-block is wrapped in dropout, a
    residual connection and layer normalization, post-norm (the paper) or pre-norm
    (`norm_first=True`). Its arguments (`d_model`, `num_heads`, `d_ff`, `dropout`, ...) are the encoder's too;
    `TransformerBlock` documents them. Padding masks come from the inputs' Keras masks or from the explicit
    `decoder_padding_mask` / `encoder_padding_mask` arguments.

    For incremental decoding pass `self_attention_cache` (a `(keys, values)` pair of `[batch, heads, max_length,
    head_dim]` zeros to start, or one stacked `[batch, 2, heads, max_length, head_dim]` tensor; see
    `MultiHeadAttention`) with `self_attention_cache_index`, and a `cross_attention_cache`
    from `compute_cross_attention_cache(encoder_sequence)`: the call then returns
    `(outputs, self_attention_cache, cross_attention_cache)` and costs one position's work.

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

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        shape = (None, None, self.d_model)
        self.self_attention = self._attention("self_attention", self.use_rotary, shape, shape)
        self.self_attention_norm = self._norm("self_attention_norm")
        self.self_attention_dropout = self._dropout()
        self.cross_attention = self._attention("cross_attention", False, shape, encoder_sequence_shape or shape)
        self.cross_attention_norm = self._norm("cross_attention_norm")
        self.cross_attention_dropout = self._dropout()
        self._build_feed_forward()
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

        def self_attention(x):
            if self_attention_cache is None:  # the whole sequence at once: causal, padding masked
                cache = dict(value_mask=decoder_padding_mask, use_causal_mask=True)
            else:  # positions from `self_attention_cache_index` on, their keys/values written into the cache
                cache = dict(cache=self_attention_cache, cache_index=self_attention_cache_index)
            outputs = self.self_attention(x, x, query_mask=decoder_padding_mask, training=training, **cache)
            return (outputs, None) if self_attention_cache is None else outputs

        def cross_attention(x):
            return self.cross_attention(
                x,
                encoder_sequence,
                query_mask=decoder_padding_mask,
                value_mask=encoder_padding_mask,
                cache=cross_attention_cache,
                return_attention_scores=True,
                training=training,
            )[:2]

        x, self_attention_cache = self._residual(
            decoder_sequence, self.self_attention_norm, self.self_attention_dropout, self_attention, training
        )
        x, scores = self._residual(x, self.cross_attention_norm, self.cross_attention_dropout, cross_attention,
                                   training)
        x = self._feed_forward(x, training)

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
