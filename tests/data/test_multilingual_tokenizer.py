"""`MultilingualTokenizer` (M2M-100, NLLB-200) against transformers' own tokenizers read from the same files: the same
ids (sources packed `[source language] X </s>` by the package's packer), the same text from `decode(...,
skip_special_tokens=True)`, language codes, saving and loading, and errors that name the file."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip("sentencepiece")
pytest.importorskip("transformers")
from hypothesis import HealthCheck  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from keras_transformer.data.marian_vocabulary import permute_vocabulary  # noqa: E402
from keras_transformer.data.multilingual_tokenizer import MultilingualTokenizer  # noqa: E402
from keras_transformer.data.packing import pack_rows  # noqa: E402
from keras_transformer.data.sentencepiece_tokenizer import SentencePieceTokenizer  # noqa: E402
from keras_transformer.data.tokenizers import load_tokenizer  # noqa: E402
from tests.importers.m2m_100_files import EXTRA  # noqa: E402
from tests.importers.m2m_100_files import LANGUAGES  # noqa: E402
from tests.importers.m2m_100_files import WORDS  # noqa: E402
from tests.importers.m2m_100_files import write_m2m100_tokenizer_files  # noqa: E402
from tests.importers.m2m_100_files import write_nllb_tokenizer_files  # noqa: E402

FIXED_SENTENCES = [
    "Der Hund läuft schnell.",
    "The small house is green!",
    "Ça été déjà naïve, où?",
    "niño año mañana señor",
    "  leading and   inner spaces",
    "a trailing space ",
    "a trailing tab and line\t\n",
    "",
    " ",
    "\n",
    "ﬁ ① ｶ ½",  # NFKC in the model's normalizer
    "東京 😀 € unknown ☃ ‽ chars",
    "»\xa0\x15",  # an unknown character, a space that normalizes away at the end
    "a literal ▁ and ▁▁ ",
    ">>deu<< not a Marian code",
]
# Source languages to pack with (the first is each checkpoint's default).
SOURCES = {"nllb": ("eng_Latn", "deu_Latn"), "m2m_100": ("en", "de")}
# Text of the training corpus's characters and any other Unicode, with whitespace of all kinds, less what the module
# docstring documents as different: the literal text of special tokens and language codes.
_MODEL_CHARACTERS = sorted(set("".join(sum(WORDS.values(), []) + EXTRA)))
_CHARACTER = st.one_of(st.characters(exclude_categories=["Cs"]),
                       st.sampled_from(_MODEL_CHARACTERS + [" ", "\t", "\n", "\u3000", "\xa0", "\u2581", "\x15"]))
_LITERAL_TOKENS = ("<s>", "</s>", "<unk>", "<pad>", "<mask>", "__") + LANGUAGES
TEXT = st.text(_CHARACTER, max_size=30).filter(lambda text: not any(token in text for token in _LITERAL_TOKENS))
STYLES = ["nllb", "m2m_100"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """`{style: (directory, transformers tokenizer)}`: an NLLB-200 and an M2M-100 tokenizer's files."""
    nllb = str(tmp_path_factory.mktemp("nllb"))
    m2m_100 = str(tmp_path_factory.mktemp("m2m_100"))
    return {"nllb": (nllb, write_nllb_tokenizer_files(nllb)),
            "m2m_100": (m2m_100, write_m2m100_tokenizer_files(m2m_100))}


_BUILT = {}


@pytest.fixture(autouse=True)
def _forget_tokenizers():
    """tests/conftest.py resets Keras after each test, which empties TensorFlow's kernel cache, where
    `tensorflow_text.SentencepieceTokenizer` (the engine of BPE models) keeps its model: tokenizers are built again in
    each test (from the module's files, which stay)."""
    yield
    _BUILT.clear()


def _built(checkpoints, style):
    """`(tokenizer, tokenize, detokenize, reference)`: ours, its traced tokenize (ids padded with -1) and detokenize,
    and transformers' tokenizer."""
    directory, reference = checkpoints[style]
    if style not in _BUILT:
        tokenizer = MultilingualTokenizer.from_checkpoint(directory)

        def tokenize(text):
            return tokenizer.tokenize(text).to_tensor(-1)

        _BUILT[style] = (tokenizer, tf.function(tokenize, input_signature=[tf.TensorSpec([None], tf.string)]),
                         tf.function(tokenizer.detokenize, input_signature=[tf.TensorSpec([None, None], tf.int32)]))
    return _BUILT[style] + (reference,)


def _our_sources(tokenizer, tokenize, texts, language):
    """`[language] X </s>` of each text as the packer lays our ids out, mapped to the checkpoint's ids."""
    source = tokenizer.with_source_language(language)
    rows = [row[row >= 0].tolist() for row in tokenize(tf.constant(texts, tf.string)).numpy()]
    packed = pack_rows(rows, source.source_start_id, source.end_id, max_length=1024)
    return [tokenizer.original_ids[ids[: len(row) + 2]].tolist() for ids, row in zip(packed, rows)]


def _their_sources(reference, texts, language):
    reference.src_lang = language
    return reference(texts)["input_ids"]


def _generated(tokenizer, rows, language):
    """Our ids as a decoder writes them: `[START]`, the target language's code, the text, `</s>`, then padding."""
    rows = [[tokenizer.start_id, tokenizer.language_id(language)] + list(row) + [tokenizer.end_id] for row in rows]
    width = max(map(len, rows))
    return np.array([row + [tokenizer.pad_id] * (width - len(row)) for row in rows], np.int32)


def _decode(texts):
    return [text.decode("utf-8") for text in np.asarray(texts).reshape(-1)]


# ----------------------------------------------------------------------------------------------------------------------
# The vocabulary and the language codes.


def test_nllb_vocabulary_is_fairseqs_with_the_language_codes_of_tokenizer_json(checkpoints):
    tokenizer, _, _, reference = _built(checkpoints, "nllb")
    assert tokenizer.style == "nllb" and tokenizer.engine == "standard"  # a BPE model
    assert tokenizer.vocab[:4] == ["<pad>", "<unk>", "[START]", "</s>"]
    assert tokenizer.original_vocab_size == len(reference) and tokenizer.vocab_size == len(reference) + 1
    # fairseq's <pad> 1, <unk> 3, </s> 2; [START] takes </s>'s id, the token the decoder starts from.
    assert tokenizer.original_ids[:4].tolist() == [1, 3, 2, 2]
    assert tokenizer.ids_from_original[[0, 1, 2, 3]].tolist() == [tokenizer.token_to_id("<s>"), 0, 3, 1]
    assert reference.convert_ids_to_tokens(tokenizer.original_ids[4:].tolist()) == tokenizer.vocab[4:]
    assert tokenizer.ids_from_original[tokenizer.original_ids[3:]].tolist() == list(range(3, tokenizer.vocab_size))
    # The codes are tokenizer.json's special added tokens, with the ids it gives them.
    with open(os.path.join(checkpoints["nllb"][0], "tokenizer.json"), encoding="utf-8") as f:
        added = {token["content"]: token["id"] for token in json.load(f)["added_tokens"]}
    assert tokenizer.languages == LANGUAGES
    for code in LANGUAGES:
        assert tokenizer.original_ids[tokenizer.language_id(code)] == added[code] == reference.convert_tokens_to_ids(
            code)
    assert {"<s>", "<mask>"} <= set(tokenizer.special_tokens)
    # transformers' default source language; no target language in this tokenizer_config.json.
    assert tokenizer.source_language == "eng_Latn" and tokenizer.target_language is None
    assert tokenizer.source_start_id == tokenizer.language_id("eng_Latn")


def test_m2m_100_vocabulary_is_vocab_json_with_the_language_tokens_after_it(checkpoints):
    tokenizer, _, _, reference = _built(checkpoints, "m2m_100")
    with open(os.path.join(checkpoints["m2m_100"][0], "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    assert tokenizer.style == "m2m_100"
    assert tokenizer.languages == ("en", "ha", "is", "ja", "cs", "ru", "zh", "de")  # transformers' "wmt21" list
    assert tokenizer.language_tokens["de"] == "__de__"
    for code in tokenizer.languages:
        assert tokenizer.original_ids[tokenizer.language_id(code)] == reference.get_lang_id(code) >= len(vocab)
    assert tokenizer.original_vocab_size == len(vocab) + len(tokenizer.languages) == len(reference)
    assert tokenizer.original_ids[:4].tolist() == [1, 3, 2, 2]
    assert tokenizer.source_language == "en" and tokenizer.target_language is None


def test_default_languages_come_from_tokenizer_config(tmp_path):
    write_nllb_tokenizer_files(tmp_path, source_language="deu_Latn", target_language="spa_Latn")
    tokenizer = MultilingualTokenizer.from_checkpoint(tmp_path)
    assert (tokenizer.source_language, tokenizer.target_language) == ("deu_Latn", "spa_Latn")
    assert tokenizer.source_start_id == tokenizer.language_id("deu_Latn")


@pytest.mark.parametrize("style, wrong, closest", [("nllb", "deu_latn", "deu_Latn"), ("nllb", "german", None),
                                                   ("m2m_100", "__de__", "de"), ("m2m_100", "DE", "de")])
def test_an_unknown_language_code_names_the_closest_codes(checkpoints, style, wrong, closest):
    tokenizer = _built(checkpoints, style)[0]
    for call in (tokenizer.language_id, tokenizer.with_source_language):
        with pytest.raises(ValueError) as error:
            call(wrong)
        message = str(error.value)
        assert "\n" not in message and message.startswith(f"unknown language code {wrong!r}; closest: ")
        named = message.split("closest: ")[1].split(" (")[0].split(", ")
        assert 1 <= len(named) <= 4 and set(named) <= set(tokenizer.languages)
        if closest is not None:
            assert named[0] == closest


def test_with_source_language_shares_the_tokenizer(checkpoints):
    tokenizer, _, _, _ = _built(checkpoints, "nllb")
    german = tokenizer.with_source_language("deu_Latn")
    assert german.source_language == "deu_Latn" and tokenizer.source_language == "eng_Latn"
    assert german.source_start_id == tokenizer.language_id("deu_Latn") != tokenizer.source_start_id
    assert german._sp is tokenizer._sp and german._detokenizer is tokenizer._detokenizer
    assert german.tokenize(FIXED_SENTENCES).to_list() == tokenizer.tokenize(FIXED_SENTENCES).to_list()


# ----------------------------------------------------------------------------------------------------------------------
# Tokenizing: transformers' ids.


@pytest.mark.parametrize("style", STYLES)
def test_ids_match_transformers_on_fixed_sentences(checkpoints, style):
    tokenizer, tokenize, _, reference = _built(checkpoints, style)
    for language in SOURCES[style]:
        ours = _our_sources(tokenizer, tokenize, FIXED_SENTENCES, language)
        assert ours == _their_sources(reference, FIXED_SENTENCES, language)
        assert all(row[0] == tokenizer.original_ids[tokenizer.language_id(language)] for row in ours)
    # Eager and ragged, and one string, give the traced function's ids.
    ids = tokenizer.tokenize(FIXED_SENTENCES[:6])
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    dense = tokenize(tf.constant(FIXED_SENTENCES[:6])).numpy()
    assert ids.to_list() == [row[row >= 0].tolist() for row in dense]
    assert tokenizer.tokenize(FIXED_SENTENCES[5]).numpy().tolist() == ids.to_list()[5]


@pytest.mark.parametrize("style", STYLES)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(TEXT, min_size=1, max_size=5), pick=st.integers(0, 7))
def test_ids_match_transformers_on_any_text(checkpoints, style, texts, pick):
    tokenizer, tokenize, _, reference = _built(checkpoints, style)
    language = tokenizer.languages[pick % len(tokenizer.languages)]
    assert _our_sources(tokenizer, tokenize, texts, language) == _their_sources(reference, texts, language)


def test_nllb_keeps_a_trailing_space_as_a_piece_of_its_own(checkpoints):
    # SentencePiece strips the text; transformers' NllbTokenizer keeps one "▁" for trailing whitespace.
    tokenizer, tokenize, _, _ = _built(checkpoints, "nllb")
    space = tokenizer.token_to_id("\u2581")
    rows = tokenizer.tokenize(["the dog", "the dog ", "the dog \t\n", " ", "", "\x15"]).to_list()
    assert rows[1] == rows[2] == rows[0] + [space]
    assert rows[3:] == [[space], [], []]


# ----------------------------------------------------------------------------------------------------------------------
# Detokenizing: transformers' decode(..., skip_special_tokens=True).


@pytest.mark.parametrize("style", STYLES)
def test_detokenize_matches_transformers_decode(checkpoints, style):
    tokenizer, tokenize, detokenize, reference = _built(checkpoints, style)
    rows = tokenizer.tokenize(FIXED_SENTENCES).to_list()
    target = tokenizer.languages[-1]
    dense = _generated(tokenizer, rows, target)  # [START] code text </s> padding
    expected = [reference.decode(tokenizer.original_ids[row].tolist(), skip_special_tokens=True) for row in dense]
    assert not any(token in text for text in expected for token in tokenizer.language_tokens.values())
    assert _decode(detokenize(tf.constant(dense))) == expected
    assert _decode(tokenizer.detokenize(dense)) == expected
    ragged = tf.ragged.constant([[tokenizer.language_id(target)] + row for row in rows], dtype=tf.int32)
    assert _decode(tokenizer.detokenize(ragged)) == expected
    assert _decode(tokenizer.detokenize(dense[0])) == expected[:1]
    assert expected[:4] == ["Der Hund läuft schnell.", "The small house is green!", "Ça été déjà naïve, où?",
                            "niño año mañana señor"]


@pytest.mark.parametrize("style", STYLES)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(TEXT, min_size=1, max_size=5), pick=st.integers(0, 7))
def test_detokenize_matches_transformers_decode_on_any_text(checkpoints, style, texts, pick):
    tokenizer, tokenize, detokenize, reference = _built(checkpoints, style)
    rows = [row[row >= 0].tolist() for row in tokenize(tf.constant(texts, tf.string)).numpy()]
    dense = _generated(tokenizer, rows, tokenizer.languages[pick % len(tokenizer.languages)])
    expected = [reference.decode(tokenizer.original_ids[row].tolist(), skip_special_tokens=True) for row in dense]
    assert _decode(detokenize(tf.constant(dense))) == expected


@pytest.mark.parametrize("style", STYLES)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_detokenize_matches_transformers_decode_on_any_ids(checkpoints, style, data):
    tokenizer, _, detokenize, reference = _built(checkpoints, style)
    size = tokenizer.original_vocab_size
    # Any checkpoint ids, often the special ones, the "▁" piece and language codes, anywhere in a row.
    frequent = [0, 1, 2, 3, int(tokenizer.original_ids[tokenizer.token_to_id("\u2581")])] + [
        int(tokenizer.original_ids[tokenizer.language_id(code)]) for code in tokenizer.languages[:2]]
    checkpoint_id = st.one_of(st.integers(0, size - 1), st.sampled_from(frequent))
    rows = data.draw(st.lists(st.lists(checkpoint_id, max_size=12), min_size=1, max_size=4))
    width = max(map(len, rows))
    dense = np.array([tokenizer.from_original_ids(row).tolist() + [0] * (width - len(row)) for row in rows],
                     np.int32).reshape(len(rows), width)
    expected = [reference.decode(row, skip_special_tokens=True) for row in rows]
    assert _decode(detokenize(tf.constant(dense))) == expected


# ----------------------------------------------------------------------------------------------------------------------
# Saving, loading, TensorFlow graphs.


@pytest.mark.parametrize("style", STYLES)
def test_save_and_load_round_trip(checkpoints, tmp_path, style):
    tokenizer, _, _, _ = _built(checkpoints, style)
    other = tokenizer.with_source_language(SOURCES[style][1])
    other.save(tmp_path / "saved")
    assert sorted(os.listdir(tmp_path / "saved")) == ["sentencepiece.spm", "tokenizer.json", "vocab.json"]
    with open(tmp_path / "saved" / "tokenizer.json", encoding="utf-8") as f:
        config = json.load(f)
    assert config["format"] == "keras_transformer.MultilingualTokenizer" and config["decoder_start_token"] == "</s>"
    for loaded in (MultilingualTokenizer.load(tmp_path / "saved"), load_tokenizer(str(tmp_path / "saved"))):
        assert type(loaded) is MultilingualTokenizer and loaded.get_config() == other.get_config()
        assert loaded.vocab == tokenizer.vocab and loaded.original_ids.tolist() == tokenizer.original_ids.tolist()
        assert loaded.languages == tokenizer.languages and loaded.style == style
        assert loaded.source_language == SOURCES[style][1] and loaded.source_start_id == other.source_start_id
        ids = tokenizer.tokenize(FIXED_SENTENCES)
        assert loaded.tokenize(FIXED_SENTENCES).to_list() == ids.to_list()
        dense = _generated(tokenizer, ids.to_list(), tokenizer.languages[0])
        assert _decode(loaded.detokenize(dense)) == _decode(tokenizer.detokenize(dense))


@pytest.mark.parametrize("change, message", [
    (lambda config: config.pop("languages"), r"tokenizer\.json:1: expected \"languages\""),
    (lambda config: config.update(style="marian"), r"tokenizer\.json:1: expected a \"style\""),
    (lambda config: config.update(source_language="xx"), r"tokenizer\.json:1: expected a 'source_language'"),
    (lambda config: config.update(format="keras_transformer.SentencePieceTokenizer"), r"expected \"format\""),
])
def test_load_of_a_damaged_config_names_the_file(checkpoints, tmp_path, change, message):
    _built(checkpoints, "nllb")[0].save(tmp_path)
    path = tmp_path / "tokenizer.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    change(config)
    path.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        MultilingualTokenizer.load(tmp_path)


class _Translate(tf.Module):
    """A graph that packs `[source language] X </s>` and detokenizes a row `[target language] X </s>`."""

    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(self, text):
        ids = self.tokenizer.tokenize(text)
        rows = tf.shape(ids.row_lengths())[0]
        code = tf.fill([rows, 1], self.tokenizer.source_start_id)
        packed = tf.concat([code, ids.to_tensor(), tf.zeros([rows, 1], tf.int32)], axis=1)
        packed = tf.where(tf.equal(tf.range(tf.shape(packed)[1])[None], tf.cast(ids.row_lengths()[:, None], tf.int32)
                                   + 1), self.tokenizer.end_id, packed)
        return {"ids": packed, "text": self.tokenizer.detokenize(packed)}


def test_tokenizer_in_a_saved_model(checkpoints, tmp_path):
    tokenizer, _, _, reference = _built(checkpoints, "nllb")
    module = _Translate(tokenizer.with_source_language("fra_Latn"))
    tf.saved_model.save(module, str(tmp_path / "saved"), signatures={"serving_default": module.serve})
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    out = loaded.signatures["serving_default"](text=tf.constant(FIXED_SENTENCES))
    ids = out["ids"].numpy()
    assert [tokenizer.original_ids[row[: np.flatnonzero(row == 3)[0] + 1]].tolist() for row in ids] == (
        _their_sources(reference, FIXED_SENTENCES, "fra_Latn"))
    assert _decode(out["text"]) == [reference.decode(tokenizer.original_ids[row].tolist(), skip_special_tokens=True)
                                    for row in ids]


# ----------------------------------------------------------------------------------------------------------------------
# Checkpoints that cannot be read: one line naming the file.


def _copy(checkpoints, style, tmp_path):
    directory = str(tmp_path / style)
    shutil.copytree(checkpoints[style][0], directory)
    return directory


def _edit_json(path, change):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    change(data)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)


def _one_line_error(directory, message, **kwargs):
    with pytest.raises(ValueError, match=message) as error:
        MultilingualTokenizer.from_checkpoint(directory, **kwargs)
    assert "\n" not in str(error.value)


def test_what_cannot_be_read_is_refused_in_one_line_naming_the_file(checkpoints, tmp_path):
    nllb = _copy(checkpoints, "nllb", tmp_path)
    os.rename(os.path.join(nllb, "sentencepiece.bpe.model"), os.path.join(nllb, "model.bak"))
    _one_line_error(nllb, r"sentencepiece\.bpe\.model: not found")
    os.rename(os.path.join(nllb, "model.bak"), os.path.join(nllb, "sentencepiece.bpe.model"))
    _one_line_error(nllb, r"bpe model, not unigram", engine="fast")  # FastSentencepieceTokenizer: unigram only

    config = os.path.join(nllb, "tokenizer_config.json")
    _edit_json(config, lambda data: data.update(legacy_behaviour=True))
    _one_line_error(nllb, r"tokenizer_config\.json: legacy_behaviour = true .* not supported")
    _edit_json(config, lambda data: data.update(legacy_behaviour=False, src_lang="xxx_Latn"))
    _one_line_error(nllb, r"tokenizer_config\.json: src_lang 'xxx_Latn' is not one of the 4 language codes")
    _edit_json(config, lambda data: data.update(src_lang=None))

    tokenizer_json = os.path.join(nllb, "tokenizer.json")
    original = open(tokenizer_json, "rb").read()
    with open(tokenizer_json, "wb") as f:
        f.write(original[: len(original) // 2])
    _one_line_error(nllb, r"tokenizer\.json:\d+: expected JSON")
    os.remove(tokenizer_json)
    _one_line_error(nllb, r"tokenizer\.json: not found")
    _edit_json(config, lambda data: data.pop("tokenizer_class"))  # then the files decide
    _one_line_error(nllb, r"tokenizer\.json: not found; expected it \(NLLB-200\) or vocab\.json \(M2M-100\)")

    m2m_100 = _copy(checkpoints, "m2m_100", tmp_path)
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        _edit_json(os.path.join(m2m_100, name),
                   lambda data: [data.pop(key, None) for key in ("extra_special_tokens", "additional_special_tokens")])
    _one_line_error(m2m_100, r"vocab\.json: a multilingual checkpoint's vocabulary must hold its language codes")


def test_a_vocabulary_without_language_codes_is_refused(tmp_path):
    write_nllb_tokenizer_files(tmp_path, ())
    _one_line_error(tmp_path, r"tokenizer\.json: a multilingual checkpoint's vocabulary must hold its language codes")


# ----------------------------------------------------------------------------------------------------------------------
# The decoder's start token in SentencePieceTokenizer (Marian's default unchanged).


def test_permute_vocabulary_gives_start_the_decoder_start_tokens_id():
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "a": 4}
    tokens, _, original_ids, inverse = permute_vocabulary(vocab, "<pad>", "<unk>", "</s>", "[START]")
    assert tokens == ("<pad>", "<unk>", "[START]", "</s>", "<s>", "a")
    assert original_ids.tolist() == [1, 3, 1, 2, 0, 4] and inverse.tolist() == [4, 0, 3, 1, 5]
    tokens, _, original_ids, inverse = permute_vocabulary(vocab, "<pad>", "<unk>", "</s>", "[START]", "</s>")
    assert original_ids.tolist() == [1, 3, 2, 2, 0, 4] and inverse.tolist() == [4, 0, 3, 1, 5]
    _, _, original_ids, inverse = permute_vocabulary(vocab, "<pad>", "<unk>", "</s>", "[START]", "<s>")
    assert original_ids.tolist() == [1, 3, 0, 2, 0, 4] and inverse.tolist() == [4, 0, 3, 1, 5]
    with pytest.raises(ValueError, match="no decoder_start_token '<bos>'"):
        permute_vocabulary(vocab, "<pad>", "<unk>", "</s>", "[START]", "<bos>")


def test_sentencepiece_tokenizer_saves_its_decoder_start_token(checkpoints, tmp_path):
    directory, reference = checkpoints["m2m_100"]
    model = open(os.path.join(directory, "sentencepiece.bpe.model"), "rb").read()
    with open(os.path.join(directory, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    tokenizer = SentencePieceTokenizer(model, vocab, decoder_start_token="</s>")
    assert tokenizer.original_ids[:4].tolist() == [1, 3, 2, 2] and tokenizer.decoder_start_token == "</s>"
    tokenizer.save(tmp_path)
    assert SentencePieceTokenizer.load(tmp_path).original_ids[:4].tolist() == [1, 3, 2, 2]
    # A file written before "decoder_start_token" existed starts from the pad token, as Marian's decoder does.
    _edit_json(tmp_path / "tokenizer.json", lambda config: config.pop("decoder_start_token"))
    loaded = SentencePieceTokenizer.load(tmp_path)
    assert loaded.decoder_start_token == "<pad>" and loaded.original_ids[:4].tolist() == [1, 3, 1, 2]
    assert SentencePieceTokenizer(model, vocab).get_config()["decoder_start_token"] == "<pad>"
