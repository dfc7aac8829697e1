import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from keras_transformer.data import RESERVED_TOKENS
from keras_transformer.data import ParallelCorpus
from keras_transformer.data import SubwordTokenizer
from keras_transformer.data import split_words
from keras_transformer.data import train_tokenizers

ROUND_TRIP_SENTENCES = [
    "A man in a t-shirt, smiling.",
    "Zwei Männer (rechts) gehen.",
    "It's 5 o'clock.",
    "A girl in a blue-green jacket runs!",
    "Don't stop.",
    'A girl holds a "red" hat, a "Stop" sign.',
]

TRICKY_TEXTS = [
    "A man, in a t-shirt.",
    "Zwei Männer (rechts) gehen.",
    "tabs\tand\nnew lines\r\x0bvertical\x0cfeed  double",
    "no\u00a0break\u2003em\u3000ideographic\u2028line\u2029para\x85nel",
    "ascii $5+3=8 <tag> [x] {y} a|b ~c ^d `e` @f #g %h &i *j _k \\l /m",
    "unicode «quotes» „gut“ ‘single’ — dash … ellipsis ¡hola! ¿qué? §7 ·",
    "symbols £5 °C ©2024 ±1 ×2 ÷3 €9 ¢ ¬ µ ¼",
    "cjk 中文字 mixed日本語テキスト 한국어",
    "combining e\u0301 zero\u200bwidth soft\u00adhyphen \ufeffbom",
    "control\x01chars\x1c\x1f and emoji 😀👍 here",
    "",
    "   ",
]


def fast_wordpiece_words(texts):
    """The words FastWordpiece's end-to-end pre-tokenizer finds, read from the offsets of one `[UNK]` per word.

    (A vocabulary without real pieces makes every word a single `[UNK]` spanning the whole word. Do not put a
    space in such a vocabulary: FastWordpiece then stops splitting on it.)
    """
    vocab = list(RESERVED_TOKENS) + ["zzzzzz"]
    tokenizer = tf_text.FastWordpieceTokenizer(vocab, token_out_type=tf.int32, unknown_token="[UNK]")
    _, starts, ends = tokenizer.tokenize_with_offsets(texts)
    result = []
    for text, row_starts, row_ends in zip(texts, starts.to_list(), ends.to_list()):
        data = text.encode("utf-8")
        result.append([data[start:end].decode("utf-8") for start, end in zip(row_starts, row_ends)])
    return result


def test_split_words_matches_fast_wordpiece_pretokenization():
    expected = fast_wordpiece_words(TRICKY_TEXTS)
    for text, words in zip(TRICKY_TEXTS, expected):
        assert split_words(text) == words, repr(text)


def test_reserved_ids(caption_tokenizer):
    tokenizer = caption_tokenizer
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.start_id, tokenizer.end_id) == (0, 1, 2, 3)
    assert tokenizer.vocab[:4] == ["[PAD]", "[UNK]", "[START]", "[END]"]
    assert tokenizer.vocab_size == len(tokenizer.vocab) <= 400


def test_tokenize_returns_ragged_int32_without_start_end(caption_tokenizer):
    ids = caption_tokenizer.tokenize(["A man runs.", "Kinder lachen."])
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    assert ids.shape.rank == 2 and ids.nrows() == 2
    values = ids.flat_values.numpy()
    assert not np.isin(values, [0, 2, 3]).any()


def test_case_is_preserved(caption_tokenizer):
    ids = caption_tokenizer.tokenize(["A man", "a man"])
    assert ids[0].numpy().tolist() != ids[1].numpy().tolist()


@pytest.mark.parametrize("sentence", ROUND_TRIP_SENTENCES)
def test_round_trip_restores_spacing_of_punctuation(caption_tokenizer, sentence):
    ids = caption_tokenizer.tokenize([sentence])
    assert caption_tokenizer.detokenize(ids).numpy()[0].decode("utf-8") == sentence


def test_round_trip_of_training_sentences(caption_tokenizer, caption_sentences):
    decoded = caption_tokenizer.detokenize(caption_tokenizer.tokenize(caption_sentences)).numpy()
    assert [d.decode("utf-8") for d in decoded] == caption_sentences


def test_attachment_flags_are_learned_for_punctuation_only(caption_tokenizer):
    tokenizer = caption_tokenizer
    left = {tokenizer.vocab[i] for i in np.flatnonzero(tokenizer.attach_left)}
    right = {tokenizer.vocab[i] for i in np.flatnonzero(tokenizer.attach_right)}
    assert {".", ",", ")", "-", "'", "!"} <= left
    assert {"(", "-", "'"} <= right
    assert ")" not in right and "(" not in left
    assert [tokenizer.vocab[i] for i in np.flatnonzero(tokenizer.paired)] == ['"']
    # Words never glue: "street." is frequent, yet "street" must keep its space before the next word.
    assert all(len(token) == 1 for token in left | right)


def test_detokenize_drops_start_end_and_padding(caption_tokenizer):
    tokenizer = caption_tokenizer
    ids = tokenizer.tokenize(["A man runs.", "(rechts) gehen."]).to_tensor()
    batch = ids.shape[0]
    wrapped = tf.concat(
        [
            tf.fill([batch, 1], tokenizer.start_id),
            ids,
            tf.fill([batch, 1], tokenizer.end_id),
            tf.zeros([batch, 4], tf.int32),
        ],
        axis=1,
    )
    assert tokenizer.detokenize(wrapped).numpy().tolist() == [b"A man runs.", b"(rechts) gehen."]


def test_detokenize_never_glues_the_first_token(caption_tokenizer):
    tokenizer = caption_tokenizer
    ids = [[tokenizer.start_id] + tokenizer.tokenize([". A man"]).to_list()[0]]
    assert tokenizer.detokenize(ids).numpy()[0] == b". A man"


def test_detokenize_accepts_ragged_rank1_and_int64(caption_tokenizer):
    tokenizer = caption_tokenizer
    ragged = tokenizer.tokenize(["It's 5 o'clock.", "Don't stop."])
    assert tokenizer.detokenize(ragged).numpy().tolist() == [b"It's 5 o'clock.", b"Don't stop."]
    assert tokenizer.detokenize(tf.cast(ragged[0], tf.int64)).numpy() == b"It's 5 o'clock."
    assert tokenizer.detokenize(tf.zeros([2, 0], tf.int32)).numpy().tolist() == [b"", b""]


def test_detokenize_in_tf_function_with_static_shape(caption_tokenizer):
    tokenizer = caption_tokenizer
    ids = tokenizer.tokenize(["A man in a t-shirt, smiling.", "It's 5 o'clock."]).to_tensor(shape=[2, 16])

    @tf.function(input_signature=[tf.TensorSpec([2, 16], tf.int32)])
    def detokenize(ids):
        return tokenizer.detokenize(ids)

    assert detokenize(ids).numpy().tolist() == [b"A man in a t-shirt, smiling.", b"It's 5 o'clock."]


def test_save_and_load_round_trip(caption_tokenizer, tmp_path):
    caption_tokenizer.save(tmp_path / "tok")
    assert sorted(p.name for p in (tmp_path / "tok").iterdir()) == ["tokenizer.json", "vocab.txt"]
    loaded = SubwordTokenizer.load(tmp_path / "tok")
    assert loaded.vocab == caption_tokenizer.vocab
    np.testing.assert_array_equal(loaded.attach_left, caption_tokenizer.attach_left)
    np.testing.assert_array_equal(loaded.attach_right, caption_tokenizer.attach_right)
    np.testing.assert_array_equal(loaded.paired, caption_tokenizer.paired)
    texts = ROUND_TRIP_SENTENCES + ["unseen Wörter here"]
    original = caption_tokenizer.tokenize(texts)
    assert loaded.tokenize(texts).to_list() == original.to_list()
    assert loaded.detokenize(original).numpy().tolist() == caption_tokenizer.detokenize(original).numpy().tolist()


def test_load_rejects_wrong_reserved_token_naming_file_and_line(caption_tokenizer, tmp_path):
    caption_tokenizer.save(tmp_path)
    vocab = (tmp_path / "vocab.txt").read_text(encoding="utf-8").split("\n")
    vocab[2] = "[BOS]"
    (tmp_path / "vocab.txt").write_text("\n".join(vocab), encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab\.txt:3: expected the reserved token \[START\]"):
        SubwordTokenizer.load(tmp_path)


def test_load_rejects_size_mismatch(caption_tokenizer, tmp_path):
    caption_tokenizer.save(tmp_path)
    config = json.loads((tmp_path / "tokenizer.json").read_text())
    config["vocab_size"] += 1
    (tmp_path / "tokenizer.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"vocab\.txt:\d+: expected \d+ tokens"):
        SubwordTokenizer.load(tmp_path)


def test_vocabulary_must_start_with_reserved_tokens():
    with pytest.raises(ValueError, match="reserved tokens"):
        SubwordTokenizer(["a", "b"])


def test_shared_tokenizer_covers_both_languages():
    corpus = ParallelCorpus(["Ein Hund läuft.", "Zwei Männer gehen."] * 20, ["A dog runs.", "Two men walk."] * 20)
    source, target = train_tokenizers(corpus, vocab_size=200, shared=True, verbose=0, lower_thresh=2)
    assert source is target
    for text in ["Ein Hund läuft.", "Two men walk."]:
        ids = source.tokenize([text])
        assert source.unk_id not in ids.flat_values.numpy()
        assert source.detokenize(ids).numpy()[0].decode("utf-8") == text
    separate_source, separate_target = train_tokenizers(corpus, vocab_size=200, verbose=0, lower_thresh=2)
    assert separate_source.vocab != separate_target.vocab


@pytest.mark.filterwarnings("ignore:.*tf.lite.Interpreter is deprecated")
def test_tokenizer_in_saved_model_and_tflite(caption_tokenizer, tmp_path):
    tokenizer = caption_tokenizer

    class Echo(tf.Module):
        def __init__(self):
            super().__init__()
            self.tokenizer = tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, text):
            ids = self.tokenizer.tokenize(text).to_tensor()
            rows = tf.shape(ids)[0]
            ids = tf.concat([tf.fill([rows, 1], 2), ids, tf.fill([rows, 1], 3), tf.zeros([rows, 3], tf.int32)], 1)
            return {"translation": self.tokenizer.detokenize(ids)}

    module = Echo()
    tf.saved_model.save(module, str(tmp_path / "saved"), signatures={"serving_default": module.serve})
    texts = np.array(["A man in a t-shirt, smiling.", 'Zwei Männer (rechts) mit "Stop" gehen.'], dtype=object)
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    saved_out = loaded.signatures["serving_default"](text=tf.constant(texts))["translation"].numpy()
    assert [s.decode("utf-8") for s in saved_out] == list(texts)

    from tensorflow.lite.python.interpreter import InterpreterWithCustomOps
    from tensorflow_text import tflite_registrar

    converter = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "saved"))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = True
    interpreter = InterpreterWithCustomOps(
        model_content=converter.convert(), custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS
    )
    runner = interpreter.get_signature_runner("serving_default")
    for text in texts:
        assert runner(text=np.array([text]))["translation"].tolist() == [text.encode("utf-8")]
