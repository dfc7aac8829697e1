"""What a backend-agnostic test needs from the backend: compiling a function, and the backend's name."""

import keras


def backend():
    return keras.backend.backend()


def compile_function(function):
    """`function` compiled by the backend's compiler: `tf.function(jit_compile=True)` on TensorFlow, `jax.jit` on
    JAX; on PyTorch the function itself (torch.compile takes minutes on a decoding loop; see README "Backends")."""
    name = backend()
    if name == "tensorflow":
        import tensorflow as tf

        return tf.function(function, jit_compile=True)
    if name == "jax":
        import jax

        return jax.jit(function)
    return function
