"""The decoders trace into graphs that export (SavedModel, TFLite), and under `jax.jit` on the JAX backend."""


import keras
import numpy as np
import pytest

from keras_transformer.decoding import beam_search_with_parts
from keras_transformer.decoding import greedy_search
from keras_transformer.decoding import sample_with_parts
from keras_transformer.models import TransformerParts
from tests.decoding.helpers import END
from tests.decoding.helpers import START
from tests.decoding.helpers import VARIANTS
from tests.decoding.helpers import sources
from tests.decoding.helpers import tiny_model
from tests.decoding.helpers import to_numpy


@pytest.mark.tensorflow_only
def test_signature_functions_match_eager_and_keep_weights_and_tflite_gaps_out_of_the_loop():
    """With input signature `[None, None]` (as an exporter traces them), each decoder runs, gives
    the eager tokens at full width, reads its weights once before the loop (TFLite's converter
    cannot freeze variable reads inside a loop body), and uses no op TFLite lacks as a builtin
    (Keras' TensorFlow `argmax` adds `BitwiseAnd`)."""
    import tensorflow as tf

    parts = TransformerParts.from_model(tiny_model(**VARIANTS["pre-norm-shared-tied"]))
    src = sources()
    uniforms = np.full((len(src), 5), 0.5, "float32")
    decoders = {
        "greedy": lambda ids: greedy_search(parts, ids, 5, START, END),
        "beam": lambda ids: beam_search_with_parts(parts, ids, 5, START, END, beam_size=2)[0],
        "sample": lambda ids: sample_with_parts(
            parts, ids, 5, START, END, top_p=0.9, uniforms=tf.fill([tf.shape(ids)[0], 5], 0.5)
        ),
    }
    eager = {
        "greedy": greedy_search(parts, src, 5, START, END),
        "beam": beam_search_with_parts(parts, src, 5, START, END, beam_size=2)[0],
        "sample": sample_with_parts(parts, src, 5, START, END, top_p=0.9, uniforms=uniforms),
    }
    signature = [tf.TensorSpec([None, None], tf.int32)]
    for name, decode in decoders.items():
        concrete = tf.function(decode, input_signature=signature).get_concrete_function()
        np.testing.assert_array_equal(to_numpy(concrete(tf.constant(src))), to_numpy(eager[name]), err_msg=name)
        graph = concrete.graph.as_graph_def()
        bodies = [f for f in graph.library.function if "while_body" in f.signature.name]
        loop_ops = {node.op for body in bodies for node in body.node_def}
        assert bodies and "ReadVariableOp" not in loop_ops, name
        assert not loop_ops & {"BitwiseAnd", "Bitcast"}, name


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="checks jax.jit of the decoders (the JAX pass)")
def test_decoders_agree_and_trace_under_jax_jit():
    import jax

    from keras_transformer import build_transformer
    from keras_transformer.decoding import beam_search
    from keras_transformer.decoding import greedy_decode
    from keras_transformer.decoding import sample_decode

    model = build_transformer(40, 40, num_layers=2, d_model=32, num_heads=4, d_ff=64, norm_first=True,
                              share_embeddings=True, tie_output=True)
    src = np.array([[5, 6, 7, 8], [9, 10, 0, 0]], "int32")
    greedy = np.asarray(greedy_decode(model, src, 6, 1, 2))
    np.testing.assert_array_equal(np.asarray(beam_search(model, src, 6, 1, 2, beam_size=1)), greedy)
    np.testing.assert_array_equal(np.asarray(sample_decode(model, src, 6, 1, 2, top_k=1, seed=0)), greedy)
    parts = TransformerParts.from_model(model)
    jitted = jax.jit(lambda ids: greedy_search(parts, ids, 6, 1, 2))(src)
    np.testing.assert_array_equal(np.asarray(jitted)[:, : greedy.shape[1]], greedy)
    tokens, scores = beam_search(model, src, 6, 1, 2, beam_size=3, return_scores=True, jit_compile=True)
    assert tokens.shape[0] == 2 and scores.shape == (2,)
