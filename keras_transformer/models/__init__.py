"""Models assembled from `keras_transformer.layers`.

* `config`: `TransformerConfig`, every model setting (no Keras import: the command line checks flags with it).
* `transformer`: `build_transformer` and `TransformerModel`, the functional encoder-decoder.
* `backbone`: `TransformerBackbone`, the same model as a keras-hub `Backbone`.
* `output_projection`, `transformer_parts`, `ensemble`: the logits layers, the parts decoding calls, ensembles.

Names load on first use (as the top level's do), so that `keras_transformer.models.config` imports without Keras.
"""

from keras_transformer.lazy import lazy_names

_EXPORTS = {
    "keras_transformer.models.config": ("TransformerConfig",),
    "keras_transformer.models.transformer": ("TransformerModel", "build_transformer"),
    "keras_transformer.models.backbone": ("TransformerBackbone",),
    "keras_transformer.models.ensemble": ("EnsembleParts",),
    "keras_transformer.models.output_projection": ("LogitsBias", "OutputProjection"),
    "keras_transformer.models.transformer_parts": ("TransformerParts",),
}

__all__, __getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
