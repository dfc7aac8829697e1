"""Models assembled from `keras_transformer.layers`.

* `config`: `TransformerConfig`, every model setting (no Keras import: the command line checks flags with it).
* `transformer`: `build_transformer` and `TransformerModel`, the functional encoder-decoder.
* `backbone`: `TransformerBackbone`, the same model as a keras-hub `Backbone`.
* `output_projection`, `transformer_parts`, `ensemble`: the logits layers, the parts decoding calls, ensembles.

Names load on first use (as the top level's do), so that `keras_transformer.models.config` imports without Keras.
"""

import importlib

_LAZY = {
    "TransformerConfig": ("keras_transformer.models.config", "TransformerConfig"),
    "TransformerModel": ("keras_transformer.models.transformer", "TransformerModel"),
    "build_transformer": ("keras_transformer.models.transformer", "build_transformer"),
    "TransformerBackbone": ("keras_transformer.models.backbone", "TransformerBackbone"),
    "EnsembleParts": ("keras_transformer.models.ensemble", "EnsembleParts"),
    "LogitsBias": ("keras_transformer.models.output_projection", "LogitsBias"),
    "OutputProjection": ("keras_transformer.models.output_projection", "OutputProjection"),
    "TransformerParts": ("keras_transformer.models.transformer_parts", "TransformerParts"),
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'keras_transformer.models' has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module_name), attribute)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
