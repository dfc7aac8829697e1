"""Property-based tests (hypothesis) for the parts of the library that take arbitrary input.

Properties, with the number of examples each runs (`MAX_EXAMPLES`):

* `test_tokenizer_round_trip_of_space_separated_words` (150): a sentence of words made of the tokenizer's
  alphabet (letters, digits; no punctuation, no `[UNK]`), joined by single ASCII spaces, detokenizes back to itself.
* `test_tokenizer_round_trip_of_corpus_sentences` (60): sentences of the training distribution (the synthetic
  corpus and the caption generator for any seed, most of them never seen in training) round-trip exactly,
  punctuation included (the learned `attach_left`/`attach_right`/`paired` flags).
* `test_tokenize_detokenize_tokenize_is_stable` (150): for any text over the alphabet, punctuation and whitespace
  whose tokenization has no `[UNK]`, `tokenize(detokenize(tokenize(s))) == tokenize(s)`.
* `test_tokenize_arbitrary_unicode` (100): any batch of Unicode strings (control characters, NUL, any non-surrogate
  code point, very long words) tokenizes without error into int32 ids in `[0, vocab_size)`, one row per string,
  and detokenizes into valid UTF-8, one string per row.
* `test_tokenize_arbitrary_bytes` (100): the same for arbitrary bytes (invalid UTF-8).
* `test_detokenize_arbitrary_ids` (100): any int matrix of ids in `[0, vocab_size)` (`##` pieces first, unpaired
  quotes, padding anywhere) detokenizes into valid UTF-8, one string per row, as a dense or ragged tensor.
* `test_padding_does_not_change_logits` (30): in tiny models (post-norm sinusoidal, pre-norm learned + tied,
  rotary), rows batched together and padded with any number of extra zeros (encoder and decoder side) give the
  same logits at the real positions as each row alone, unpadded (atol 1e-5).
* `test_causal_mask_blocks_the_future` (30): changing, dropping or adding decoder tokens after position t leaves
  the logits at positions <= t unchanged (atol 1e-5).
* `test_python_translator_on_arbitrary_text` (20): `Translator.translate` (greedy or beam 2, batch size 1-4)
  returns one `str` per input for any list of strings/bytes, never raises, and blank inputs give `""`.
* `test_saved_model_on_arbitrary_strings` (20): the exported SavedModel's `serving_default` (`text` ->
  `translation`) returns one valid UTF-8 string per input, for any Unicode strings, `""` for inputs without any
  token, and each row's translation equals the translation of that input alone.
* `test_saved_model_on_arbitrary_bytes` (20): the same signature on arbitrary bytes (invalid UTF-8).
* `test_saved_model_matches_python_translator` (20 + 1 explicit example): `SavedModelTranslator.translate` gives
  exactly the Python `Translator`'s translations for any strings/bytes (the explicit example `'\\x1c'`
  caught Python's `str.strip` and FastWordpiece disagreeing on blank input).
* `test_check_settings_accepts_or_names_the_setting` (200): `keras_transformer.runs.config.check_settings` on any
  flat dict returns `(model_settings, training_settings)` (known names only, the given non-None values unchanged) or
  raises `SettingError` naming one of the given settings, never another exception.
"""

import dataclasses
import functools

import numpy as np
import pytest
from hypothesis import HealthCheck
from hypothesis import example
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

# Keras warns about the softmax over a single key when a hypothesis-drawn sequence has length 1.
pytestmark = pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1:UserWarning")

MAX_EXAMPLES = {
    "tokenizer_round_trip_words": 150,
    "tokenizer_round_trip_corpus": 60,
    "tokenizer_stable": 150,
    "tokenize_unicode": 100,
    "tokenize_bytes": 100,
    "detokenize_ids": 100,
    "padding": 30,
    "causal": 30,
    "python_translator": 20,
    "saved_model_strings": 20,
    "saved_model_bytes": 20,
    "saved_model_vs_python": 20,
    "check_settings": 200,
}


def _settings(name):
    # The autouse `_clean_keras_state` fixture of tests/conftest.py is function-scoped; it only resets global Keras
    # state once per test, which the examples of a test may share.
    return settings(
        max_examples=MAX_EXAMPLES[name],
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


# ----------------------------------------------------------------------------------------------------------------
# Shared objects, built once.


@functools.lru_cache(maxsize=None)
def _training_texts():
    from keras_transformer.data import make_synthetic_corpus
    from keras_transformer.data import synthetic
    from tests.data.conftest import make_caption_sentences

    corpus = make_synthetic_corpus(1000, seed=0, task="mixed")
    # Every word the synthetic generator can write, so that any new sentence of it is covered (without this, a
    # 1000-pair sample may miss a rare letter such as the "z" of "zero" and the word becomes [UNK]).
    lexicon = " ".join(synthetic._ONES + synthetic._TENS[2:] + synthetic._ORDINAL_ONES + synthetic._MONTHS
                       + synthetic._MONTH_ABBREVIATIONS + ["hundred", "thousand", "and", "the", "of", "oh"])
    return (tuple(corpus.sources) + tuple(corpus.targets) + tuple(make_caption_sentences(400))
            + (lexicon,) * 5)


@functools.lru_cache(maxsize=None)
def _tokenizer():
    """A tokenizer of about 400 tokens: letters, digits, `ä`, and the punctuation `!"'(),-.` (quotes paired)."""
    from keras_transformer.data import SubwordTokenizer

    return SubwordTokenizer.train(list(_training_texts()), vocab_size=400, verbose=0)


@functools.lru_cache(maxsize=None)
def _alphabet():
    """`(word characters, punctuation characters)` of the tokenizer's vocabulary."""
    from keras_transformer.data.tokenizer import RESERVED_TOKENS
    from keras_transformer.data.tokenizer import split_words

    singles = {t for t in _tokenizer().vocab[len(RESERVED_TOKENS):] if len(t) == 1}
    word_chars = "".join(sorted(c for c in singles if split_words(c) == [c] and c.isalnum()))
    punctuation = "".join(sorted(c for c in singles if not c.isalnum()))
    return word_chars, punctuation


@functools.lru_cache(maxsize=None)
def _vocabulary_words():
    """Whole words of the training texts (punctuation split off), for realistic sentences."""
    from keras_transformer.data import count_words

    word_chars = set(_alphabet()[0])
    return tuple(sorted(w for w in count_words(_training_texts(), verbose=0) if set(w) <= word_chars))


def _ids_of(tokenizer, texts):
    return tokenizer.tokenize(list(texts)).to_list()


def _detokenized(tokenizer, ids):
    return [t.decode("utf-8") for t in tokenizer.detokenize(ids).numpy()]


# ----------------------------------------------------------------------------------------------------------------
# 1. Tokenizer.


@st.composite
def _space_separated_words(draw):
    word_chars, _ = _alphabet()
    word = st.one_of(
        st.sampled_from(_vocabulary_words()),
        # Random words up to 30 characters; every character of the alphabet exists as a piece and as a "##" piece,
        # so any such word (shorter than max_bytes_per_word=100 bytes) has a tokenization without [UNK].
        st.text(alphabet=word_chars, min_size=1, max_size=30),
    )
    return " ".join(draw(st.lists(word, min_size=0, max_size=12)))


@_settings("tokenizer_round_trip_words")
@given(sentences=st.lists(_space_separated_words(), min_size=1, max_size=4))
def test_tokenizer_round_trip_of_space_separated_words(sentences):
    """`detokenize(tokenize(s)) == s` for words without punctuation joined by single spaces.

    The exact class (from the module docstring of `keras_transformer.data.tokenizer`): FastWordpiece splits on any
    whitespace and drops it, and the detokenizer joins words with one ASCII space, so only single spaces between
    words (no leading/trailing/other whitespace) come back; punctuation is re-attached by learned majority flags,
    so it is left out here (see the corpus test); words must consist of characters of the vocabulary and be under
    `max_bytes_per_word` bytes, or they become `[UNK]`.
    """
    tokenizer = _tokenizer()
    ids = tokenizer.tokenize(sentences)
    assert tokenizer.unk_id not in ids.flat_values.numpy()
    assert _detokenized(tokenizer, ids) == sentences


@_settings("tokenizer_round_trip_corpus")
@given(seed=st.integers(1, 2**31 - 1), task=st.sampled_from(["dates", "numbers", "captions"]))
def test_tokenizer_round_trip_of_corpus_sentences(seed, task):
    """Sentences of the training distribution, punctuation included, round-trip exactly (new seeds: new sentences).

    They use the corpus's own spacing conventions (`"23.11.2026"`, `"t-shirt,"`, `"(left)"`, `"it's"`,
    `' a "Stop" sign.'`), which the learned attachment flags reproduce.
    """
    from keras_transformer.data import make_synthetic_corpus
    from tests.data.conftest import make_caption_sentences

    if task == "captions":
        sentences = make_caption_sentences(8, seed=seed)[:8]
    else:
        corpus = make_synthetic_corpus(4, seed=seed, task=task)
        sentences = list(corpus.sources) + list(corpus.targets)
    tokenizer = _tokenizer()
    assert _detokenized(tokenizer, tokenizer.tokenize(sentences)) == sentences


@st.composite
def _alphabet_text(draw):
    word_chars, punctuation = _alphabet()
    pieces = st.one_of(
        st.sampled_from(_vocabulary_words()),
        st.text(alphabet=word_chars, min_size=1, max_size=10),
        st.sampled_from(punctuation),
        st.text(alphabet=" \t\n\u00a0\u3000", min_size=1, max_size=3),
    )
    return "".join(draw(st.lists(pieces, max_size=15)))


@_settings("tokenizer_stable")
@given(texts=st.lists(_alphabet_text(), min_size=1, max_size=4))
def test_tokenize_detokenize_tokenize_is_stable(texts):
    """Detokenizing only chooses where spaces go between words, so re-tokenizing gives the same ids.

    Holds for any text whose tokenization has no `[UNK]` (`[UNK]` detokenizes to the text `"[UNK]"`); the glued
    tokens are always punctuation, which FastWordpiece splits off again.
    """
    tokenizer = _tokenizer()
    ids = _ids_of(tokenizer, texts)
    assert all(tokenizer.unk_id not in row for row in ids)
    again = _ids_of(tokenizer, _detokenized(tokenizer, tokenizer.tokenize(texts)))
    assert again == ids


_ANY_TEXT = st.one_of(
    st.text(max_size=60),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=100, max_size=400),  # one very long word, any code point
    st.text(alphabet=st.characters(categories=["Cc", "Cf", "Zs", "Zl", "Zp", "Mn"]), max_size=20),
    st.builds(lambda a, b: a + "\x00" + b, st.text(max_size=10), st.text(max_size=10)),
)


def _check_tokenized_batch(tokenizer, inputs):
    ragged = tokenizer.tokenize(inputs)
    assert ragged.dtype.name == "int32"
    assert ragged.shape[0] == len(inputs)
    values = ragged.flat_values.numpy()
    assert ((values >= 0) & (values < tokenizer.vocab_size)).all()
    texts = tokenizer.detokenize(ragged).numpy()
    assert texts.shape == (len(inputs),)
    for text in texts:
        text.decode("utf-8")  # strict: raises on invalid UTF-8


@_settings("tokenize_unicode")
@given(texts=st.lists(_ANY_TEXT, min_size=1, max_size=5))
def test_tokenize_arbitrary_unicode(texts):
    _check_tokenized_batch(_tokenizer(), texts)


@_settings("tokenize_bytes")
@given(data=st.lists(st.binary(max_size=200), min_size=1, max_size=5))
def test_tokenize_arbitrary_bytes(data):
    _check_tokenized_batch(_tokenizer(), data)


@_settings("detokenize_ids")
@given(data=st.data())
def test_detokenize_arbitrary_ids(data):
    """What a model may emit: any ids, including `##` pieces first, lone paired marks and padding in the middle."""
    import tensorflow as tf

    tokenizer = _tokenizer()
    rows = data.draw(st.integers(1, 4))
    length = data.draw(st.integers(0, 20))
    ids = np.array(
        data.draw(st.lists(st.lists(st.integers(0, tokenizer.vocab_size - 1), min_size=length, max_size=length),
                           min_size=rows, max_size=rows)),
        dtype="int32",
    ).reshape(rows, length)
    dense = tokenizer.detokenize(ids).numpy()
    assert dense.shape == (rows,)
    for text in dense:
        text.decode("utf-8")
    # Trailing padding does not change the text; a ragged batch of the same rows gives the same strings.
    padded = np.concatenate([ids, np.zeros((rows, 3), "int32")], axis=1)
    assert (tokenizer.detokenize(padded).numpy() == dense).all()
    ragged = tf.ragged.constant([row.tolist() for row in ids], dtype=tf.int32, ragged_rank=1) if length else None
    if ragged is not None:
        assert (tokenizer.detokenize(ragged).numpy() == dense).all()
    # One row at a time (rank 1) gives the same string as in the batch.
    assert tokenizer.detokenize(ids[0]).numpy() == dense[0]


# ----------------------------------------------------------------------------------------------------------------
# 2. Padding and masks.

_VOCAB = 40
_MODEL_OPTIONS = {
    "paper": dict(),
    "pre-norm-learned-tied": dict(norm_first=True, position="learned", share_embeddings=True, tie_output=True),
    "rotary": dict(position="none", use_rotary=True, num_layers=1),
}


@functools.lru_cache(maxsize=None)
def _tiny_model(name):
    import keras

    from keras_transformer import build_transformer

    keras.utils.set_random_seed(len(name))
    options = dict(num_layers=2, d_model=16, num_heads=2, d_ff=32, dropout=0.0, max_length=64)
    options.update(_MODEL_OPTIONS[name])
    return build_transformer(_VOCAB, _VOCAB, name=f"tiny_{name.replace('-', '_')}", **options)


def _logits(model, encoder_ids, decoder_ids):
    from keras import ops

    inputs = {"encoder_inputs": np.asarray(encoder_ids, "int32"), "decoder_inputs": np.asarray(decoder_ids, "int32")}
    out = model(inputs, training=False)
    return np.asarray(ops.convert_to_numpy(out))


def _pad(rows, width):
    out = np.zeros((len(rows), width), "int32")
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


_IDS = st.lists(st.integers(1, _VOCAB - 1), min_size=1, max_size=12)


@_settings("padding")
@given(
    model_name=st.sampled_from(sorted(_MODEL_OPTIONS)),
    pairs=st.lists(st.tuples(_IDS, _IDS), min_size=1, max_size=3),
    extra_encoder_padding=st.integers(0, 20),
    extra_decoder_padding=st.integers(0, 20),
)
def test_padding_does_not_change_logits(model_name, pairs, extra_encoder_padding, extra_decoder_padding):
    """Rows padded with zeros (to the longest row of the batch, plus any extra) keep the logits of each row alone."""
    model = _tiny_model(model_name)
    encoder_rows = [e for e, _ in pairs]
    decoder_rows = [d for _, d in pairs]
    encoder = _pad(encoder_rows, max(map(len, encoder_rows)) + extra_encoder_padding)
    decoder = _pad(decoder_rows, max(map(len, decoder_rows)) + extra_decoder_padding)
    batched = _logits(model, encoder, decoder)
    for i, (e, d) in enumerate(pairs):
        alone = _logits(model, [e], [d])[0]
        np.testing.assert_allclose(batched[i, : len(d)], alone, rtol=0, atol=1e-5)
        assert np.isfinite(batched[i]).all()


@_settings("causal")
@given(
    model_name=st.sampled_from(sorted(_MODEL_OPTIONS)),
    encoder_ids=_IDS,
    decoder_ids=_IDS,
    data=st.data(),
)
def test_causal_mask_blocks_the_future(model_name, encoder_ids, decoder_ids, data):
    """Decoder tokens after position t (changed, removed or added) never change the logits at positions <= t."""
    model = _tiny_model(model_name)
    t = data.draw(st.integers(0, len(decoder_ids) - 1), label="t")
    future = data.draw(st.lists(st.integers(1, _VOCAB - 1), max_size=12), label="future")
    changed = decoder_ids[: t + 1] + future
    before = _logits(model, [encoder_ids], [decoder_ids])[0]
    after = _logits(model, [encoder_ids], [changed])[0]
    np.testing.assert_allclose(after[: t + 1], before[: t + 1], rtol=0, atol=1e-5)


# ----------------------------------------------------------------------------------------------------------------
# 3. Translators on arbitrary text.


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The tiny random-weight run of the export tests (tests/export/helpers.py), loaded back."""
    from keras_transformer.runs.run import load_run
    from tests.export.helpers import write_tiny_run

    return load_run(write_tiny_run(tmp_path_factory.mktemp("properties") / "tiny-run"))


_TRANSLATOR_MAX_LENGTH = 6


@pytest.fixture(scope="module")
def saved_model_path(tiny_run, tmp_path_factory):
    """The tiny run exported as a SavedModel (greedy, at most `_TRANSLATOR_MAX_LENGTH` output tokens)."""
    from keras_transformer.export import TranslatorModule
    from keras_transformer.export import export_saved_model

    path = str(tmp_path_factory.mktemp("properties-export") / "saved_model")
    module = TranslatorModule(tiny_run.model, tiny_run.source_tokenizer, tiny_run.target_tokenizer,
                              max_length=_TRANSLATOR_MAX_LENGTH)
    return export_saved_model(module, path)


@pytest.fixture(scope="module")
def serving_default(saved_model_path):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer ops)

    return tf.saved_model.load(saved_model_path).signatures["serving_default"]


@pytest.fixture(scope="module")
def python_translator(tiny_run):
    from keras_transformer.decoding.translator import Translator

    return Translator(tiny_run.model, tiny_run.source_tokenizer, tiny_run.target_tokenizer,
                      max_length=_TRANSLATOR_MAX_LENGTH, jit_compile=False)


_TRANSLATOR_TEXT = st.one_of(
    st.just(""),
    st.text(alphabet=" \t\n\r\x0b\x0c\x85\u00a0\u2028\u3000", max_size=5),  # whitespace only
    st.text(max_size=40),
    st.text(alphabet=st.characters(categories=["Cc", "Cf", "So", "Mn"]), max_size=10),  # controls, emoji, combining
    st.sampled_from(["May 3rd, 2011 " * 30, "twenty-three", "12.3.2001", "😀🎉 日本語", "\x00"]),
)


@_settings("python_translator")
@given(
    texts=st.lists(st.one_of(_TRANSLATOR_TEXT, st.binary(max_size=30)), max_size=6),
    batch_size=st.integers(1, 4),
    beam_size=st.sampled_from([1, 1, 2]),
)
# U+001F is whitespace to Python's str.strip but a word character to FastWordpiece: it is translated, not blank.
@example(texts=["\x1f", " \t", "\x1c\x1d"], batch_size=1, beam_size=1)
def test_python_translator_on_arbitrary_text(python_translator, texts, batch_size, beam_size):
    import tensorflow as tf

    outputs = python_translator.translate(texts, batch_size=batch_size, beam_size=beam_size)
    assert isinstance(outputs, list) and len(outputs) == len(texts)
    assert all(isinstance(o, str) for o in outputs)
    for text, output in zip(texts, outputs):
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        # Blank is what the source tokenizer sees as blank: no token at all (not Python's idea of whitespace).
        tokens = python_translator.source_tokenizer.tokenize(tf.constant([text.encode("utf-8")], dtype=tf.string))
        if int(tokens.row_lengths().numpy()[0]) == 0:
            assert output == ""


def _check_serving(serving_default, tokenizer, inputs):
    import tensorflow as tf

    result = serving_default(text=tf.constant(inputs, dtype=tf.string))
    assert list(result) == ["translation"]
    outputs = result["translation"].numpy()
    assert outputs.shape == (len(inputs),)
    decoded = [o.decode("utf-8") for o in outputs]  # strict UTF-8
    lengths = tokenizer.tokenize(tf.constant(inputs, dtype=tf.string)).row_lengths().numpy()
    for output, length in zip(decoded, lengths):
        if length == 0:
            assert output == ""
    # Rows are independent: each input alone gives the same translation as in the batch.
    for text, output in zip(inputs, outputs):
        assert serving_default(text=tf.constant([text], dtype=tf.string))["translation"].numpy()[0] == output


@_settings("saved_model_strings")
@given(texts=st.lists(_TRANSLATOR_TEXT, min_size=1, max_size=5))
def test_saved_model_on_arbitrary_strings(serving_default, tiny_run, texts):
    _check_serving(serving_default, tiny_run.source_tokenizer, [t.encode("utf-8") for t in texts])


@_settings("saved_model_bytes")
@given(data=st.lists(st.binary(max_size=60), min_size=1, max_size=5))
def test_saved_model_on_arbitrary_bytes(serving_default, tiny_run, data):
    _check_serving(serving_default, tiny_run.source_tokenizer, data)


@_settings("saved_model_vs_python")
@example(texts=["\x1c"])
@given(texts=st.lists(st.one_of(_TRANSLATOR_TEXT, st.binary(max_size=30)), min_size=1, max_size=5))
def test_saved_model_matches_python_translator(saved_model_path, python_translator, texts):
    """The exported SavedModel translates every input exactly as the Python `Translator` does (same greedy decoding,
    same `max_length`; tests/export/test_saved_model.py checks this on a few fixed sentences)."""
    exported = _saved_model_translator(saved_model_path)
    assert exported.translate(texts) == python_translator.translate(texts)


@functools.lru_cache(maxsize=None)
def _saved_model_translator(path):
    from keras_transformer.translators import SavedModelTranslator

    return SavedModelTranslator(path)


# ----------------------------------------------------------------------------------------------------------------
# 4. Settings validation.


def _setting_names():
    from keras_transformer.models import TransformerConfig
    from keras_transformer.runs.config import TrainingConfig

    model = {f.name for f in dataclasses.fields(TransformerConfig)} - {"src_vocab_size", "tgt_vocab_size"}
    training = {f.name for f in dataclasses.fields(TrainingConfig)}
    return sorted(model), sorted(training)


def _setting_defaults():
    from keras_transformer.models import TransformerConfig
    from keras_transformer.runs.config import TrainingConfig

    return {f.name: f.default for cls in (TransformerConfig, TrainingConfig) for f in dataclasses.fields(cls)}


def _setting_values():
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-10, 600),
        st.integers(min_value=-(2**80), max_value=2**80),
        st.floats(allow_nan=True, allow_infinity=True),
        st.floats(0, 1),
        st.sampled_from(["relu", "gelu", "sinusoidal", "learned", "none", "inverse_sqrt", "cosine", "", "1e3"]),
        st.text(max_size=10),
        st.lists(st.integers(), max_size=3),
    )


def test_check_settings_accepts_or_names_the_setting():
    """`check_settings` returns two dicts (known names, values as given) or raises `SettingError` naming a setting.

    Keys are the model and training setting names (with `_` or CLI-style `-`) and random strings; values are ints
    (negative, huge), floats (nan, inf), bools, None, strings and lists. Any other exception type is a bug.
    """
    from keras_transformer.runs import config as validation
    model_names, training_names = _setting_names()
    known = model_names + training_names
    key = st.one_of(
        st.sampled_from(known),
        st.sampled_from(known).map(lambda k: k.replace("_", "-")),
        st.text(min_size=1, max_size=12),
    )

    # Values of each setting's own type too (from the dataclass defaults), so that valid settings and the rules
    # that combine settings (d_model and num_heads, average_last and epochs, token_budget and max_length,
    # share_embeddings and shared_vocab, position and use_rotary) are reached.
    defaults = _setting_defaults()

    def typed_value(name):
        default = defaults[name]
        if isinstance(default, bool):
            return st.booleans()
        if isinstance(default, int):
            return st.sampled_from([1, 2, 3, 4, 8, 16, 64, 256, 512, 4000, 8000, default])
        if isinstance(default, float):
            return st.sampled_from([0.0, 0.1, 0.5, 1e-6, 1.0, 2.0, default])
        if isinstance(default, str):
            return st.sampled_from(["relu", "gelu", "sinusoidal", "learned", "none", "inverse_sqrt", "cosine"])
        return st.one_of(st.none(), st.sampled_from([1, 2, 16, 512, 4000, 0.1, 0.5, 2.0]))

    typed = st.lists(st.sampled_from(known), unique=True, max_size=6).flatmap(
        lambda names: st.fixed_dictionaries({name: typed_value(name) for name in names})
    )

    @_settings("check_settings")
    @given(values=st.one_of(
        st.dictionaries(key, _setting_values(), max_size=6),
        typed,
    ))
    def check(values):
        try:
            result = validation.check_settings(dict(values))
        except validation.SettingError as error:
            message = str(error)
            # The name as given, with `_` or `-`, or its repr (a name with control characters is shown escaped).
            named = {v for k in values for v in (k, k.replace("-", "_"), k.replace("_", "-"))}
            named |= {repr(v) for v in named}
            assert any(name in message for name in named), (message, values)
            return
        model_settings, training_settings = result
        assert isinstance(model_settings, dict) and isinstance(training_settings, dict)
        assert set(model_settings) <= set(model_names), model_settings
        assert set(training_settings) <= set(training_names), training_settings
        unknown = [k for k, v in values.items() if k.replace("-", "_") not in known and v is not None]
        assert not unknown, f"unknown settings {unknown} were accepted"
        # Accepted values are returned as given (no silent change), under their underscore names.
        given_values = {k.replace("-", "_"): v for k, v in values.items() if v is not None}
        assert {**model_settings, **training_settings} == given_values

    assert issubclass(validation.SettingError, ValueError)
    check()
