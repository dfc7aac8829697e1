import keras

from keras_transformer.layers.hash_dropout import HashDropout


def make_feed_forward(d_model, d_ff, activation, dropout, kernel_initializer, bias_initializer, dtype, name):
    """Position-wise FFN of the paper, Dense(d_ff, activation) -> Dropout -> Dense(d_model) (internal)."""
    inner = keras.layers.Dense(
        d_ff,
        activation=activation,
        kernel_initializer=keras.initializers.get(kernel_initializer),
        bias_initializer=keras.initializers.get(bias_initializer),
        dtype=dtype,
        name=f"{name}_inner",
    )
    inner.build((None, None, d_model))
    drop = HashDropout(dropout, dtype=dtype, name=f"{name}_dropout")
    outer = keras.layers.Dense(
        d_model,
        kernel_initializer=keras.initializers.get(kernel_initializer),
        bias_initializer=keras.initializers.get(bias_initializer),
        dtype=dtype,
        name=f"{name}_outer",
    )
    outer.build((None, None, d_ff))
    return inner, drop, outer
