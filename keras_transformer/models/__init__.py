"""Models assembled from `keras_transformer.layers`."""

from keras_transformer.models.inference import TransformerParts
from keras_transformer.models.output_projection import OutputProjection
from keras_transformer.models.transformer import TransformerConfig, build_transformer

__all__ = ["OutputProjection", "TransformerConfig", "TransformerParts", "build_transformer"]
