import io
import json
import random
import shutil
import warnings

import numpy as np
import pytest
import tensorflow as tf

spm = pytest.importorskip("sentencepiece")
marian = pytest.importorskip("transformers.models.marian.tokenization_marian")
from hypothesis import HealthCheck  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from keras_transformer.data.sentencepiece_tokenizer import SentencePieceTokenizer  # noqa: E402

# Characters that only one side's model knows (a source-only and a target-only one). `vocab.json` has them (it is the
# union of both models' pieces), so for the other side they are a documented difference: MarianTokenizer looks an
# unknown run up in vocab.json, we give <unk>.
SOURCE_ONLY, TARGET_ONLY = "鳳", "龍"
LANGUAGE_CODES = (">>deu<<", ">>fra<<")
_SYLLABLES = ["ka", "ri", "mo", "sch", "über", "straß", "café", "naï", "ré", "sumé", "Zü", "rich", "Kö", "ln",
              "Är", "ger", "grü", "schö", "ñan", "ça", "øre", "東京", "大阪", "日本", "猫", "犬", "北京", "中文",
              "😀", "🚀", "👍", "🎉", "ab", "de", "en", "ing", "tion", "the", "und", "der", "42", "3", "7"]
_PUNCTUATION = [".", ",", "!", "?", "(", ")", "\"", "'", "-", ":", "„", "“", "…", "<", ">"]
FIXED_SENTENCES = [
    "Über die Straße, schön!",
    "The café in Zürich (naïve résumé).",
    "東京と大阪 😀🚀 👍",
    "  leading and   inner spaces  ",
    "",
    " ",
    "A char neither model knows: ☃ and ‽‽.",
    ">>deu<< Ein Satz.",
    ">>fra<<Une phrase",
    ">>xyz<< unknown code",
    ">>deu<<",
    ">><<",
    ">> deu<< spaced code",
    "x >>deu<< not at the start",
    ">>deu no end",
    "ﬁ ① ｶ",  # NFKC in the model's normalizer
]


def _sentences(count, seed, extra):
    rng = random.Random(seed)
    words = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(600)]
    lines = [" ".join(rng.choice(words) + (rng.choice(_PUNCTUATION) if rng.random() < 0.2 else "")
                      for _ in range(rng.randint(3, 12))) for _ in range(count)]
    # Both models see every character (so an unknown run is never a token of the other side) but `extra`.
    return lines + [" ".join(_SYLLABLES + _PUNCTUATION), extra]


def _train(lines, vocab_size, model_type="unigram"):
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, model_type=model_type, vocab_size=vocab_size,
        hard_vocab_limit=False, character_coverage=1.0, num_threads=1, minloglevel=2)
    return model.getvalue()


def _write_vocab_json(path, models):
    """OPUS-MT's layout: </s>, <unk>, (language codes), every piece of both models, <pad> last."""
    vocab = {"</s>": 0, "<unk>": 1}
    for code in LANGUAGE_CODES:
        vocab[code] = len(vocab)
    for model in models:
        processor = spm.SentencePieceProcessor(model_proto=model)
        for i in range(processor.get_piece_size()):
            piece = processor.id_to_piece(i)
            if not (processor.is_control(i) or processor.is_unknown(i)) and piece not in vocab:
                vocab[piece] = len(vocab)
    vocab["<pad>"] = len(vocab)
    path.write_text(json.dumps(vocab, ensure_ascii=False, indent=1), encoding="utf-8")
    return vocab


@pytest.fixture(scope="module")
def marian_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("opus_mt")
    source = _train(_sentences(500, 0, SOURCE_ONLY), 500)
    target = _train(_sentences(500, 1, TARGET_ONLY), 500)
    (root / "source.spm").write_bytes(source)
    (root / "target.spm").write_bytes(target)
    vocab = _write_vocab_json(root / "vocab.json", [source, target])
    assert 300 < len(vocab) < 1000
    return root


@pytest.fixture(scope="module")
def hf_tokenizer(marian_files):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Recommended: pip install sacremoses."
        return marian.MarianTokenizer(str(marian_files / "source.spm"), str(marian_files / "target.spm"),
                                      str(marian_files / "vocab.json"))


_TOKENIZERS = {}


def _tokenizer(files, side, engine):
    """One tokenizer per (side, engine), with its tokenize/detokenize traced once (eager ops are slow)."""
    key = (str(files), side, engine)
    if key not in _TOKENIZERS:
        tokenizer = SentencePieceTokenizer.from_marian(files / f"{side}.spm", files / "vocab.json", engine=engine)
        tokenize = tf.function(lambda text: tokenizer.tokenize(text).to_tensor(-1),
                               input_signature=[tf.TensorSpec([None], tf.string)])
        detokenize = tf.function(tokenizer.detokenize, input_signature=[tf.TensorSpec([None, None], tf.int32)])
        _TOKENIZERS[key] = tokenizer, tokenize, detokenize
    return _TOKENIZERS[key]


def _our_ids_as_marian(tokenizer, tokenize, texts):
    """Our ids of `texts`, mapped to Marian's ids, with the </s> that MarianTokenizer appends."""
    dense = tokenize(tf.constant(texts, tf.string)).numpy()
    eos = int(tokenizer.original_ids[tokenizer.end_id])
    return [tokenizer.original_ids[row[row >= 0]].tolist() + [eos] for row in dense]


def _marian_ids(hf_tokenizer, texts, side):
    if side == "source":
        return hf_tokenizer(texts)["input_ids"]
    return hf_tokenizer(text_target=texts)["input_ids"]


def _decode(ids):
    return [text.decode("utf-8") for text in np.asarray(ids).reshape(-1)]


ENGINES = ["fast", "standard"]
SIDES = ["source", "target"]
# Arbitrary Unicode text, less what the module docstring documents as different: the other side's characters, and
# the literal special tokens (MarianTokenizer splits them off).
TEXT = st.text(alphabet=st.characters(exclude_characters=[SOURCE_ONLY, TARGET_ONLY], exclude_categories=["Cs"]),
               max_size=40).filter(lambda text: not any(t in text for t in ("</s>", "<unk>", "<pad>")))
# Text that starts with a language code now and then.
CODED_TEXT = st.one_of(TEXT, st.builds(lambda code, text: code + text, st.sampled_from(LANGUAGE_CODES + (">>x<<",)),
                                       TEXT))


# ----------------------------------------------------------------------------------------------------------------------
# The vocabulary.


def test_vocabulary_puts_our_special_tokens_first_and_maps_back_to_marian(marian_files):
    marian_vocab = json.loads((marian_files / "vocab.json").read_text(encoding="utf-8"))
    tokenizer = SentencePieceTokenizer.from_marian(marian_files / "source.spm", marian_files / "vocab.json")
    assert tokenizer.engine == "fast"  # the "auto" choice for a unigram model
    assert tokenizer.vocab[:4] == ["<pad>", "<unk>", "[START]", "</s>"]
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.start_id, tokenizer.end_id) == (0, 1, 2, 3)
    assert tokenizer.source_start_id is None
    assert tokenizer.vocab_size == len(marian_vocab) + 1 == tokenizer.original_vocab_size + 1
    by_marian_id = sorted(marian_vocab, key=marian_vocab.get)
    assert tokenizer.vocab[4:] == [t for t in by_marian_id if t not in ("<pad>", "<unk>", "</s>")]
    original = tokenizer.original_ids
    assert original.dtype == np.int32 and original.shape == (tokenizer.vocab_size,)
    assert original[:4].tolist() == [marian_vocab["<pad>"], 1, marian_vocab["<pad>"], 0]
    for i, token in enumerate(tokenizer.vocab):
        if i != tokenizer.start_id:
            assert by_marian_id[original[i]] == token
    inverse = tokenizer.ids_from_original
    assert inverse.shape == (len(marian_vocab),)
    assert inverse[original].tolist() == [0, 1, 0] + list(range(3, tokenizer.vocab_size))
    assert tokenizer.from_original_ids([[0, 1], [marian_vocab["<pad>"], 2]]).tolist() == [[3, 1], [0, 4]]
    assert tokenizer.token_to_id(">>deu<<") == inverse[marian_vocab[">>deu<<"]]
    assert tokenizer.token_to_id("not a token") == tokenizer.unk_id
    assert tokenizer.id_to_token(2) == "[START]" and tokenizer.tokens([0, 3]) == ["<pad>", "</s>"]


def test_a_vocabulary_that_has_the_start_token_is_an_error_naming_the_file(marian_files, tmp_path):
    vocab = json.loads((marian_files / "vocab.json").read_text(encoding="utf-8"))
    vocab["[START]"] = len(vocab)
    (tmp_path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab\.json: already has '\[START\]'"):
        SentencePieceTokenizer.from_marian(marian_files / "source.spm", tmp_path / "vocab.json")


def test_model_reader_agrees_with_sentencepiece(marian_files):
    from keras_transformer.data.sentencepiece_model import read_model

    model = (marian_files / "target.spm").read_bytes()
    pieces, types, model_type = read_model(model)
    processor = spm.SentencePieceProcessor(model_proto=model)
    assert pieces == [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    for kind, is_kind in ((2, processor.is_unknown), (3, processor.is_control)):
        assert [i for i, t in enumerate(types) if t == kind] == [i for i in range(len(pieces)) if is_kind(i)]
    assert model_type == 1  # unigram


# ----------------------------------------------------------------------------------------------------------------------
# Tokenizing: the same ids as MarianTokenizer.


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("side", SIDES)
def test_ids_match_marian_on_fixed_sentences(marian_files, hf_tokenizer, side, engine):
    tokenizer, tokenize, _ = _tokenizer(marian_files, side, engine)
    assert tokenizer.engine == engine
    assert _our_ids_as_marian(tokenizer, tokenize, FIXED_SENTENCES) == _marian_ids(hf_tokenizer, FIXED_SENTENCES, side)
    # Eager and ragged, one string at a time, as well.
    for text in FIXED_SENTENCES[:3]:
        ids = tokenizer.tokenize([text])
        assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
        assert ids.to_list()[0] == tokenize(tf.constant([text])).numpy()[0][: ids.row_lengths()[0]].tolist()
    assert tokenizer.tokenize(tf.constant(FIXED_SENTENCES[0])).numpy().tolist() == tokenizer.tokenize(
        [FIXED_SENTENCES[0]]).to_list()[0]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("side", SIDES)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(CODED_TEXT, min_size=1, max_size=6))
def test_ids_match_marian_on_any_text(marian_files, hf_tokenizer, side, engine, texts):
    tokenizer, tokenize, _ = _tokenizer(marian_files, side, engine)
    assert _our_ids_as_marian(tokenizer, tokenize, texts) == _marian_ids(hf_tokenizer, texts, side)


def test_language_code_is_split_off_and_looked_up(marian_files):
    tokenizer, _, _ = _tokenizer(marian_files, "target", "fast")
    deu = tokenizer.token_to_id(">>deu<<")
    rows = tokenizer.tokenize([">>deu<< Hallo", ">>deu<<", ">>xyz<< Hallo", "Hallo", "a >>deu<<"]).to_list()
    assert rows[0][0] == deu and rows[0][1:] == rows[3]
    assert rows[1] == [deu]
    assert rows[2][0] == tokenizer.unk_id and rows[2][1:] == rows[3]  # an unknown code is one <unk>
    assert deu not in rows[4]


def test_documented_differences_from_marian(marian_files, hf_tokenizer):
    source, source_tokenize, _ = _tokenizer(marian_files, "source", "fast")
    vocab = json.loads((marian_files / "vocab.json").read_text(encoding="utf-8"))
    # A character the source model does not know but vocab.json has (a target piece): Marian finds it, we give <unk>.
    text = f"a {TARGET_ONLY} b"
    ours = _our_ids_as_marian(source, source_tokenize, [text])[0]
    theirs = hf_tokenizer([text])["input_ids"][0]
    assert vocab[TARGET_ONLY] in theirs and vocab[TARGET_ONLY] not in ours
    assert ours == [vocab["<unk>"] if i == vocab[TARGET_ONLY] else i for i in theirs]
    # The literal text of a special token is text here; Marian splits it off as the token.
    ours = _our_ids_as_marian(source, source_tokenize, ["a</s>b"])[0]
    assert ours.count(vocab["</s>"]) == 1 and hf_tokenizer(["a</s>b"])["input_ids"][0].count(vocab["</s>"]) == 2


def test_documented_difference_in_stripping_a_piece_that_ends_in_a_space(marian_files, tmp_path):
    # decode() strips the text; we drop whitespace-only pieces at the ends, but keep a last piece's own trailing "▁".
    vocab = json.loads((marian_files / "vocab.json").read_text(encoding="utf-8"))
    vocab["ab\u2581"] = len(vocab)  # not a piece of either model: decode() writes its text, "ab "
    (tmp_path / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    tokenizer = SentencePieceTokenizer.from_marian(marian_files / "target.spm", tmp_path / "vocab.json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = marian.MarianTokenizer(str(marian_files / "source.spm"), str(marian_files / "target.spm"),
                                           str(tmp_path / "vocab.json"))
    rows = [[vocab["k"], vocab["ab\u2581"], 0, 0], [vocab["ab\u2581"], vocab["k"], vocab["\u2581"], 0]]
    ours = _decode(tokenizer.detokenize(tokenizer.from_original_ids(rows)))
    theirs = [reference.decode(row, skip_special_tokens=True) for row in rows]
    assert theirs == ["kab", "ab k"]
    assert ours == ["kab ", "ab k"]


# ----------------------------------------------------------------------------------------------------------------------
# Detokenizing: the same text as MarianTokenizer.decode(..., skip_special_tokens=True).


def _marian_decode(hf_tokenizer, rows):
    """MarianTokenizer.decode of each row; with a shared vocab.json its default decodes with source.spm, so both."""
    default = [hf_tokenizer.decode(row, skip_special_tokens=True) for row in rows]
    with_target = [hf_tokenizer.decode(row, skip_special_tokens=True, use_source_tokenizer=False) for row in rows]
    assert default == with_target  # the pieces of both models decode alike
    return default


@pytest.mark.parametrize("engine", ENGINES)
def test_detokenize_matches_marian_decode(marian_files, hf_tokenizer, engine):
    tokenizer, _, detokenize = _tokenizer(marian_files, "target", engine)
    rows = hf_tokenizer(text_target=FIXED_SENTENCES)["input_ids"]
    expected = _marian_decode(hf_tokenizer, rows)
    ours = [tokenizer.from_original_ids(row) for row in rows]
    width = max(map(len, ours)) + 2
    # Dense and 0-padded, with [START] in front, as a decoder writes it; ragged; one sequence; in a tf.function.
    dense = np.array([[tokenizer.start_id] + row.tolist() + [0] * (width - len(row)) for row in ours], np.int32)
    assert _decode(tokenizer.detokenize(dense)) == expected
    assert _decode(tokenizer.detokenize(tf.ragged.constant([row.tolist() for row in ours]))) == expected
    assert _decode(tokenizer.detokenize(ours[0])) == expected[:1]
    assert _decode(detokenize(tf.constant(dense))) == expected
    # Detokenizing our own ids gives the text back (as the model's normalizer leaves it).
    round_trip = _decode(tokenizer.detokenize(tokenizer.tokenize(["über die straße, schön!", "東京 😀"])))
    assert round_trip == ["über die straße, schön!", "東京 😀"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("side", SIDES)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_detokenize_matches_marian_decode_on_any_ids(marian_files, hf_tokenizer, side, engine, data):
    tokenizer, _, detokenize = _tokenizer(marian_files, side, engine)
    size = tokenizer.original_vocab_size
    # Any ids, often the special ones, the "▁" piece, and language codes.
    frequent = [0, 1, size - 1, tokenizer.original_ids[tokenizer.token_to_id("▁")], 2, 3]
    marian_id = st.one_of(st.integers(0, size - 1), st.sampled_from(frequent))
    rows = data.draw(st.lists(st.lists(marian_id, max_size=12), min_size=1, max_size=4))
    width = max(map(len, rows))
    dense = np.array([tokenizer.from_original_ids(row).tolist() + [0] * (width - len(row)) for row in rows],
                     np.int32).reshape(len(rows), width)
    expected = [hf_tokenizer.decode(row, skip_special_tokens=True, use_source_tokenizer=side == "source")
                for row in rows]
    assert _decode(detokenize(tf.constant(dense))) == expected


# ----------------------------------------------------------------------------------------------------------------------
# Engines, saving and loading.


def test_auto_engine_falls_back_to_the_standard_tokenizer_for_bpe(marian_files, hf_tokenizer, tmp_path):
    bpe = _train(_sentences(100, 0, SOURCE_ONLY), 200, model_type="bpe")
    (tmp_path / "bpe.spm").write_bytes(bpe)
    vocab_path = marian_files / "vocab.json"
    tokenizer = SentencePieceTokenizer.from_marian(tmp_path / "bpe.spm", vocab_path)
    assert tokenizer.engine == "standard"
    with pytest.raises(ValueError, match="bpe model"):
        SentencePieceTokenizer.from_marian(tmp_path / "bpe.spm", vocab_path, engine="fast")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bpe_marian = marian.MarianTokenizer(str(tmp_path / "bpe.spm"), str(tmp_path / "bpe.spm"), str(vocab_path))
    texts = FIXED_SENTENCES[:4]
    eos = int(tokenizer.original_ids[tokenizer.end_id])
    ours = [tokenizer.original_ids[row].tolist() + [eos] for row in tokenizer.tokenize(texts).to_list()]
    assert ours == bpe_marian(texts)["input_ids"]


@pytest.mark.parametrize("engine", ENGINES)
def test_save_and_load_round_trip(marian_files, tmp_path, engine):
    tokenizer, _, _ = _tokenizer(marian_files, "source", engine)
    tokenizer.save(tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "tokenizer.json").read_text())["format"] == (
        "keras_transformer.SentencePieceTokenizer")
    loaded = SentencePieceTokenizer.load(tmp_path / "saved")
    assert loaded.vocab == tokenizer.vocab and loaded.engine == engine
    assert loaded.original_ids.tolist() == tokenizer.original_ids.tolist()
    assert loaded.get_config() == tokenizer.get_config()
    ids = tokenizer.tokenize(FIXED_SENTENCES)
    assert loaded.tokenize(FIXED_SENTENCES).to_list() == ids.to_list()
    assert _decode(loaded.detokenize(ids)) == _decode(tokenizer.detokenize(ids))
    # The saved directory is a Marian one as well.
    assert SentencePieceTokenizer.from_marian(tmp_path / "saved" / "sentencepiece.spm",
                                              tmp_path / "saved" / "vocab.json").vocab == tokenizer.vocab


def _damage(directory, name, content):
    path = directory / name
    if content is None:
        path.unlink()
    else:
        path.write_bytes(content(path.read_bytes()))


@pytest.mark.parametrize("name, content, message", [
    ("tokenizer.json", None, r"tokenizer\.json: not found"),
    ("vocab.json", None, r"vocab\.json: not found"),
    ("sentencepiece.spm", None, r"sentencepiece\.spm: not found"),
    ("tokenizer.json", lambda data: data[: len(data) // 2], r"tokenizer\.json:\d+: expected JSON"),
    ("tokenizer.json", lambda data: data.replace(b"SentencePieceTokenizer", b"SubwordTokenizer"),
     r"tokenizer\.json:1: expected \"format\""),
    ("vocab.json", lambda data: data[: len(data) // 2], r"vocab\.json:\d+: expected JSON"),
    ("vocab.json", lambda data: data.replace(b'"</s>": 0', b'"</s>": 7'), r"vocab\.json: expected each id once"),
    ("vocab.json", lambda data: data.replace(b'"<unk>"', b'"<UNK>"'), r"vocab\.json: expected the special tokens"),
    ("vocab.json", lambda data: b"\xff" + data, r"vocab\.json:1: expected UTF-8"),
    ("sentencepiece.spm", lambda data: data[: len(data) // 2], r"sentencepiece\.spm: expected a SentencePiece model"),
    ("sentencepiece.spm", lambda data: b"not a model", r"sentencepiece\.spm: expected a SentencePiece model"),
])
def test_load_of_a_damaged_directory_names_the_file(marian_files, tmp_path, name, content, message):
    tokenizer, _, _ = _tokenizer(marian_files, "source", "fast")
    tokenizer.save(tmp_path / "saved")
    _damage(tmp_path / "saved", name, content)
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        SentencePieceTokenizer.load(tmp_path / "saved")


def test_save_writes_only_into_the_directory(marian_files, tmp_path):
    tokenizer, _, _ = _tokenizer(marian_files, "target", "fast")
    tokenizer.save(tmp_path / "partial")
    shutil.move(str(tmp_path / "partial"), str(tmp_path / "final"))  # a caller's rename after writing
    assert sorted(p.name for p in (tmp_path / "final").iterdir()) == ["sentencepiece.spm", "tokenizer.json",
                                                                      "vocab.json"]
    assert SentencePieceTokenizer.load(tmp_path / "final").vocab == tokenizer.vocab


# ----------------------------------------------------------------------------------------------------------------------
# SavedModel and TFLite.


class _Echo(tf.Module):
    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(self, text):
        ids = self.tokenizer.tokenize(text).to_tensor()
        return {"ids": ids, "text": self.tokenizer.detokenize(ids)}


@pytest.mark.parametrize("engine", ENGINES)
def test_tokenizer_in_a_saved_model(marian_files, tmp_path, engine):
    tokenizer, _, _ = _tokenizer(marian_files, "target", engine)
    module = _Echo(tokenizer)
    tf.saved_model.save(module, str(tmp_path / "saved"), signatures={"serving_default": module.serve})
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    texts = tf.constant(FIXED_SENTENCES)
    out = loaded.signatures["serving_default"](text=texts)
    assert out["ids"].numpy().tolist() == tokenizer.tokenize(texts).to_tensor().numpy().tolist()
    assert _decode(out["text"]) == _decode(module.serve(texts)["text"])


@pytest.mark.filterwarnings("ignore:.*tf.lite.Interpreter is deprecated")
def test_fast_engine_converts_to_tflite(marian_files):
    from tensorflow.lite.python.interpreter import InterpreterWithCustomOps
    from tensorflow_text import tflite_registrar

    from keras_transformer.export.tflite import tflite_op_names

    tokenizer, _, _ = _tokenizer(marian_files, "target", "fast")
    module = _Echo(tokenizer)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([module.serve.get_concrete_function()], module)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = True
    content = converter.convert()
    assert not [name for name in tflite_op_names(content) if name.startswith("Flex")]
    runner = InterpreterWithCustomOps(custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS,
                                      model_content=content).get_signature_runner()
    # One batch of all sentences, then one sentence at a time (the interpreter resizes its inputs each time).
    for texts in [FIXED_SENTENCES] + [[text] for text in FIXED_SENTENCES[:8]]:
        out = runner(text=np.array([text.encode("utf-8") for text in texts], dtype=object))
        expected = module.serve(tf.constant(texts))
        assert _decode(out["text"]) == _decode(expected["text"])
        # (TFLite gives an empty batch of ids the width 1.)
        width = expected["ids"].shape[1]
        assert out["ids"][:, :width].tolist() == expected["ids"].numpy().tolist()
        assert not out["ids"][:, width:].any()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_tokenizer_and_its_saved_model_outlive_a_new_random_seed(marian_files, tmp_path, engine):
    # TensorFlow clears its eager caches on a new seed; a model resource owned by a cached kernel would go with them
    # (tensorflow-text's own: "Resource ... does not exist"), and `train` sets the seed after loading a fine-tune's
    # starting run.
    import gc

    import keras

    def make():
        return SentencePieceTokenizer.from_marian(marian_files / "target.spm", marian_files / "vocab.json",
                                                  engine=engine)

    tokenizer, twin = make(), make()  # the same model: they may share it
    module = _Echo(tokenizer)
    tf.saved_model.save(module, str(tmp_path / "saved"), signatures={"serving_default": module.serve})
    loaded = tf.saved_model.load(str(tmp_path / "saved")).signatures["serving_default"]
    texts = tf.constant(FIXED_SENTENCES)
    ids = tokenizer.tokenize(texts).to_tensor().numpy().tolist()
    text = _decode(tokenizer.detokenize(tokenizer.tokenize(texts)))
    del twin
    gc.collect()
    keras.utils.set_random_seed(1)
    tf.random.set_seed(2)
    assert tokenizer.tokenize(texts).to_tensor().numpy().tolist() == ids
    assert _decode(tokenizer.detokenize(tokenizer.tokenize(texts))) == text
    assert loaded(text=texts)["ids"].numpy().tolist() == ids
