import keras

from keras_transformer.layers.feed_forward import make_feed_forward
from keras_transformer.layers.hash_dropout import HashDropout
from keras_transformer.layers.multi_head_attention import MultiHeadAttention


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerEncoder(keras.layers.Layer):
    """One Transformer encoder block: self-attention, then a position-wise feed-forward network.

    Each sub-block is wrapped in dropout, a residual connection and layer normalization: after
    the residual sum (`norm_first=False`, the paper's post-norm) or before the sub-block
    (`norm_first=True`, pre-norm, which trains more stably in deep stacks; add a final
    `LayerNormalization` after the last pre-norm block). The padding mask comes from the input's
    Keras mask (e.g. from `PositionalEmbedding`) or from `padding_mask`.

    Args:
        d_model: int. Feature size of inputs and outputs.
        num_heads: int. Attention heads; `d_model` must be divisible by it.
        d_ff: int. Hidden size of the feed-forward network.
        dropout: float. Dropout on each sub-block's output (and inside the FFN unless `activation_dropout`).
        attention_dropout: float. Dropout on attention weights. Defaults to `dropout`.
        activation_dropout: float. Dropout on the FFN's hidden activations (inside the FFN). Defaults to
            `dropout`; 0 gives the paper's (and keras-hub's) block, and saves the `d_ff`-wide random mask.
        activation: str or callable. FFN activation (the paper's `"relu"`; `"gelu"` is common).
        norm_first: bool. Pre-norm if `True`, post-norm (the paper) if `False`.
        layer_norm_epsilon: float. Epsilon of the layer normalizations.
        use_bias: bool. Biases in the attention projections.
        use_rotary: bool. Rotary position embeddings in self-attention.
        kernel_initializer: initializer for kernels.
        bias_initializer: initializer for biases.
        **kwargs: base `keras.layers.Layer` arguments.

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

    def build(self, input_shape):
        init = keras.initializers.serialize(self.kernel_initializer)
        binit = keras.initializers.serialize(self.bias_initializer)
        shape = (None, None, self.d_model)
        self.self_attention = MultiHeadAttention(
            self.num_heads,
            self.d_model // self.num_heads,
            dropout=self.attention_dropout,
            use_bias=self.use_bias,
            use_rotary=self.use_rotary,
            kernel_initializer=init,
            bias_initializer=binit,
            dtype=self.dtype_policy,
            name="self_attention",
        )
        self.self_attention.build(shape, shape)
        self.self_attention_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="self_attention_norm"
        )
        self.self_attention_norm.build(shape)
        self.self_attention_dropout = HashDropout(self.dropout, dtype=self.dtype_policy)
        self.ffn_inner, self.ffn_dropout, self.ffn_outer = make_feed_forward(
            self.d_model, self.d_ff, self.activation, self.activation_dropout, init, binit,
            self.dtype_policy, "ffn",
        )
        self.ffn_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="ffn_norm"
        )
        self.ffn_norm.build(shape)
        self.ffn_output_dropout = HashDropout(self.dropout, dtype=self.dtype_policy)
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
        x = inputs
        residual = x
        if self.norm_first:
            x = self.self_attention_norm(x)
        x, scores = self.self_attention(
            x,
            x,
            query_mask=padding_mask,
            value_mask=padding_mask,
            attention_mask=attention_mask,
            return_attention_scores=True,
            training=training,
        )
        x = residual + self.self_attention_dropout(x, training=training)
        if not self.norm_first:
            x = self.self_attention_norm(x)

        residual = x
        if self.norm_first:
            x = self.ffn_norm(x)
        x = self.ffn_outer(self.ffn_dropout(self.ffn_inner(x), training=training))
        x = residual + self.ffn_output_dropout(x, training=training)
        if not self.norm_first:
            x = self.ffn_norm(x)
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
