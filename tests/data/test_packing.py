"""One source packer: `[START] ids[:n - 2] [END]`, 0-padded, the same for training, the translator and export."""

import inspect

import numpy as np
import tensorflow as tf

from keras_transformer.data.packing import pack_rows
from keras_transformer.data.packing import pack_sources


def test_packs_truncates_and_flags_empty_rows():
    ids, has_tokens = pack_sources(tf.ragged.constant([[7, 8, 9, 10, 11], [], [5]]), 2, 3, max_length=5)
    assert ids.numpy().tolist() == [[2, 7, 8, 9, 3], [2, 3, 0, 0, 0], [2, 5, 3, 0, 0]]
    assert has_tokens.numpy().tolist() == [True, False, True]
    np.testing.assert_array_equal(pack_rows([[7, 8, 9, 10, 11], [], [5]], 2, 3, 5), ids.numpy())
    assert pack_rows([], 2, 3, 5).shape == (0, 2)


def test_without_a_start_id_rows_are_ids_then_end():
    ids, has_tokens = pack_sources(tf.ragged.constant([[7, 8, 9, 10, 11], [], [5]]), None, 3, max_length=5)
    assert ids.numpy().tolist() == [[7, 8, 9, 10, 3], [3, 0, 0, 0, 0], [5, 3, 0, 0, 0]]
    assert has_tokens.numpy().tolist() == [True, False, True]
    np.testing.assert_array_equal(pack_rows([[7, 8, 9, 10, 11], [], [5]], None, 3, 5), ids.numpy())
    assert pack_rows([], None, 3, 5).shape == (0, 1)


def test_training_the_translator_and_the_export_all_use_it():
    from keras_transformer.data import pipeline
    from keras_transformer.decoding import translator
    from keras_transformer.export import translator_module

    assert "pack_sources(" in inspect.getsource(pipeline._tokenize)
    assert "pack_rows(" in inspect.getsource(translator.pad_source_rows)
    assert "pack_sources(" in inspect.getsource(translator_module.TranslatorModule.encode_text)


def test_the_numpy_packer_gives_the_graph_packers_ids_on_random_rows():
    rng = np.random.default_rng(0)
    for trial in range(30):
        rows = [list(rng.integers(4, 50, rng.integers(0, 12))) for _ in range(rng.integers(1, 6))]
        max_length = int(rng.integers(3, 14))
        start = None if trial % 3 == 0 else 1
        ids, _ = pack_sources(tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1) if any(rows) else
                              tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), [0] * len(rows)),
                              start, 2, max_length)
        np.testing.assert_array_equal(pack_rows(rows, start, 2, max_length), ids.numpy())
