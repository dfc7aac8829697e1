"""What the encoder and decoder blocks share: their settings, sub-layers, residual wiring and config."""

import keras

from keras_transformer.layers.hash_dropout import HashDropout
from keras_transformer.layers.multi_head_attention import MultiHeadAttention


class TransformerBlock(keras.layers.Layer):
    """Base of `TransformerEncoder` and `TransformerDecoder`: one block's settings and its sub-layers.

    Every sub-block (attention, feed-forward) is wrapped in dropout, a residual connection and layer
    normalization: after the residual sum (`norm_first=False`, the paper's post-norm) or before the sub-block
    (`norm_first=True`, pre-norm, which trains more stably in deep stacks; add a final `LayerNormalization` after
    the last pre-norm block).

    Args:
        d_model: int. Feature size of inputs and outputs.
        num_heads: int. Attention heads; `d_model` must be divisible by it.
        d_ff: int. Hidden size of the feed-forward network.
        dropout: float. Dropout on each sub-block's output (and inside the FFN unless `activation_dropout`).
        attention_dropout: float. Dropout on attention weights. Defaults to `dropout`.
        activation: str or callable. FFN activation (the paper's `"relu"`; `"gelu"` is common).
        activation_dropout: float. Dropout on the FFN's hidden activations (inside the FFN). Defaults to
            `dropout`; 0 gives the paper's (and keras-hub's) block, and saves the `d_ff`-wide random mask.
        norm_first: bool. Pre-norm if `True`, post-norm (the paper) if `False`.
        layer_norm_epsilon: float. Epsilon of the layer normalizations.
        use_bias: bool. Biases in the attention projections.
        use_rotary: bool. Rotary position embeddings in self-attention.
        kernel_initializer: initializer for kernels.
        bias_initializer: initializer for biases.
        **kwargs: base `keras.layers.Layer` arguments.
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

    def _attention(self, name, rotary, query_shape, value_shape):
        """A built `MultiHeadAttention` sub-layer with this block's settings."""
        attention = MultiHeadAttention(
            self.num_heads,
            self.head_dim,
            dropout=self.attention_dropout,
            use_bias=self.use_bias,
            use_rotary=rotary,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )
        attention.build(query_shape, value_shape)
        return attention

    def _norm(self, name):
        norm = keras.layers.LayerNormalization(epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name)
        norm.build((None, None, self.d_model))
        return norm

    def _dropout(self):
        return HashDropout(self.dropout, dtype=self.dtype_policy)

    def _dense(self, units, input_size, name, activation=None):
        dense = keras.layers.Dense(
            units,
            activation=activation,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )
        dense.build((None, None, input_size))
        return dense

    def _build_feed_forward(self):
        """The position-wise FFN of the paper, Dense(d_ff, activation) -> dropout -> Dense(d_model), and its
        residual's norm and dropout."""
        self.ffn_inner = self._dense(self.d_ff, self.d_model, "ffn_inner", activation=self.activation)
        self.ffn_dropout = HashDropout(self.activation_dropout, dtype=self.dtype_policy, name="ffn_dropout")
        self.ffn_outer = self._dense(self.d_model, self.d_ff, "ffn_outer")
        self.ffn_norm = self._norm("ffn_norm")
        self.ffn_output_dropout = self._dropout()

    def _residual(self, x, norm, dropout, sublayer, training):
        """`sublayer` (which returns its output and one extra value) wrapped in dropout, the residual sum and
        `norm` (before the sub-layer with `norm_first`, after the sum without); returns `(x, extra)`."""
        y, extra = sublayer(norm(x) if self.norm_first else x)
        x = x + dropout(y, training=training)
        return (x if self.norm_first else norm(x)), extra

    def _feed_forward(self, x, training):
        def ffn(h):
            return self.ffn_outer(self.ffn_dropout(self.ffn_inner(h), training=training)), None

        return self._residual(x, self.ffn_norm, self.ffn_output_dropout, ffn, training)[0]

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
