import math

import keras
from keras import ops

# Constants of MurmurHash3's 32-bit finalizer and the golden-ratio increment, as signed int32 (the
# arithmetic below is int32 with wrap-around, which every backend and XLA define the same way).
_GOLDEN = 0x9E3779B9 - (1 << 32)
_MIX_1 = 0x85EBCA6B - (1 << 32)
_MIX_2 = 0xC2B2AE35 - (1 << 32)
_RANDOM_BITS = 24


def _logical_shift_right(x, bits):
    # `right_shift` is arithmetic on signed integers: clear the copies of the sign bit.
    return ops.bitwise_and(ops.right_shift(x, bits), (1 << (32 - bits)) - 1)


def _mix(x):
    """MurmurHash3's 32-bit finalizer: an int32 bijection; each input bit flips about half the output bits."""
    x = ops.bitwise_xor(x, _logical_shift_right(x, 16))
    x = x * _MIX_1
    x = ops.bitwise_xor(x, _logical_shift_right(x, 13))
    x = x * _MIX_2
    return ops.bitwise_xor(x, _logical_shift_right(x, 16))


@keras.saving.register_keras_serializable(package="keras_transformer")
class HashDropout(keras.layers.Layer):
    """Dropout whose random mask comes from an integer hash of each element's index, fused into the step.

    Same contract as `keras.layers.Dropout` (without `noise_shape`): during training each element is
    zeroed independently with probability `rate` and the rest are scaled by `1 / (1 - rate)`; at
    inference it is the identity. The difference is how the random bits are made: two random int32
    keys per call come from the layer's `SeedGenerator`, and each element's bits are a MurmurHash3
    finalizer of `index * golden + key_0 XOR key_1`. That is a handful of elementwise integer ops, so XLA
    fuses them into the surrounding fusion instead of running a separate Philox random-number kernel
    (which XLA's CPU backend emits as a slow scalar loop: ~17 ns per element, about 15% of a
    training step of the benchmark model; see `benchmarks/train_step.py`). Without XLA it costs the
    same as Keras's dropout. The keep decision uses 24 random bits, so the effective rate is `rate`
    rounded to a multiple of 2^-24.

    Used for every dropout inside this package's layers and models.

    Args:
        rate: float in `[0, 1)`. Fraction of the inputs to drop.
        seed: int, optional. Seed of the layer's random generator, for reproducible masks.

    Call arguments:
        inputs: float tensor of any shape with fewer than 2^31 elements (a larger static shape is a `ValueError`).
        training: bool. Drop only when true.

    Example:

    >>> import numpy as np
    >>> layer = HashDropout(0.5, seed=1)
    >>> out = layer(np.ones((2, 1000), "float32"), training=True)
    >>> sorted(set(np.unique(np.asarray(out)).tolist()))
    [0.0, 2.0]

    References:
        - [Srivastava et al., 2014](https://jmlr.org/papers/v15/srivastava14a.html) (dropout)
        - [Salmon et al., 2011](https://doi.org/10.1145/2063384.2063405) (counter-based random numbers)
    """

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not 0 <= rate < 1:
            raise ValueError(f"{type(self).__name__} `rate` must be in [0, 1); got {rate}.")
        self.rate = rate
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.supports_masking = True
        self.built = True

    def call(self, inputs, training=False):
        if not training or self.rate == 0:
            return inputs
        shape = tuple(inputs.shape)
        if None not in shape and math.prod(shape) >= 2**31:
            raise ValueError(
                f"HashDropout hashes int32 element indices, so a tensor must have fewer than 2^31 elements; got "
                f"shape {shape} ({math.prod(shape):,} elements). Split the batch, or use keras.layers.Dropout here."
            )
        keys = keras.random.randint((2,), 0, 2**31 - 1, seed=self.seed_generator, dtype="int32")
        index = ops.reshape(ops.arange(ops.size(inputs), dtype="int32"), ops.shape(inputs))
        bits = _mix(ops.bitwise_xor(index * _GOLDEN + keys[0], keys[1]))
        threshold = int(round(self.rate * (1 << _RANDOM_BITS)))
        keep = ops.greater_equal(ops.bitwise_and(bits, (1 << _RANDOM_BITS) - 1), threshold)
        scale = ops.cast(1.0 / (1.0 - self.rate), inputs.dtype)
        return ops.where(keep, inputs * scale, ops.zeros_like(inputs))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "seed": self.seed})
        return config
