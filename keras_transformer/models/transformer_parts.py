"""`TransformerParts`: a model from `build_transformer`, callable one decoding step at a time.

`TransformerParts.from_model(model)` takes the embeddings, blocks and output projection of a `TransformerModel`
(what `build_transformer` returns) from its attributes, so the decoders in `keras_transformer.decoding` can run the
encoder once and then the decoder one token at a time with fixed-size key/value caches. Everything here uses
`keras.ops` only.
"""

import copy

from keras import ops


class TiedOutputProjection:
    """Logits `[..., vocab]` float32 from the transposed target embedding matrix (a tied output projection).

    `transposed=None` multiplies by `embedding`'s matrix transposed in the call (what the model does);
    `hoisted()` returns one that holds the transposed matrix, made once, for the steps of a decoding loop.
    `bias` is the model's `LogitsBias` layer, if it has one.
    """

    def __init__(self, embedding, transposed=None, bias=None):
        self.embedding = embedding
        self.transposed = transposed
        self.bias = bias

    def __call__(self, x):
        if self.transposed is None:
            logits = self.embedding(x, reverse=True)
        else:
            logits = ops.matmul(ops.cast(x, "float32"), self.transposed)
        return logits if self.bias is None else self.bias(logits)

    def hoisted(self, transposed=None):
        if transposed is None:
            transposed = self.transposed_matrix()
        return TiedOutputProjection(self.embedding, transposed, self.bias)

    def transposed_matrix(self):
        """The float32 `[d_model, vocab]` matrix that `hoisted()` multiplies by."""
        return ops.transpose(ops.cast(self.embedding.embedding_matrix(), "float32"))


class TransformerParts:
    """The pieces of a seq2seq Transformer model, callable one decoding step at a time."""

    def __init__(
        self,
        encoder_embedding,
        encoder_layers,
        encoder_final_norm,
        decoder_embedding,
        decoder_layers,
        decoder_final_norm,
        output_projection,
    ):
        self.encoder_embedding = encoder_embedding
        self.encoder_layers = list(encoder_layers)
        self.encoder_final_norm = encoder_final_norm
        self.decoder_embedding = decoder_embedding
        self.decoder_layers = list(decoder_layers)
        self.decoder_final_norm = decoder_final_norm
        self.output_projection = output_projection

    @classmethod
    def from_model(cls, model):
        """The parts of a `TransformerModel` (what `build_transformer` returns), from its attributes."""
        from keras_transformer.models.transformer import TransformerModel

        if not isinstance(model, TransformerModel):
            raise ValueError(f"Model {getattr(model, 'name', model)!r} is a {type(model).__name__}, not a "
                            "keras_transformer seq2seq model: expected a `TransformerModel` from `build_transformer` "
                            "(or loaded back from `.keras`).")
        return cls(
            model.encoder_embedding,
            model.encoder_layers,
            model.encoder_final_norm,
            model.decoder_embedding,
            model.decoder_layers,
            model.decoder_final_norm,
            model.output_projection
            or TiedOutputProjection(model.decoder_embedding, bias=getattr(model, "logits_bias", None)),
        )

    def output_invariant(self):
        """What `with_loop_invariants` computes from the weights (the transposed tied embedding), or `None` (an
        untied projection): a caller that decodes over many calls computes it once and passes it back in."""
        if not isinstance(self.output_projection, TiedOutputProjection):
            return None
        return self.output_projection.transposed_matrix()

    def with_loop_invariants(self, invariant=None):
        """These parts with the work that every decoding step would repeat on the weights done once, now.

        Decoders call it before their loop (inside `weights_read_once`). With a tied output projection the
        `[vocab, d_model]` embedding matrix is transposed here, once per decoding call, so that no step transposes
        it again and every step multiplies by a `[d_model, vocab]` matrix (or by `invariant`, that matrix from
        `output_invariant()`). Untied models are returned unchanged.
        """
        if not isinstance(self.output_projection, TiedOutputProjection):
            return self
        parts = copy.copy(self)
        parts.output_projection = self.output_projection.hoisted(invariant)
        return parts

    @property
    def num_heads(self):
        return self.decoder_layers[0].num_heads

    @property
    def head_dim(self):
        return self.decoder_layers[0].head_dim

    @property
    def max_length(self):
        return self.decoder_embedding.max_length

    @property
    def vocab_size(self):
        return self.decoder_embedding.vocab_size

    def encode(self, encoder_inputs):
        """Run the encoder: int ids `[B, S]` -> `(encoder_outputs [B, S, d], padding_mask [B, S])`."""
        ids = ops.cast(encoder_inputs, "int32")
        mask = ops.not_equal(ids, 0)
        x = self.encoder_embedding(ids)
        for layer in self.encoder_layers:
            x = layer(x, padding_mask=mask, training=False)
        if self.encoder_final_norm is not None:
            x = self.encoder_final_norm(x)
        return x, mask

    def cross_attention_caches(self, encoder_outputs):
        """Per decoder layer, the encoder output's `(keys, values)`, each `[B, heads, S, head_dim]`."""
        return [layer.compute_cross_attention_cache(encoder_outputs) for layer in self.decoder_layers]

    def empty_self_attention_caches(self, batch_size, cache_length, dtype=None):
        """Per decoder layer, a zero `(keys, values)` cache, each `[B, heads, cache_length, head_dim]`.

        Keys and values are separate tensors, so a decoding step reads neither through a slice of a stacked one.
        """
        dtype = dtype or self.decoder_layers[0].compute_dtype
        shape = (batch_size, self.num_heads, cache_length, self.head_dim)
        return [(ops.zeros(shape, dtype=dtype), ops.zeros(shape, dtype=dtype)) for _ in self.decoder_layers]

    def decode_step(self, token_ids, index, self_caches, cross_caches, encoder_padding_mask):
        """Decode positions `index...` given their input ids `[B, t]` (t is usually 1).

        `index` is one position for the whole batch (an int or a scalar tensor), or an int `[B]` tensor, one position
        per row (with `t == 1`): rows at different depths then share one step (`SlotEngine`).

        Returns `(logits [B, t, vocab] float32, new self-attention caches)`.
        """
        y = self.decoder_embedding(ops.cast(token_ids, "int32"), start_index=index)
        new_caches = []
        for layer, self_cache, cross_cache in zip(self.decoder_layers, self_caches, cross_caches):
            y, self_cache, _ = layer(
                y,
                encoder_padding_mask=encoder_padding_mask,
                self_attention_cache=self_cache,
                self_attention_cache_index=index,
                cross_attention_cache=cross_cache,
                training=False,
            )
            new_caches.append(self_cache)
        if self.decoder_final_norm is not None:
            y = self.decoder_final_norm(y)
        return ops.cast(self.output_projection(y), "float32"), new_caches

    def cross_attention_weights(self, encoder_inputs, decoder_inputs, layer_index=-1):
        """Cross-attention weights `[B, heads, T, S]` of one decoder layer (default: the last).

        Runs the full (uncached) decoder over `decoder_inputs`, for plots of what each target
        token looked at in the source.
        """
        encoded, mask = self.encode(encoder_inputs)
        ids = ops.cast(decoder_inputs, "int32")
        y = self.decoder_embedding(ids)
        target = len(self.decoder_layers) + layer_index if layer_index < 0 else layer_index
        for i, layer in enumerate(self.decoder_layers):
            y, scores = layer(
                y,
                encoded,
                decoder_padding_mask=ops.not_equal(ids, 0),
                encoder_padding_mask=mask,
                return_attention_scores=True,
                training=False,
            )
            if i == target:
                return scores
        raise IndexError(f"layer_index {layer_index} out of range for {len(self.decoder_layers)} decoder layers.")
