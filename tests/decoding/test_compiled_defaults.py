"""The decoders' default call: compiled on TensorFlow and JAX (as `Translator` and keras-hub's `generate()`), eager on
PyTorch, and the plain function inside a caller's own compiled function; the same tokens as the eager call."""

import numpy as np
import pytest

from keras_transformer.decoding import beam_search
from keras_transformer.decoding import compiled_decoders
from keras_transformer.decoding import generate
from keras_transformer.decoding import greedy_decode
from keras_transformer.decoding import sample_decode
from tests.backend_helpers import backend
from tests.backend_helpers import compile_function
from tests.decoding.helpers import END
from tests.decoding.helpers import START
from tests.decoding.helpers import sources
from tests.decoding.helpers import tiny_model
from tests.decoding.helpers import to_numpy

DECODERS = {
    "greedy": lambda model, src, **kw: greedy_decode(model, src, 12, START, END, **kw),
    "beam": lambda model, src, **kw: beam_search(model, src, 12, START, END, beam_size=3, **kw),
    "sample": lambda model, src, **kw: sample_decode(model, src, 12, START, END, top_k=4, seed=5, **kw),
    "generate": lambda model, src, **kw: generate(model, src, 12, START, END, sampler="beam", **kw),
}


@pytest.mark.every_case  # the cases vary what the backend computes (dtypes, compilation)
@pytest.mark.parametrize("name", sorted(DECODERS))
def test_the_default_call_compiles_where_the_backend_compiles_and_decodes_as_eagerly(name):
    model = tiny_model(seed=11)
    src = sources(batch=3, length=6, seed=2)
    compiled_decoders._CACHE.pop(model, None)
    default = to_numpy(DECODERS[name](model, src))
    compiled = len(compiled_decoders._CACHE.get(model, {}))
    eager = to_numpy(DECODERS[name](model, src, jit_compile=False))
    np.testing.assert_array_equal(default, eager)
    assert compiled == (0 if backend() == "torch" else 1)
    # Again with other values of the same shape: the compiled function is reused, not rebuilt.
    DECODERS[name](model, src[::-1].copy())
    assert len(compiled_decoders._CACHE.get(model, {})) == compiled


def test_inside_a_callers_compiled_function_the_default_runs_the_plain_decoder():
    model = tiny_model(seed=11)
    src = sources(batch=2, length=5, seed=4)
    compiled_decoders._CACHE.pop(model, None)
    traced = compile_function(lambda x: greedy_decode(model, x, 10, START, END))
    tokens = to_numpy(traced(src))
    assert model not in compiled_decoders._CACHE  # the caller's compiler compiled it, no wrapper of ours
    eager = to_numpy(greedy_decode(model, src, 10, START, END, jit_compile=False))
    np.testing.assert_array_equal(tokens[:, : eager.shape[1]], eager)
    assert not tokens[:, eager.shape[1]:].any()


def test_jit_compile_takes_true_false_or_none():
    with pytest.raises(TypeError, match="`jit_compile` must be True, False or None"):
        greedy_decode(tiny_model(seed=11), sources(batch=1, length=3, seed=1), 4, START, END, jit_compile="yes")


@pytest.mark.skipif(backend() == "torch", reason="PyTorch decodes without compiling")
def test_compiled_decoders_keep_only_the_most_recently_used_settings(monkeypatch):
    """A caller asking for ever new settings (here output lengths) does not grow the cache past its bound: the
    least recently used decoder is dropped, and asked for again it is compiled again with the same output."""
    monkeypatch.setattr(compiled_decoders, "SETTINGS_KEPT", 2)
    model = tiny_model(seed=11)
    src = sources(batch=2, length=5, seed=4)
    compiled_decoders._CACHE.pop(model, None)
    first = to_numpy(greedy_decode(model, src, 6, START, END))
    for length in (7, 8):
        greedy_decode(model, src, length, START, END)
    lengths = [dict(key[-1])["max_length"] for key in compiled_decoders._CACHE[model]]
    assert lengths == [7, 8]
    np.testing.assert_array_equal(to_numpy(greedy_decode(model, src, 6, START, END)), first)
    assert [dict(key[-1])["max_length"] for key in compiled_decoders._CACHE[model]] == [8, 6]
