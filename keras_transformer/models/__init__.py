"""Models assembled from `keras_transformer.layers`."""

from keras_transformer.models.backbone import TransformerBackbone
from keras_transformer.models.ensemble import EnsembleParts
from keras_transformer.models.output_projection import LogitsBias
from keras_transformer.models.output_projection import OutputProjection
from keras_transformer.models.transformer import TransformerConfig
from keras_transformer.models.transformer import TransformerModel
from keras_transformer.models.transformer import build_transformer
from keras_transformer.models.transformer_parts import TransformerParts

__all__ = ["EnsembleParts", "LogitsBias", "OutputProjection", "TransformerBackbone", "TransformerConfig",
           "TransformerModel", "TransformerParts", "build_transformer"]
