"""`SlotRequest`: one sentence in a `SlotEngine`; and the decoding settings a `SlotEngine` takes from a sampler."""

import itertools

import numpy as np
from keras import ops

from keras_transformer.decoding.sampling import check_filters
from keras_transformer.decoding.sampling import draw_uniforms


class SlotRequest:
    """One sentence in a `SlotEngine`: its source ids, options, and (once `done`) its output `tokens` (int32,
    `end_id` last when the sentence ended within `max_length`). `tokens_so_far` grows while it decodes."""

    _ids = itertools.count()

    def __init__(self, source, prefix, uniforms, on_tokens, first_token=None):
        self.id = next(SlotRequest._ids)
        self.source = source
        self.prefix = prefix
        self.first_token = first_token
        self.uniforms = uniforms
        self.on_tokens = on_tokens
        self.tokens_so_far = []
        self.slot = None
        self.done = False
        self.cancelled = False

    def upcoming(self, position, forced, uniforms):
        """Write this sentence's forced tokens (its prefix; 0: none; a first token forced at no cost as its
        negative id) and random numbers for its positions from `position` on into `forced` and `uniforms` (`None`
        where it does not sample), both `[steps]`."""
        if self.first_token is not None and position == 0:
            forced[0] = -self.first_token
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


def checked_request(source, prefix, uniforms, seed, on_tokens, max_length, longest, samples, default_seed,
                    first_token=None):
    """A `SlotRequest` of `SlotEngine.submit`'s arguments, each checked (see there): sources of at most `longest`
    ids; `uniforms` / `seed` only where the engine `samples`, drawn from `seed` (else `default_seed`, else a fresh
    one) when not given; a `first_token` or a `prefix`, not both."""
    source = np.asarray(source).astype("int32").reshape(-1)
    nonzero = np.flatnonzero(source)
    source = source[: nonzero[-1] + 1] if nonzero.size else source[:0]
    if source.size == 0:
        raise ValueError("A sentence to decode needs at least one source id (0 is padding).")
    if source.size > longest:
        raise ValueError(f"The source has {source.size} ids; this engine holds at most {longest} (its largest "
                         "source bucket).")
    if prefix is not None:
        prefix = np.asarray(prefix).astype("int32").reshape(-1)
        if prefix.size >= max_length or np.any(prefix <= 0):
            raise ValueError(f"A prefix holds 1 to {max_length - 1} ids, none of them 0; got {prefix.tolist()}.")
    if first_token is not None:
        if prefix is not None:
            raise ValueError("Give a sentence a prefix or a first_token, not both.")
        first_token = int(first_token)
        if first_token <= 0 or max_length < 2:
            raise ValueError(f"first_token is a positive id (and max_length at least 2); got {first_token}.")
    if samples:
        if uniforms is None:
            seed = default_seed if seed is None else seed
            seed = int(np.random.randint(2**31)) if seed is None else seed
            uniforms = ops.convert_to_numpy(draw_uniforms(1, max_length, seed))[0]
        uniforms = np.asarray(uniforms, "float32").reshape(-1)
        if uniforms.shape != (max_length,):
            raise ValueError(f"`uniforms` must hold max_length={max_length} numbers; got {uniforms.size}.")
    elif uniforms is not None or seed is not None:
        raise ValueError("`uniforms` and `seed` are for a sampling engine; this one does not sample.")
    return SlotRequest(source, prefix, uniforms, on_tokens, first_token)


def slot_settings(sampler):
    """`((temperature, top_k, top_p), force_end, seed)` of a greedy or sampling sampler; `None` filters for
    greedy."""
    from keras_transformer.decoding.samplers import BeamSampler
    from keras_transformer.decoding.samplers import GreedySampler
    from keras_transformer.decoding.samplers import StochasticSampler
    from keras_transformer.decoding.samplers import get_sampler

    sampler = get_sampler(sampler)
    if isinstance(sampler, BeamSampler):
        raise ValueError("SlotEngine decodes greedily or by sampling; beam search (and n-best lists) decode in a "
                         "BeamSlotEngine.")
    if isinstance(sampler, GreedySampler):
        return None, sampler.force_end, None
    if isinstance(sampler, StochasticSampler):
        filters = sampler._filters()
        return check_filters(sampler.temperature, filters.get("top_k"), filters.get("top_p")), False, sampler.seed
    raise ValueError(f"SlotEngine cannot decode with {type(sampler).__name__}: it takes greedy or sampling "
                     "samplers (`GreedySampler`, `RandomSampler`, `TopKSampler`, `TopPSampler`).")
