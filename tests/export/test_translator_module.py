import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import beam_search
from keras_transformer.decoding.translator import encode_sources
from keras_transformer.export import TranslatorModule
from keras_transformer.export.translator_module import FORMAT
from tests.export.helpers import BAD_INPUTS
from tests.export.helpers import SENTENCES


def test_source_ids_follow_the_training_layout(run):
    module = TranslatorModule.from_run(run)
    texts = SENTENCES + BAD_INPUTS
    ids, has_tokens = module.encode_text(tf.constant([t.encode("utf-8") if isinstance(t, str) else t for t in texts]))
    ids = ids.numpy()
    expected = encode_sources(run.source_tokenizer, [t.decode("utf-8", "replace") if isinstance(t, bytes) else t
                                                     for t in texts], run.model_config.max_length)
    width = ids.shape[1]
    assert width == run.model_config.max_length  # the long input is truncated to the model's length
    for row, (got, want, text) in enumerate(zip(ids, expected, texts)):
        if isinstance(text, bytes):  # the graph sees the raw bytes, `encode_sources` the replaced text
            assert got[0] == run.source_tokenizer.start_id and run.source_tokenizer.end_id in got
            continue
        np.testing.assert_array_equal(got, np.pad(want, (0, max(0, width - len(want))))[:width], err_msg=text)
    assert has_tokens.numpy().tolist() == [bool(t.strip()) for t in texts[:-1]] + [True]


def test_settings_are_checked_and_kept(run):
    module = TranslatorModule.from_run(run, max_length=12, beam_size=3, length_penalty=0.0)
    config = module.get_config()
    assert (config["max_length"], config["beam_size"], config["extra_beam_size"]) == (12, 3, 3)
    assert config["format"] == FORMAT and int(module.max_length.numpy()) == 12
    assert TranslatorModule.from_run(run).get_config()["extra_beam_size"] == 4
    with pytest.raises(ValueError, match="beam_size"):
        TranslatorModule.from_run(run, beam_size=0)
    with pytest.raises(ValueError, match="tokenizers the model was trained with"):
        TranslatorModule(run.model, run.target_tokenizer, run.target_tokenizer)


def test_buckets_bound_the_compiled_shapes_and_keep_every_row(run):
    module = TranslatorModule.from_run(run)
    source_max_length = run.model_config.max_length
    for batch, width, expected in [(1, 3, (1, 8)), (3, 9, (4, 16)), (5, 16, (8, 16)), (9, 2, (16, 8)),
                                   (17, source_max_length - 1, (24, source_max_length)), (0, 2, (0, 8))]:
        ids = tf.reshape(tf.range(1, batch * width + 1, dtype=tf.int32), [batch, width])
        padded = module.pad_to_buckets(ids).numpy()
        assert padded.shape == expected, (batch, width)
        np.testing.assert_array_equal(padded[:batch, :width], ids.numpy())
        assert not padded[:, width:].any()  # extra columns are padding
        for row in padded[batch:]:  # extra rows repeat the first one
            np.testing.assert_array_equal(row, padded[0])


def test_compiled_and_graph_decoding_agree(run):
    compiled = TranslatorModule.from_run(run, max_length=16)
    graph = TranslatorModule.from_run(run, max_length=16, jit_compile=False)
    assert compiled.get_config()["jit_compile"] and not graph.get_config()["jit_compile"]
    texts = tf.constant([t.encode("utf-8") for t in SENTENCES * 2][:5] + [b"", b"\xff"])  # 7 rows: padded to 8
    for beam_size in (1, 3):
        a, a_ids, a_scores = compiled.run(texts, beam_size, with_scores=True)
        b, b_ids, b_scores = graph.run(texts, beam_size, with_scores=True)
        assert a.numpy().tolist() == b.numpy().tolist()
        np.testing.assert_array_equal(a_ids.numpy(), b_ids.numpy())
        np.testing.assert_allclose(a_scores.numpy(), b_scores.numpy(), rtol=1e-4, atol=1e-4)
        assert a_ids.shape == (7, 16) and a_scores.shape == (7,)


def test_the_length_penalty_rule_is_fixed_at_export(run):
    texts = tf.constant([t.encode("utf-8") for t in SENTENCES[:3]])
    start, end = run.target_tokenizer.start_id, run.target_tokenizer.end_id
    modules = {rule: TranslatorModule.from_run(run, max_length=10, beam_size=3, length_penalty=1.0,
                                               length_penalty_rule=rule, jit_compile=False)
               for rule in ("gnmt", "transformers")}
    module = modules["transformers"]
    assert module.get_config()["length_penalty_rule"] == "transformers"
    assert module.length_penalty_rule.numpy() == b"transformers"
    _, tokens, scores = module.run(texts, 3, with_scores=True)
    source_ids, _ = module.encode_text(texts)
    want_tokens, want_scores = beam_search(run.model, source_ids.numpy(), 10, start, end, beam_size=3,
                                           length_penalty=1.0, return_scores=True, length_penalty_rule="transformers")
    want_tokens = np.asarray(want_tokens)
    np.testing.assert_array_equal(tokens.numpy(), np.pad(want_tokens, ((0, 0), (0, 10 - want_tokens.shape[1]))))
    np.testing.assert_allclose(scores.numpy(), np.asarray(want_scores), rtol=1e-5, atol=1e-5)
    # `score()` (greedy outputs' scores) follows the same rule: the beam's outputs score as the beam scored them.
    np.testing.assert_allclose(module.score(source_ids, tokens).numpy(), scores.numpy(), rtol=1e-4, atol=1e-4)
    assert not np.allclose(modules["gnmt"].score(source_ids, tokens).numpy(), scores.numpy(), rtol=1e-3)
    with pytest.raises(ValueError, match="length_penalty_rule"):
        TranslatorModule.from_run(run, length_penalty_rule="hf")
