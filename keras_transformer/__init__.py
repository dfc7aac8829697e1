"""keras-transformer: encoder-decoder Transformers for Keras 3 that train, decode fast and deploy.

The top-level names load on first use, so that `import keras_transformer` (and the command line's `--help` and
setting checks) does not import Keras: a multi-host run must choose the JAX backend before Keras is imported.
"""

import importlib

__version__ = "0.1.0"

_LAZY = {
    "layers": ("keras_transformer.layers", None),
    "TransformerConfig": ("keras_transformer.models", "TransformerConfig"),
    "build_transformer": ("keras_transformer.models", "build_transformer"),
}

__all__ = ["TransformerConfig", "__version__", "build_transformer", "layers"]


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'keras_transformer' has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
