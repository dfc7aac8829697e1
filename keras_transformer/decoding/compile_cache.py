"""A persistent compilation cache: programs compiled once are read back from disk by later processes.

A server's warm-up compiles every program its decoding runs (`SlotEngine.warm_up`); with the cache on, a restart of
the same model on the same machine reads them back instead of compiling them again. TensorFlow keeps XLA's
executables (`TF_XLA_FLAGS=--tf_xla_persistent_cache_directory`), JAX its own (`jax_compilation_cache_dir`); PyTorch
compiles nothing. An entry is keyed by the program and the device, so models and machines sharing a directory do not
clash; what changes a program (a model's shapes, a new TensorFlow) makes new entries, and old ones are never read
again (delete the directory to reclaim the space: tens to a few hundred MB per model and setting).
"""

import os

import keras

TF_FLAG = "--tf_xla_persistent_cache_directory"


def default_compile_cache():
    """`$XDG_CACHE_HOME/keras_transformer/compiled` (default `~/.cache/keras_transformer/compiled`)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "keras_transformer", "compiled")


def enable_compile_cache(directory=None):
    """Keep compiled programs in `directory` (default `default_compile_cache()`, per backend below it) for later
    processes. Returns the directory used, or `None` where the backend compiles nothing (PyTorch).

    TensorFlow reads its flag once, at its first computation: call this before loading a model (a TensorFlow flag
    set otherwise is kept and this has no effect). Raises `OSError` in one line if the directory cannot be made."""
    backend = keras.backend.backend()
    if backend not in ("tensorflow", "jax"):
        return None
    directory = os.path.join(os.path.abspath(os.path.expanduser(os.fspath(directory or default_compile_cache()))),
                             backend)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as error:
        raise OSError(error.errno, f"cannot make the compilation cache directory {directory}: {error.strerror}") \
            from None
    if backend == "tensorflow":
        flags = os.environ.get("TF_XLA_FLAGS", "")
        if TF_FLAG not in flags:
            os.environ["TF_XLA_FLAGS"] = f"{flags} {TF_FLAG}={directory}".strip()
    else:
        import jax

        jax.config.update("jax_compilation_cache_dir", directory)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return directory
