"""Models assembled from `keras_transformer.layers`."""

from keras_transformer.models.ensemble import EnsembleParts
from keras_transformer.models.transformer_parts import TransformerParts
from keras_transformer.models.output_projection import LogitsBias
from keras_transformer.models.output_projection import OutputProjection
from keras_transformer.models.transformer import TransformerConfig, TransformerModel, build_transformer

__all__ = ["EnsembleParts", "LogitsBias", "OutputProjection", "TransformerConfig", "TransformerModel",
           "TransformerParts", "build_transformer"]
