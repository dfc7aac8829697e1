"""Many sentences through a `SlotEngine`: what `Translator.translate` runs for more sentences than one batch.

Sorted batches decode each batch until its longest sentence ends, every finished row paying for the steps after
its end. In the engine a sentence that ends leaves its slot at once and the next one (in length order) takes it,
with the tokens the whole-loop decoder gives it. The engine is kept on the translator per decoding setting, so
later calls reuse its compiled programs.
"""

import json

import keras
import numpy as np

from keras_transformer.decoding.beam_slot_engine import BeamSlotEngine
from keras_transformer.decoding.lru import LRUCache
from keras_transformer.decoding.samplers import BeamSampler
from keras_transformer.decoding.samplers import GreedySampler
from keras_transformer.decoding.slot_engine import SlotEngine
from keras_transformer.models import EnsembleParts

ENGINES_KEPT = 4  # engines (each with its caches and compiled steps) kept per translator, most recently used
STEPS_PER_CALL = 8  # offline every slot is busy, so a call can run several tokens (measured best of 1, 4, 8)


def uses_slots(translator, sampler, count, batch_size):
    """Whether `translate` decodes `count` sentences in a `SlotEngine`: more than one batch of them, greedy or beam
    search (sampling draws its random numbers per batch), one model, a compiled backend (TensorFlow's XLA, JAX)."""
    return (count > batch_size and isinstance(sampler, (GreedySampler, BeamSampler)) and translator.jit_compile
            and not isinstance(translator.parts, EnsembleParts) and keras.backend.backend() != "torch")


def engine_for(translator, sampler, slots, max_length):
    """The translator's engine for these settings, made on first use and kept (`fixed_weights=False`: a model
    still training gets its weights read again when the engine resumes)."""
    engines = translator.__dict__.get("_slot_engines")
    if engines is None:
        engines = translator.__dict__["_slot_engines"] = LRUCache(ENGINES_KEPT)
    key = (type(sampler).__name__, json.dumps(sampler.get_config(), sort_keys=True, default=str), slots, max_length)
    kind = BeamSlotEngine if isinstance(sampler, BeamSampler) else SlotEngine
    target = translator.target_tokenizer
    return engines.get(key, lambda: kind(translator.model, max_length, target.start_id, target.end_id, slots=slots,
                                         sampler=sampler, steps_per_call=STEPS_PER_CALL))


def decode_in_slots(engine, sources, on_done=None):
    """The output tokens of each source row (int32 `[N, max_length]`, 0 after the end), decoded in `engine`:
    all submitted at once in the given order, taken into slots as others end. `on_done(n)` after each step in
    which n ended. A failure leaves the engine empty for the next call."""
    requests = [engine.submit(row) for row in sources]
    try:
        while not engine.idle:
            finished = engine.step()
            if on_done is not None and finished:
                on_done(len(finished))
    except BaseException:
        for request in requests:
            engine.cancel(request)
        raise
    tokens = np.zeros((len(requests), engine.max_length), "int32")
    for row, request in enumerate(requests):
        tokens[row, : len(request.tokens)] = request.tokens
    return tokens
