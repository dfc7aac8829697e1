"""Decoding with key/value caches: greedy search, beam search and sampling.

One entry point, `generate(model, encoder_inputs, max_length, start_id, end_id, sampler=...)`, with keras-hub style
samplers (`GreedySampler`, `BeamSampler`, `TopKSampler`, `TopPSampler`, `RandomSampler`; see `samplers`), which
are also `keras_hub.samplers` subclasses.

The public functions take a model from `build_transformer` and return int32 token ids. Each has a
lower-level twin taking a `TransformerParts` that returns full-width, static-shape outputs, for code
that traces its own function (export): `greedy_search`, `beam_search_with_parts`, `sample_with_parts`.

`SlotEngine` decodes with continuous batching: a fixed number of slots that sentences enter and leave between
steps (what `keras-transformer serve` runs on); `BeamSlotEngine` does the same for beam search, a sentence's
beams in a group of rows.
"""

from keras_transformer.decoding.beam_search import beam_search
from keras_transformer.decoding.beam_search import beam_search_with_parts
from keras_transformer.decoding.beam_search import gnmt_length_penalty
from keras_transformer.decoding.beam_slot_engine import BeamSlotEngine
from keras_transformer.decoding.greedy import greedy_decode
from keras_transformer.decoding.greedy import greedy_search
from keras_transformer.decoding.samplers import BeamSampler
from keras_transformer.decoding.samplers import GreedySampler
from keras_transformer.decoding.samplers import RandomSampler
from keras_transformer.decoding.samplers import Sampler
from keras_transformer.decoding.samplers import StochasticSampler
from keras_transformer.decoding.samplers import TopKSampler
from keras_transformer.decoding.samplers import TopPSampler
from keras_transformer.decoding.samplers import generate
from keras_transformer.decoding.samplers import get_sampler
from keras_transformer.decoding.sampling import sample_decode
from keras_transformer.decoding.sampling import sample_with_parts
from keras_transformer.decoding.slot_engine import SlotEngine
from keras_transformer.decoding.tuning import DecodingSearch
from keras_transformer.decoding.tuning import DecodingSettings
from keras_transformer.decoding.tuning import search_decoding

__all__ = [
    "BeamSampler",
    "BeamSlotEngine",
    "DecodingSearch",
    "DecodingSettings",
    "GreedySampler",
    "RandomSampler",
    "Sampler",
    "SlotEngine",
    "StochasticSampler",
    "TopKSampler",
    "TopPSampler",
    "generate",
    "get_sampler",
    "beam_search",
    "beam_search_with_parts",
    "gnmt_length_penalty",
    "greedy_decode",
    "greedy_search",
    "sample_decode",
    "sample_with_parts",
    "search_decoding",
]
