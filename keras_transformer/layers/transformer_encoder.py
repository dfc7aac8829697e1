import keras

from keras_transformer.layers.transformer_block import TransformerBlock


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerEncoder(TransformerBlock):
    """One Transformer encoder block: self-attention, then a position-wise feed-forward network.

    Each sub-block is wrapped in dropout, a residual connection and layer normalization, post-norm (the paper) or
    pre-norm (`norm_first=True`). The padding mask comes from the input's Keras mask (e.g. from
    `PositionalEmbedding`) or from `padding_mask`.

    Its arguments (`d_model`, `num_heads`, `d_ff`, `dropout`, ...) are the decoder's too; `TransformerBlock`
    documents them.

    Call arguments:
        inputs: `[batch, length, d_model]`.
        padding_mask: boolean `[batch, length]`, `True` on real tokens. Defaults to the Keras mask.
        attention_mask: boolean `[batch, length, length]`, merged with the padding mask.
        return_attention_scores: bool. Also return the self-attention weights.
        training: bool.

    Example:

    >>> import numpy as np
    >>> enc = TransformerEncoder(d_model=16, num_heads=2, d_ff=32)
    >>> tuple(enc(np.random.rand(2, 7, 16).astype("float32")).shape)
    (2, 7, 16)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.1.
        - [Xiong et al., 2020](https://arxiv.org/abs/2002.04745) (pre-norm).
    """

    def build(self, input_shape):
        shape = (None, None, self.d_model)
        self.self_attention = self._attention("self_attention", self.use_rotary, shape, shape)
        self.self_attention_norm = self._norm("self_attention_norm")
        self.self_attention_dropout = self._dropout()
        self._build_feed_forward()
        self.built = True

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        mask=None,
        return_attention_scores=False,
        training=None,
    ):
        if padding_mask is None:
            padding_mask = mask

        def self_attention(x):
            return self.self_attention(
                x,
                x,
                query_mask=padding_mask,
                value_mask=padding_mask,
                attention_mask=attention_mask,
                return_attention_scores=True,
                training=training,
            )

        x, scores = self._residual(
            inputs, self.self_attention_norm, self.self_attention_dropout, self_attention, training
        )
        x = self._feed_forward(x, training)
        if return_attention_scores:
            return x, scores
        return x

    def compute_mask(self, inputs, mask=None, padding_mask=None, **kwargs):
        return mask if padding_mask is None else padding_mask

    def compute_output_shape(self, input_shape):
        return input_shape

    def compute_output_spec(self, inputs, return_attention_scores=False, **kwargs):
        out = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if return_attention_scores:
            b, t = inputs.shape[0], inputs.shape[1]
            return out, keras.KerasTensor((b, self.num_heads, t, t), dtype=self.compute_dtype)
        return out
