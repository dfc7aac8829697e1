"""Several trained models decoded as one: `EnsembleParts`, the usual NMT ensemble, step by step.

At every decoding step each member scores the next token from its own encoder output and key/value caches, and the
ensemble's log-probabilities are the mean of the members' (`combine="log_prob"`, as Marian does: a normalized
geometric mean of their distributions, since decoders apply `log_softmax` to what `decode_step` returns), or the
log of the mean of their probabilities (`combine="prob"`, as fairseq does). The members must share one target
vocabulary and one source vocabulary (the same tokenizers); they may differ in anything else (seed, width, depth,
training minutes). Everything here uses `keras.ops` only.
"""

import math

import keras
from keras import ops

from keras_transformer.models.transformer_parts import TransformerParts

# How the members' next-token distributions become the ensemble's (module docstring).
COMBINES = ("log_prob", "prob")


class EnsembleParts:
    """The `TransformerParts` interface that the decoders use, over several models.

    Args:
        members: models from `build_transformer` (or loaded back), or their `TransformerParts`; at least one.
            All must have the same target vocabulary size and the same number of positions.
        combine: `"log_prob"` (default): the mean of the members' log-probabilities; `"prob"`: the log of the
            mean of their probabilities (a token one member rules out keeps the others' mass).

    Example:

    >>> from keras_transformer import build_transformer
    >>> from keras_transformer.decoding import beam_search
    >>> import numpy as np
    >>> a = build_transformer(50, 50, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=8)
    >>> b = build_transformer(50, 50, num_layers=2, d_model=16, num_heads=2, d_ff=32, max_length=8)
    >>> tokens = beam_search(EnsembleParts([a, b]), np.array([[5, 6, 7]]), max_length=6, start_id=1, end_id=2)
    >>> int(tokens.shape[0])
    1

    References:
        - Sutskever, Vinyals and Le, 2014, *Sequence to Sequence Learning with Neural Networks* (an ensemble of
          5 LSTMs decoded together); Marian and fairseq decode ensembles the same way, one step at a time.
    """

    def __init__(self, members, combine="log_prob"):
        members = list(members)
        if not members:
            raise ValueError("An ensemble needs at least one model.")
        if combine not in COMBINES:
            raise ValueError(f"combine={combine!r}: expected one of {', '.join(map(repr, COMBINES))}")
        self.combine = combine
        if any(isinstance(m, EnsembleParts) for m in members):
            raise TypeError("An ensemble's members are models (or their `TransformerParts`), not ensembles.")
        for i, m in enumerate(members):
            if not isinstance(m, (TransformerParts, keras.Model)):
                raise TypeError(f"Ensemble member {i} must be a keras.Model made by `build_transformer` (or its "
                                f"`TransformerParts`); got {type(m).__name__}.")
        self.members = [m if isinstance(m, TransformerParts) else TransformerParts.from_model(m) for m in members]
        first = self.members[0]
        for i, member in enumerate(self.members[1:], start=1):
            if member.vocab_size != first.vocab_size:
                raise ValueError(f"Ensemble member {i} has a target vocabulary of {member.vocab_size} ids, member 0 "
                                 f"{first.vocab_size}: the members must share one target vocabulary.")
            if member.max_length != first.max_length:
                raise ValueError(f"Ensemble member {i} has {member.max_length} positions, member 0 "
                                 f"{first.max_length}: the members must have the same `max_length`.")
        # Flat lists of caches: member i owns entries [offsets[i], offsets[i + 1]).
        sizes = [len(m.decoder_layers) for m in self.members]
        self._offsets = [sum(sizes[:i]) for i in range(len(sizes) + 1)]

    def __len__(self):
        return len(self.members)

    @property
    def vocab_size(self):
        return self.members[0].vocab_size

    @property
    def max_length(self):
        return self.members[0].max_length

    @property
    def decoder_embedding(self):
        """Member 0's (the checks on `max_length` read its position table; all members have as many positions)."""
        return self.members[0].decoder_embedding

    def _split(self, flat):
        return [flat[self._offsets[i]: self._offsets[i + 1]] for i in range(len(self.members))]

    def with_loop_invariants(self):
        parts = EnsembleParts.__new__(EnsembleParts)
        parts.members = [m.with_loop_invariants() for m in self.members]
        parts._offsets = self._offsets
        parts.combine = self.combine
        return parts

    def encode(self, encoder_inputs):
        """`(encoder outputs, one per member, padding_mask [B, S])`."""
        outputs = []
        mask = None
        for member in self.members:
            x, mask = member.encode(encoder_inputs)
            outputs.append(x)
        return tuple(outputs), mask

    def cross_attention_caches(self, encoder_outputs):
        return [c for member, x in zip(self.members, encoder_outputs) for c in member.cross_attention_caches(x)]

    def empty_self_attention_caches(self, batch_size, cache_length, dtype=None):
        # Each member's caches in its own dtype and shape (members may differ in width, heads and depth).
        return [c for member in self.members for c in member.empty_self_attention_caches(batch_size, cache_length)]

    def decode_step(self, token_ids, index, self_caches, cross_caches, encoder_padding_mask):
        """The ensemble's log-probabilities `[B, t, vocab]` float32 (as `combine` says), and the new caches (flat)."""
        log_probs = []
        new_caches = []
        for member, own_self, own_cross in zip(self.members, self._split(self_caches), self._split(cross_caches)):
            logits, caches = member.decode_step(token_ids, index, own_self, own_cross, encoder_padding_mask)
            log_probs.append(ops.log_softmax(ops.cast(logits, "float32"), axis=-1))
            new_caches.extend(caches)
        return self.combine_log_probs(log_probs), new_caches

    def combine_log_probs(self, log_probs):
        """The ensemble's log-probabilities from its members' (a list of float32 `[..., vocab]` log-softmaxes, one
        per member), as `combine` says: their mean, or the log of the mean of their probabilities."""
        if self.combine == "prob":
            return ops.logsumexp(ops.stack(log_probs), axis=0) - math.log(len(log_probs))
        return sum(log_probs[1:], log_probs[0]) / float(len(log_probs))

    def cross_attention_weights(self, encoder_inputs, decoder_inputs, layer_index=-1):
        raise ValueError("An ensemble has one cross-attention per member; plot a member's attention instead "
                         "(translate with one run directory).")
