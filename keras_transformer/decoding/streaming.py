"""Streaming decoding: one translation yielded piece by piece as its tokens are chosen."""

import keras
import numpy as np

from keras_transformer.decoding import loop_ops
from keras_transformer.decoding.samplers import StochasticSampler
from keras_transformer.decoding.sampling import draw_uniforms
from keras_transformer.decoding.sampling import sampling_choice


def stream_translation(parts, source_ids, start, end, max_length, sampler, detokenize):
    """One translation in pieces (`Translator.stream`): greedy or sampling (`sampler`), one step per token with
    key/value caches, a piece yielded once its words can no longer change (text up to a space), the rest at the
    end.

    Args:
        parts: `TransformerParts` (or `EnsembleParts`).
        source_ids: int32 `[1, S]`, the packed source.
        start, end: the target start and end ids.
        max_length: most output tokens.
        sampler: a `GreedySampler`, or a `StochasticSampler` (`RandomSampler`, `TopKSampler`, `TopPSampler`: its
            seed, temperature and filters).
        detokenize: int32 `[1, L]` token rows -> a list with their text.
    """
    ops = keras.ops
    parts = parts.with_loop_invariants()
    encoded, padding_mask = parts.encode(source_ids)
    cross_caches = parts.cross_attention_caches(encoded)
    caches = parts.empty_self_attention_caches(1, max_length)
    bias = loop_ops.padding_bias(parts.vocab_size, start)
    if isinstance(sampler, StochasticSampler):
        choose = sampling_choice(parts.vocab_size, draw_uniforms(1, max_length, sampler.seed), sampler.temperature,
                              **sampler._filters())
    else:
        def choose(logits, step):
            return loop_ops.first_argmax(logits)

    def chosen():
        nonlocal caches
        last = start
        for step in range(max_length):
            logits, caches = parts.decode_step(np.array([[last]], dtype="int32"), step, caches, cross_caches,
                                               padding_mask)
            last = int(ops.convert_to_numpy(choose(logits[:, 0] + bias, step))[0])
            if getattr(sampler, "force_end", False) and step == max_length - 1:
                last = end
            if last == end:
                return
            yield [last]

    yield from text_pieces(chosen(), detokenize)


def text_pieces(new_tokens, detokenize):
    """The text of tokens decided a few at a time, in pieces: `new_tokens` yields lists of new ids (the end id
    left out); a piece is yielded once the words in it can no longer change (text up to a space), the rest at the
    end. `detokenize`: int32 `[1, L]` -> a list with its text."""
    tokens, emitted = [], ""
    for new in new_tokens:
        tokens.extend(new)
        decided = detokenize(np.array([tokens], dtype="int32"))[0]
        decided = decided[: decided.rfind(" ") + 1]  # the last word may still grow
        if len(decided) > len(emitted) and decided.startswith(emitted):
            yield decided[len(emitted):]
            emitted = decided
    final = detokenize(np.array([tokens], dtype="int32"))[0] if tokens else ""
    if final.startswith(emitted) and len(final) > len(emitted):
        yield final[len(emitted):]
