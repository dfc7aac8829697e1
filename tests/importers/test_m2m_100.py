"""`keras-transformer import` on NLLB-style M2M-100 checkpoints made here: the run it writes translates on the command
line as transformers does, refuses unknown language codes, and what cannot be imported is refused in one line
(tests/backends/test_m2m_100_parity.py checks logits and decoding on every backend)."""

import json
import os

import pytest

pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")
pytest.importorskip("torch")

from tests.cli_here import cli_here  # noqa: E402
from tests.importers.m2m_100_checkpoint import MAX_NEW  # noqa: E402
from tests.importers.m2m_100_checkpoint import make_m2m_100_checkpoint  # noqa: E402
from tests.importers.m2m_100_checkpoint import reference_translations  # noqa: E402
from tests.importers.m2m_100_checkpoint import sentences  # noqa: E402
from tests.importers.m2m_100_files import write_nllb_tokenizer_files  # noqa: E402
from tests.importers.test_marian import assert_one_line_error  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("nllb"))
    model, tokenizer = make_m2m_100_checkpoint(directory)
    return directory, model, tokenizer


@pytest.fixture(scope="module")
def imported(checkpoint, tmp_path_factory):
    from keras_transformer import cli as commands

    run_dir = str(tmp_path_factory.mktemp("runs") / "nllb")
    assert commands.main(["import", checkpoint[0], "--output", run_dir]) == 0  # keras-transformer import
    return run_dir, None


def _stdin(text):
    import io

    return io.TextIOWrapper(io.BytesIO(text.encode("utf-8")), encoding="utf-8")


def test_cli_translates_line_for_line_as_transformers(checkpoint, imported, capsys, monkeypatch):
    texts = sentences(20, seed=4)
    monkeypatch.setattr("sys.stdin", _stdin("\n".join(texts) + "\n"))
    process = cli_here(capsys, "translate", imported[0], "--source-lang", "deu_Latn", "--target-lang", "spa_Latn",
                       "--beam-size", "1", "--max-length", str(MAX_NEW))
    assert process.returncode == 0, process.stderr
    _, model, tokenizer = checkpoint
    assert process.stdout.splitlines() == reference_translations(model, tokenizer, texts, "deu_Latn",
                                                                 ["spa_Latn"] * 20, 1)


def test_an_unknown_language_is_refused_naming_the_closest_codes(imported, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", _stdin("a sentence\n"))
    process = cli_here(capsys, "translate", imported[0], "--target-lang", "deu_latn")
    assert process.returncode == 2
    lines = [line for line in process.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "deu_latn" in lines[0] and "deu_Latn" in lines[0], process.stderr


def test_what_cannot_be_imported_is_refused_in_one_line(checkpoint, tmp_path, capsys):
    import shutil

    def copy(name):
        directory = str(tmp_path / name)
        shutil.copytree(checkpoint[0], directory)
        return directory

    moe = copy("moe")
    with open(os.path.join(moe, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    with open(os.path.join(moe, "config.json"), "w", encoding="utf-8") as f:
        json.dump({**config, "model_type": "nllb-moe"}, f)
    process = cli_here(capsys, "import", moe, "--output", str(tmp_path / "out"))
    assert_one_line_error(process, "nllb-moe", "mixtures of experts", "supported: m2m_100, marian")

    no_codes = copy("no-codes")
    write_nllb_tokenizer_files(no_codes, ())
    process = cli_here(capsys, "import", no_codes, "--output", str(tmp_path / "out"))
    assert_one_line_error(process, "language codes")

    outside = copy("outside")
    os.remove(os.path.join(outside, "model.safetensors"))
    with open(os.path.join(outside, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
        json.dump({"weight_map": {"model.shared.weight": "../elsewhere/model.safetensors"}}, f)
    process = cli_here(capsys, "import", outside, "--output", str(tmp_path / "out"))
    assert_one_line_error(process, "../elsewhere/model.safetensors", "inside the checkpoint directory")
    assert not os.path.exists(tmp_path / "out")


# Runs in a fresh interpreter with `-I -S`, where keras_transformer is not importable (as in test_saved_model.py).
CLIENT = """
import importlib.util, json, sys
sys.path.append(sys.argv[1])
assert importlib.util.find_spec("keras_transformer") is None, "keras_transformer is importable"
import tensorflow as tf
import tensorflow_text  # noqa: F401 (registers the tokenizer ops)
translate = tf.saved_model.load(sys.argv[2]).signatures["serving_default"]
texts, targets = json.loads(sys.argv[3])
outputs = translate(text=tf.constant(texts), target_language=tf.constant(targets))
print(json.dumps([t.decode("utf-8") for t in outputs["translation"].numpy()]))
"""


def test_one_saved_model_translates_into_any_language_as_the_python_translator(imported, tmp_path):
    import subprocess
    import sys
    import sysconfig

    from keras_transformer import export_run
    from keras_transformer.translators import SavedModelTranslator
    from keras_transformer.translators import load_translator

    path = str(tmp_path / "saved")
    export_run(imported[0], saved_model=path, max_length=MAX_NEW, verbose=0)
    saved, python = SavedModelTranslator(path), load_translator(imported[0])
    texts = sentences(100, seed=5)
    outputs = {}
    for target in ("deu_Latn", "fra_Latn"):
        outputs[target] = saved.translate(texts, source_language="spa_Latn", target_language=target)
        assert outputs[target] == python.translate(texts, source_language="spa_Latn", target_language=target,
                                                   max_length=MAX_NEW)
    assert outputs["deu_Latn"] != outputs["fra_Latn"]
    with pytest.raises(ValueError, match="unknown language code 'fra_latn'; closest: fra_Latn"):
        saved.translate(texts[:1], target_language="fra_latn")

    mixed = ["deu_Latn", "fra_Latn"] * 3
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    result = subprocess.run([sys.executable, "-I", "-S", "-c", CLIENT, sysconfig.get_paths()["purelib"], path,
                             json.dumps([texts[:6], mixed])], cwd=tmp_path, capture_output=True, text=True,
                            env={**env, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    expected = python.translate(texts[:6], target_language=mixed, max_length=MAX_NEW)  # default source language
    assert json.loads(result.stdout.strip().splitlines()[-1]) == expected


def test_the_tflite_file_takes_ids_and_translates_into_any_language_beside_its_tokenizer(imported, tmp_path, capsys,
                                                                                         monkeypatch):
    """NLLB's BPE tokenizer has no TFLite op: the file takes and returns token ids, its tokenizer is written beside
    it, and `TFLiteTranslator` (what `translate` loads) gives the Python translator's translations."""
    from keras_transformer.export.tflite import tflite_op_names
    from keras_transformer.translators import load_translator
    from keras_transformer.translators.tflite import TFLiteTranslator

    path = tmp_path / "nllb.tflite"
    process = cli_here(capsys, "export", imported[0], "--saved-model", str(tmp_path / "saved"), "--tflite", str(path),
                       "--beam-size", "1", "--max-length", str(MAX_NEW))
    assert process.returncode == 0, process.stderr
    assert (tmp_path / "nllb.tokenizer").is_dir()
    ops = set(tflite_op_names(path.read_bytes()))
    assert not [op for op in ops if "Sentencepiece" in op]
    # Converted unfrozen: every weight became a constant in the converter (none is left a variable to read).
    assert not ops & {"VAR_HANDLE", "READ_VARIABLE"}, ops
    tflite, python = TFLiteTranslator(str(path)), load_translator(imported[0])
    texts = sentences(100, seed=8)
    outputs = {}
    for target in ("deu_Latn", "fra_Latn"):
        outputs[target] = tflite.translate(texts + [""], source_language="spa_Latn", target_language=target)
        assert outputs[target] == python.translate(texts + [""], source_language="spa_Latn", target_language=target,
                                                   beam_size=1, max_length=MAX_NEW)
    assert outputs["deu_Latn"] != outputs["fra_Latn"]
    with pytest.raises(ValueError, match="closest: fra_Latn"):
        tflite.translate(texts[:1], target_language="fra_latn")
    # Weights a flatbuffer cannot hold are refused before any work, naming the way out.
    monkeypatch.setattr("keras_transformer.export.tflite.FLATBUFFER_LIMIT", 1000)
    process = cli_here(capsys, "export", imported[0], "--saved-model", str(tmp_path / "saved2"), "--tflite",
                       str(tmp_path / "big.tflite"))
    assert process.returncode == 2 and "--tflite-quantize dynamic_range" in process.stderr, process.stderr
    assert not (tmp_path / "saved2").exists() and not (tmp_path / "big.tflite").exists()


def test_the_ctranslate2_export_translates_as_ctranslate2s_own_conversion(checkpoint, imported, tmp_path, capsys):
    """`export --ctranslate2` of an imported NLLB run: sources start with their language code and each row's target
    language is its `target_prefix`; greedy translations are transformers', and beam search gives what
    CTranslate2's own converter of the same checkpoint gives."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    from keras_transformer.translators.ctranslate2 import CTranslate2Translator

    path = str(tmp_path / "ct2")
    process = cli_here(capsys, "export", imported[0], "--ctranslate2", path)
    assert process.returncode == 0, process.stderr
    ours = CTranslate2Translator(path)
    directory, model, tokenizer = checkpoint
    texts = sentences(100, seed=7)
    targets = [("deu_Latn", "fra_Latn", "spa_Latn")[i % 3] for i in range(len(texts))]
    greedy = ours.translate(texts, beam_size=1, max_length=MAX_NEW, source_language="eng_Latn",
                            target_language=targets)
    assert greedy == reference_translations(model, tokenizer, texts, "eng_Latn", targets, 1)

    ctranslate2.converters.TransformersConverter(directory).convert(str(tmp_path / "theirs"))
    theirs = ctranslate2.Translator(str(tmp_path / "theirs"))
    tokenizer.src_lang = "eng_Latn"
    sources = [tokenizer.convert_ids_to_tokens(tokenizer(text)["input_ids"]) for text in texts]
    found = theirs.translate_batch(sources, target_prefix=[[code] for code in targets], beam_size=4,
                                   max_decoding_length=MAX_NEW, min_decoding_length=0, length_penalty=1.0)
    expected = [tokenizer.decode(tokenizer.convert_tokens_to_ids(r.hypotheses[0]), skip_special_tokens=True)
                for r in found]
    assert ours.translate(texts, beam_size=4, length_penalty=1.0, max_length=MAX_NEW, source_language="eng_Latn",
                          target_language=targets) == expected
    with pytest.raises(ValueError, match="closest: spa_Latn"):
        ours.translate(texts[:1], target_language="spa_latn")
    with pytest.raises(ValueError, match="takes its languages in `translate` only"):
        ours.translate_n_best(texts[:1], 2)


def test_evaluate_and_tune_take_the_languages(checkpoint, imported, tmp_path, capsys):
    import shutil

    _, model, tokenizer = checkpoint
    texts = sentences(30, seed=6)
    references = reference_translations(model, tokenizer, texts, "deu_Latn", ["spa_Latn"] * 30, 1)
    (tmp_path / "src.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text("\n".join(references) + "\n", encoding="utf-8")
    languages = ("--source-lang", "deu_Latn", "--target-lang", "spa_Latn")
    process = cli_here(capsys, "evaluate", imported[0], "--src", str(tmp_path / "src.txt"), "--ref",
                       str(tmp_path / "ref.txt"), "--beam-size", "1", "--max-length", str(MAX_NEW), *languages)
    assert process.returncode == 0, process.stderr
    assert "= 100.00" in process.stdout, process.stdout  # the translations are transformers' own

    run_dir = str(tmp_path / "run")
    shutil.copytree(imported[0], run_dir)
    process = cli_here(capsys, "tune", run_dir, "--src", str(tmp_path / "src.txt"), "--ref", str(tmp_path / "ref.txt"),
                       "--beam-sizes", "1", "2", "--length-penalties", "1.0", "--overwrite", *languages)
    assert process.returncode == 0, process.stderr
    with open(os.path.join(run_dir, "decoding.json"), encoding="utf-8") as f:
        assert json.load(f)["beam_size"] in (1, 2)
    process = cli_here(capsys, "tune", run_dir, "--src", str(tmp_path / "src.txt"), "--ref", str(tmp_path / "ref.txt"),
                       "--overwrite", "--target-lang", "spa_latn")
    assert process.returncode == 2 and "closest: spa_Latn" in process.stderr, process.stderr


def test_a_fine_tune_learns_a_language_pair_laid_out_as_transformers_does(checkpoint, imported, tmp_path, capsys):
    from keras_transformer import load_run
    from keras_transformer import load_translator
    from keras_transformer.data.pipeline import make_dataset

    _, model, tokenizer = checkpoint
    sources, targets = sentences(16, seed=8), sentences(16, seed=9)
    (tmp_path / "src.txt").write_text("\n".join(sources * 20) + "\n", encoding="utf-8")
    (tmp_path / "tgt.txt").write_text("\n".join(targets * 20) + "\n", encoding="utf-8")
    files = ("--src", str(tmp_path / "src.txt"), "--tgt", str(tmp_path / "tgt.txt"))
    out = str(tmp_path / "fine-tuned")
    # The imported run has no default target language: the pair is required, and checked, before any work.
    for flags, said in ((["--source-lang", "fra_Latn"], "target_language (--target-lang): required"),
                        (["--target-lang", "deu_latn"], "closest: deu_Latn")):
        process = cli_here(capsys, "train", *files, "--output", out, "--init-from", imported[0], *flags)
        assert process.returncode == 2 and said in process.stderr, process.stderr
    process = cli_here(capsys, "train", *files, "--output", out, "--target-lang", "deu_Latn")
    assert process.returncode == 2 and "a language pair is chosen when fine-tuning" in process.stderr
    assert not os.path.exists(out)

    process = cli_here(capsys, "train", *files, "--output", out, "--init-from", imported[0], "--source-lang",
                       "fra_Latn", "--target-lang", "deu_Latn", "--epochs", "8", "--batch-size", "32",
                       "--warmup-steps", "10", "--lr-scale", "0.2", "--no-jit-compile")
    assert process.returncode == 0, process.stderr
    run = load_run(out)
    assert (run.training_config.source_language, run.training_config.target_language) == ("fra_Latn", "deu_Latn")

    # What it trained on, in the checkpoint's ids, is what transformers' tokenizer gives for fine-tuning:
    # `[fra_Latn] X </s>` -> labels `[deu_Latn] Y </s>`, the decoder starting from `</s>` (`[START]` here).
    tokenizer.src_lang, tokenizer.tgt_lang = "fra_Latn", "deu_Latn"
    theirs = tokenizer(sources, text_target=targets)
    (inputs, labels), = make_dataset((sources, targets), run.source_tokenizer, run.target_tokenizer, batch_size=16,
                                     max_length=64, shuffle=False, bucket=False).take(1)
    original = run.target_tokenizer.original_ids
    for row in range(16):
        encoder = inputs["encoder_inputs"][row].numpy()
        ours_labels = labels[row].numpy()
        assert original[encoder[encoder > 0]].tolist() == theirs["input_ids"][row]
        assert original[ours_labels[ours_labels > 0]].tolist() == theirs["labels"][row]
        decoder = inputs["decoder_inputs"][row].numpy()
        assert decoder[0] == run.target_tokenizer.start_id
        assert original[decoder[1:][decoder[1:] > 0]].tolist() == theirs["labels"][row][:-1]

    # It learned the pair, and translates into it unless told otherwise; before, transformers' (the same weights)
    # translations of these sources into deu_Latn were none of the targets.
    before = reference_translations(model, tokenizer, sources, "fra_Latn", ["deu_Latn"] * 16, 1)
    translator = load_translator(out)
    after = translator.translate(sources, beam_size=1, max_length=32)
    assert translator.default_languages == ("fra_Latn", "deu_Latn")
    learned = sum(a == b for a, b in zip(after, targets))
    assert sum(a == b for a, b in zip(before, targets)) == 0 and learned >= 10, (learned, after[:3])


def test_keras_hub_generate_and_fit_take_the_languages_as_transformers(checkpoint, imported):
    import keras_hub

    from keras_transformer import TransformerSeq2SeqLM
    from keras_transformer.decoding.samplers import BeamSampler
    from keras_transformer.decoding.samplers import GreedySampler

    _, model, tokenizer = checkpoint
    task = TransformerSeq2SeqLM.from_run(imported[0])
    texts = sentences(12, seed=11)
    targets = ["deu_Latn", "fra_Latn", "spa_Latn"] * 4
    with pytest.raises(ValueError, match="target_language: required"):
        task.generate(texts[:1])
    with pytest.raises(ValueError, match="closest: fra_Latn"):
        task.generate({"encoder_text": texts[:1], "target_language": "fra_latn"})
    for sampler, beams in ((GreedySampler(), 1), (BeamSampler(num_beams=4, length_penalty=1.0,
                                                              length_penalty_rule="transformers"), 4)):
        task.compile(sampler=sampler)
        expected = reference_translations(model, tokenizer, texts, "eng_Latn", targets, beams)
        found = task.generate({"encoder_text": texts, "target_language": targets}, max_length=MAX_NEW)
        assert found == expected, (beams, found[:3], expected[:3])
    # keras-hub's own greedy sampler reads the forced language from the prompt; the default pair is settable.
    task.compile(sampler="greedy")
    task.preprocessor.source_language, task.preprocessor.target_language = "deu_Latn", "spa_Latn"
    expected = reference_translations(model, tokenizer, texts, "deu_Latn", ["spa_Latn"] * 12, 1)
    assert task.generate(texts, max_length=MAX_NEW) == expected
    assert isinstance(task.sampler, keras_hub.samplers.GreedySampler)

    # fit's batches are transformers' fine-tuning layout: [src] X </s> -> [tgt] Y </s>
    tokenizer.src_lang, tokenizer.tgt_lang = "deu_Latn", "spa_Latn"
    theirs = tokenizer(texts[:2], text_target=texts[2:4])
    x, labels, _ = task.preprocessor((texts[:2], texts[2:4]))
    original = task.preprocessor.target.inner.original_ids
    for row in range(2):
        encoder, label = x["encoder_inputs"][row].numpy(), labels[row].numpy()
        assert original[encoder[encoder > 0]].tolist() == theirs["input_ids"][row]
        assert original[label[label > 0]].tolist() == theirs["labels"][row]
