"""`SlotRequest`: one sentence in a `SlotEngine`; and the decoding settings a `SlotEngine` takes from a sampler."""

import itertools

import numpy as np

from keras_transformer.decoding.sampling import check_filters


class SlotRequest:
    """One sentence in a `SlotEngine`: its source ids, options, and (once `done`) its output `tokens` (int32,
    `end_id` last when the sentence ended within `max_length`). `tokens_so_far` grows while it decodes."""

    _ids = itertools.count()

    def __init__(self, source, prefix, uniforms, on_tokens):
        self.id = next(SlotRequest._ids)
        self.source = source
        self.prefix = prefix
        self.uniforms = uniforms
        self.on_tokens = on_tokens
        self.tokens_so_far = []
        self.slot = None
        self.done = False
        self.cancelled = False

    def upcoming(self, forced, uniforms):
        """Write this sentence's forced tokens (its prefix; 0: none) and random numbers for its next positions
        into `forced` and `uniforms` (`None` where it does not sample), both `[steps]`."""
        position = len(self.tokens_so_far)
        if self.prefix is not None:
            ahead = self.prefix[position: position + len(forced)]
            forced[: len(ahead)] = ahead
        if self.uniforms is not None and uniforms is not None:
            ahead = self.uniforms[position: position + len(uniforms)]
            uniforms[: len(ahead)] = ahead

    @property
    def tokens(self):
        return np.asarray(self.tokens_so_far, dtype="int32")

    def __repr__(self):
        state = "done" if self.done else "cancelled" if self.cancelled else "waiting" if self.slot is None else \
            f"in slot {self.slot}"
        return f"SlotRequest(id={self.id}, {len(self.source)} source ids, {len(self.tokens_so_far)} tokens, {state})"


def slot_settings(sampler):
    """`((temperature, top_k, top_p), force_end, seed)` of a greedy or sampling sampler; `None` filters for
    greedy."""
    from keras_transformer.decoding.samplers import BeamSampler
    from keras_transformer.decoding.samplers import GreedySampler
    from keras_transformer.decoding.samplers import StochasticSampler
    from keras_transformer.decoding.samplers import get_sampler

    sampler = get_sampler(sampler)
    if isinstance(sampler, BeamSampler):
        raise ValueError("SlotEngine decodes greedily or by sampling; beam search (and n-best lists) run in the "
                         "whole-loop decoders (`generate(..., sampler=BeamSampler(...))`).")
    if isinstance(sampler, GreedySampler):
        return None, sampler.force_end, None
    if isinstance(sampler, StochasticSampler):
        filters = sampler._filters()
        return check_filters(sampler.temperature, filters.get("top_k"), filters.get("top_p")), False, sampler.seed
    raise ValueError(f"SlotEngine cannot decode with {type(sampler).__name__}: it takes greedy or sampling "
                     "samplers (`GreedySampler`, `RandomSampler`, `TopKSampler`, `TopPSampler`).")
