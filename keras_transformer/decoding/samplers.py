"""Decoding strategies as small objects behind one entry point, after keras-hub's samplers.

`generate(model, encoder_inputs, max_length, start_id, end_id, sampler="greedy")` runs any of them and always
returns the same thing: int32 token ids `[batch, length]`, the tokens after `start_id`, padded with 0 after
`end_id` (`length <= max_length`). A sampler is a name (`"greedy"`, `"beam"`, `"top_k"`, `"top_p"`, `"random"`), a
config dict (`{"class_name": "BeamSampler", "config": {"num_beams": 4}}`) or an object:

* `GreedySampler(force_end=False)`: the most likely token at each step.
* `BeamSampler(num_beams=4, length_penalty=0.6, length_penalty_rule="gnmt", force_end=False)`: beam search with
  the GNMT length penalty (the paper's decoding), or transformers' rule (`length_penalty_rule="transformers"`).
  `force_end=True` ends every row at the last position, as transformers' `forced_eos_token_id` does.
* `TopKSampler(k=5, temperature=1.0, seed=None)`: draws among the k most likely tokens.
* `TopPSampler(p=0.9, k=None, temperature=1.0, seed=None)`: nucleus sampling.
* `RandomSampler(temperature=1.0, seed=None)`: draws from the whole distribution.

All of them use the key/value-cached decoders of this package (`greedy`, `beam_search`, `sampling`) through
`sampler.decode(model, encoder_inputs, max_length, start_id, end_id)`, keep static shapes and run compiled (the
default on TensorFlow and JAX) or eagerly (`jit_compile=False`).

Each is also a subclass of the matching `keras_hub.samplers` class, registered with Keras (package
`"keras_transformer"`): `keras_hub.samplers.serialize`/`deserialize` round-trip them, and a keras-hub model's
`compile(sampler=...)` takes them. Called as keras-hub samplers (`sampler(next, prompt, ...)`, one step function
over a prompt), greedy, random, top-k and top-p sampling mean the same; `BeamSampler` runs there only without a
length penalty, and `force_end` only in `decode`.

Example:

>>> from keras_transformer.models import build_transformer
>>> model = build_transformer(50, 50, num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout=0.0)
>>> sources = [[5, 6, 7, 3]]
>>> [generate(model, sources, 6, start_id=2, end_id=3, sampler=s).shape[0] for s in ("greedy", "beam", "top_k")]
[1, 1, 1]
>>> get_sampler({"class_name": "BeamSampler", "config": {"num_beams": 2}}).get_config()
{'num_beams': 2, 'length_penalty': 0.6, 'length_penalty_rule': 'gnmt', 'force_end': False}
"""

import keras
import keras_hub

from keras_transformer.decoding import arguments
from keras_transformer.decoding.beam_search import beam_search
from keras_transformer.decoding.beam_search import check_length_penalty_rule
from keras_transformer.decoding.greedy import greedy_decode
from keras_transformer.decoding.sampling import sample_decode

_register = keras.saving.register_keras_serializable(package="keras_transformer")


class Sampler(keras_hub.samplers.Sampler):
    """A decoding strategy, and a `keras_hub.samplers.Sampler`.

    `sampler.decode(model, encoder_inputs, max_length, start_id, end_id)` -> int32 `[B, L]` runs this package's
    key/value-cached decoders over a whole model; `sampler(next, prompt, ...)` is keras-hub's step protocol (what
    `keras_hub.models.Seq2SeqLM.generate()` calls).
    """

    def decode(self, model, encoder_inputs, max_length, start_id, end_id, jit_compile=None):
        raise NotImplementedError

    def __call__(self, next, prompt, *args, **kwargs):
        if isinstance(next, keras.Model) or hasattr(next, "decode_step"):
            raise TypeError(f"{type(self).__name__}(next, prompt, ...) is keras-hub's step protocol; decode a model "
                            "with sampler.decode(model, encoder_inputs, max_length, start_id, end_id)")
        return super().__call__(next, prompt, *args, **kwargs)

    def get_config(self):
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        arguments = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({arguments})"


def _refuse_forced_end(sampler):
    if sampler.force_end:
        raise ValueError(f"{type(sampler).__name__}(force_end=True) ends rows in keras_transformer's decoders only "
                         "(sampler.decode, or a keras_transformer.TransformerSeq2SeqLM)")


@_register
class GreedySampler(Sampler, keras_hub.samplers.GreedySampler):
    """The most likely next token at each step (`greedy_decode`); a `keras_hub.samplers.GreedySampler`.

    Args:
        force_end: a row that reaches the last position ends there (transformers' `forced_eos_token_id`); `decode`
            only.
    """

    def __init__(self, force_end=False):
        super().__init__()
        self.force_end = bool(force_end)

    def decode(self, model, encoder_inputs, max_length, start_id, end_id, jit_compile=None):
        return greedy_decode(model, encoder_inputs, max_length, start_id, end_id, jit_compile=jit_compile,
                             force_end=self.force_end)

    def __call__(self, next, prompt, *args, **kwargs):
        _refuse_forced_end(self)
        return super().__call__(next, prompt, *args, **kwargs)

    def get_config(self):
        return {"force_end": self.force_end}


@_register
class BeamSampler(Sampler, keras_hub.samplers.BeamSampler):
    """Beam search with a length penalty (`beam_search`); the best hypothesis per row.

    A `keras_hub.samplers.BeamSampler`, but keras-hub's step protocol (`sampler(next, prompt, ...)`) has no length
    penalty: it runs only with `length_penalty=0` (keras-hub's beam search then); with a penalty, decode through
    `decode` (or a `keras_transformer.TransformerSeq2SeqLM`), and use `keras_hub.samplers.BeamSampler` with other
    keras-hub models.

    Args:
        num_beams: hypotheses kept alive per row (the paper uses 4).
        length_penalty: the length penalty's exponent: GNMT's alpha (0.6 in the paper), or transformers'
            `length_penalty` (1.0 there) with `length_penalty_rule="transformers"`.
        length_penalty_rule: `"gnmt"` or `"transformers"` (transformers' beam search, e.g. for imported Marian
            checkpoints); see `beam_search`.
        force_end: at the last position only the end token may come (transformers' `forced_eos_token_id`).
    """

    def __init__(self, num_beams=4, length_penalty=0.6, length_penalty_rule="gnmt", force_end=False):
        super().__init__(num_beams=num_beams)
        self.length_penalty = length_penalty
        self.length_penalty_rule = check_length_penalty_rule(length_penalty_rule)
        self.force_end = bool(force_end)

    def decode(self, model, encoder_inputs, max_length, start_id, end_id, jit_compile=None):
        return beam_search(model, encoder_inputs, max_length, start_id, end_id, beam_size=self.num_beams,
                           length_penalty=self.length_penalty, jit_compile=jit_compile,
                           length_penalty_rule=self.length_penalty_rule, force_end=self.force_end)

    def __call__(self, next, prompt, *args, **kwargs):
        if self.length_penalty != 0:
            raise ValueError("this BeamSampler's length penalty runs in keras_transformer's decoders (sampler.decode, "
                             "or a keras_transformer.TransformerSeq2SeqLM); use keras_hub.samplers.BeamSampler with "
                             "other keras-hub models")
        _refuse_forced_end(self)
        return super().__call__(next, prompt, *args, **kwargs)

    def get_config(self):
        return {"num_beams": self.num_beams, "length_penalty": self.length_penalty,
                "length_penalty_rule": self.length_penalty_rule, "force_end": self.force_end}


def _check_seed(seed):
    if seed is None:
        return None
    if not arguments.is_int(seed):
        raise TypeError(f"`seed` must be a Python int or None; got {seed!r} of type {type(seed).__name__}.")
    return int(seed)


class StochasticSampler(Sampler):
    """A sampler that draws tokens (`RandomSampler`, `TopKSampler`, `TopPSampler`): `decode` runs `sample_decode`
    with the sampler's temperature, filters and seed (an int: the same seed, inputs and model give the same
    tokens; `None`: a fresh seed at each call). keras-hub's step protocol draws from the sampler's
    `keras.random.SeedGenerator` instead."""

    def _filters(self):
        return {}

    def decode(self, model, encoder_inputs, max_length, start_id, end_id, jit_compile=None):
        return sample_decode(model, encoder_inputs, max_length, start_id, end_id, temperature=self.temperature,
                             seed=self.seed, jit_compile=jit_compile, **self._filters())


@_register
class RandomSampler(StochasticSampler, keras_hub.samplers.RandomSampler):
    """Draws the next token from the model's distribution, divided by `temperature` (`sample_decode`); a
    `keras_hub.samplers.RandomSampler`.

    Args:
        temperature: > 0; below 1 sharpens, above 1 flattens the distribution.
        seed: an int for reproducible draws (the same seed, inputs and model give the same tokens).
    """

    def __init__(self, temperature=1.0, seed=None):
        super().__init__(seed=_check_seed(seed), temperature=temperature)

    def get_config(self):
        return {"temperature": self.temperature, "seed": self.seed}


@_register
class TopKSampler(StochasticSampler, keras_hub.samplers.TopKSampler):
    """Draws among the `k` most likely tokens; a `keras_hub.samplers.TopKSampler`."""

    def __init__(self, k=5, temperature=1.0, seed=None):
        super().__init__(k=k, seed=_check_seed(seed), temperature=temperature)

    def _filters(self):
        return {"top_k": self.k}

    def get_config(self):
        return {"k": self.k, "temperature": self.temperature, "seed": self.seed}


@_register
class TopPSampler(StochasticSampler, keras_hub.samplers.TopPSampler):
    """Nucleus sampling: draws among the fewest most likely tokens whose probability reaches `p` (after the `k`
    most likely ones, if `k` is given); a `keras_hub.samplers.TopPSampler`."""

    def __init__(self, p=0.9, k=None, temperature=1.0, seed=None):
        super().__init__(p=p, k=k, seed=_check_seed(seed), temperature=temperature)

    def _filters(self):
        return {"top_p": self.p, "top_k": self.k}

    def get_config(self):
        return {"p": self.p, "k": self.k, "temperature": self.temperature, "seed": self.seed}


SAMPLERS = {
    "greedy": GreedySampler,
    "beam": BeamSampler,
    "random": RandomSampler,
    "top_k": TopKSampler,
    "top_p": TopPSampler,
}


def get_sampler(identifier):
    """A `Sampler` from a name, a `{"class_name": ..., "config": {...}}` dict (also as `keras_hub.samplers.serialize`
    writes one of these samplers), or a `Sampler` of this module (returned as is).

    Raises:
        ValueError: an unknown name or class, naming the known ones.
    """
    if isinstance(identifier, Sampler):
        return identifier
    classes = {cls.__name__: cls for cls in SAMPLERS.values()}
    if isinstance(identifier, str) and identifier in SAMPLERS:
        return SAMPLERS[identifier]()
    if isinstance(identifier, dict) and identifier.get("class_name") in classes:
        name = identifier["class_name"]
        ours = f"keras_transformer>{name}"  # not another package's class of that name
        if identifier.get("registered_name", ours) == ours:
            return classes[name].from_config(identifier.get("config", {}))
    raise ValueError(f"unknown sampler {identifier!r}: expected one of {', '.join(map(repr, SAMPLERS))}, a "
                     f"{{'class_name': ..., 'config': ...}} dict with a class among {', '.join(classes)}, or a "
                     "keras_transformer.decoding.samplers.Sampler")


def serialize_sampler(sampler):
    """The dict `get_sampler` takes back: `{"class_name": ..., "config": {...}}`."""
    sampler = get_sampler(sampler)
    return {"class_name": type(sampler).__name__, "config": sampler.get_config()}


def generate(model, encoder_inputs, max_length, start_id, end_id, sampler="greedy", jit_compile=None):
    """Decodes with any sampler; int32 `[batch, length]` tokens after `start_id`, 0-padded after `end_id`.

    Args:
        model: a model from `build_transformer` (or loaded back), or its `TransformerParts`.
        encoder_inputs: int `[batch, source_length]` source ids (0 = padding).
        max_length: most tokens to generate per row (`end_id` included).
        start_id: the target vocabulary's `[START]` id.
        end_id: the target vocabulary's `[END]` id.
        sampler: see `get_sampler`.
        jit_compile: `None` (default) compiles the decoding loop with XLA for eager calls on TensorFlow and JAX
            (see `greedy_decode`); `True` always, `False` never.

    `greedy_decode` and `beam_search` are this function with `"greedy"` and a `BeamSampler`.

    Example:

    >>> import numpy as np
    >>> from keras_transformer import build_transformer
    >>> model = build_transformer(50, 50, num_layers=1, d_model=16, num_heads=2, d_ff=32)
    >>> sources = np.array([[5, 6, 7, 0]])
    >>> tokens = generate(model, sources, max_length=8, start_id=1, end_id=2, sampler=BeamSampler(num_beams=2))
    >>> tokens.shape[0], tokens.shape[1] <= 8
    (1, True)
    """
    return get_sampler(sampler).decode(model, encoder_inputs, max_length, start_id, end_id, jit_compile=jit_compile)
