"""Transformer layers for Keras 3 (backend-agnostic: `keras.ops` only)."""

from keras_transformer.layers.hash_dropout import HashDropout
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.positional_embedding import PositionalEmbedding
from keras_transformer.layers.rotary_embedding import RotaryEmbedding
from keras_transformer.layers.transformer_decoder import TransformerDecoder
from keras_transformer.layers.transformer_encoder import TransformerEncoder
from keras_transformer.layers.word_dropout import WordDropout

__all__ = [
    "HashDropout",
    "MultiHeadAttention",
    "PositionalEmbedding",
    "RotaryEmbedding",
    "TransformerDecoder",
    "TransformerEncoder",
    "WordDropout",
]
