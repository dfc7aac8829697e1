"""`keras-transformer import` on Marian (OPUS-MT) checkpoints made here: the run it writes translates like
`transformers`, exports like any run, fine-tunes, and bad checkpoints are refused in one line."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

from tests.cli_here import cli_here  # noqa: E402
from tests.importers.marian_files import EN_WORDS  # noqa: E402
from tests.importers.marian_files import WORDS  # noqa: E402
from tests.importers.marian_files import make_marian_checkpoint  # noqa: E402
from tests.importers.marian_files import sentences  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cli(*args, stdin=None, env=None, timeout=600):
    """Runs `keras-transformer ARGS` in a fresh process; returns the finished process (text output)."""
    return subprocess.run([sys.executable, "-m", "keras_transformer.cli", *args], input=stdin, capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})},
                          timeout=timeout)


def assert_one_line_error(process, *fragments):
    assert process.returncode == 2, process.stderr
    lines = [line for line in process.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("keras-transformer import: error: "), process.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("opus-mt-de-en"))
    model, config = make_marian_checkpoint(directory)
    return directory, model, config


@pytest.fixture(scope="module")
def imported(checkpoint, tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("runs") / "opus-mt-de-en")
    process = cli("import", checkpoint[0], "--output", run_dir)
    assert process.returncode == 0, process.stderr
    return run_dir


@pytest.fixture(scope="module")
def texts():
    return sentences(WORDS, 100, seed=7)


def reference_greedy(checkpoint, texts):
    """transformers' greedy translations (`generate(num_beams=1)` + `decode(skip_special_tokens=True)`)."""
    import torch
    from transformers import MarianTokenizer

    directory, model, _ = checkpoint
    tokenizer = MarianTokenizer.from_pretrained(directory)
    with torch.no_grad():
        batch = tokenizer(texts, return_tensors="pt", padding=True)
        out = model.generate(**batch, num_beams=1, do_sample=False)
    return [tokenizer.decode(row, skip_special_tokens=True) for row in out]


def test_the_run_directory_and_what_it_records(imported, checkpoint):
    names = set(os.listdir(imported))
    assert {"model.keras", "config.json", "tokenizers", "imported.json"} <= names
    assert not [n for n in names if n.startswith(".tmp")]
    config = json.load(open(os.path.join(imported, "config.json")))["model"]
    assert (config["position"], config["activation"], config["layer_norm_epsilon"]) == ("sinusoidal_concat",
                                                                                        "swish", 1e-5)
    assert config["share_embeddings"] and config["tie_output"] and config["output_bias"]
    assert config["src_vocab_size"] == checkpoint[2].vocab_size + 1  # one more row: our padding id 0
    assert json.load(open(os.path.join(imported, "imported.json")))["format"] == "marian"


def test_translate_beam_1_gives_transformers_greedy_text_line_for_line(imported, checkpoint, texts, capsys):
    expected = reference_greedy(checkpoint, texts)
    process = cli_here(capsys, "translate", imported, "--beam-size", "1", stdin="\n".join(texts) + "\n")
    assert process.returncode == 0, process.stderr
    ours = process.stdout.split("\n")[:-1]
    assert len(ours) == len(texts)
    mismatches = [(t, o, e) for t, o, e in zip(texts, ours, expected) if o != e]
    assert not mismatches, mismatches[:3]
    assert len(set(expected)) > 25  # a random model that still says different things for different inputs


def test_translate_defaults_to_transformers_generate_beam_search(imported, checkpoint, texts, capsys):
    """Without flags, `translate` decodes as the checkpoint's generation settings say (OPUS-MT: beam 4, length
    penalty 1.0 by transformers' rule, max_length, </s> forced at the last position), line for line."""
    import torch
    from transformers import MarianTokenizer

    directory, model, _ = checkpoint
    tokenizer = MarianTokenizer.from_pretrained(directory)
    with torch.no_grad():
        out = model.generate(**tokenizer(texts[:40], return_tensors="pt", padding=True))
    expected = [tokenizer.decode(row, skip_special_tokens=True) for row in out]
    decoding = json.load(open(os.path.join(imported, "decoding.json")))
    assert (decoding["beam_size"], decoding["length_penalty_rule"], decoding["force_end"]) == (4, "transformers",
                                                                                               True)
    process = cli_here(capsys, "translate", imported, stdin="\n".join(texts[:40]) + "\n")
    assert process.returncode == 0, process.stderr
    assert process.stdout.split("\n")[:-1] == expected


def test_exports_translate_like_the_python_translator(imported, tmp_path, texts):
    """SavedModel, TFLite and CTranslate2 exports of the imported run: the same greedy translations."""
    pytest.importorskip("ctranslate2")
    from keras_transformer import export_run
    from keras_transformer import load_run
    from keras_transformer.decoding.translator import Translator
    from keras_transformer.export.ctranslate2_model import export_ctranslate2
    from keras_transformer.translators.ctranslate2 import CTranslate2Translator
    from keras_transformer.translators.saved_model import SavedModelTranslator
    from keras_transformer.translators.tflite import TFLiteTranslator

    run = load_run(imported)
    # The run's decoding.json ends a translation at its max_length (transformers' forced_eos_token_id); exports
    # keep that.
    expected = Translator(run.model, run.source_tokenizer, run.target_tokenizer, max_length=64,
                          decoding=run.decoding).translate(texts, beam_size=1)
    paths = export_run(imported, saved_model=str(tmp_path / "saved"), tflite=str(tmp_path / "m.tflite"),
                       beam_size=1, max_length=64, verbose=0)
    export_ctranslate2(imported, str(tmp_path / "ct2"), verbose=0)
    assert SavedModelTranslator(paths["saved_model"]).translate(texts) == expected
    assert CTranslate2Translator(str(tmp_path / "ct2")).translate(texts, beam_size=1, max_length=64) == expected
    assert 0 < expected.count("") < 20  # some translations end at their first token, in every engine
    tflite = TFLiteTranslator(paths["tflite"])
    assert [tflite.translate([text])[0] for text in texts[:20]] == expected[:20]

    # The SavedModel in a process that has only TensorFlow and tensorflow-text.
    script = ("import sys, json, tensorflow as tf, tensorflow_text\n"
              "f = tf.saved_model.load(sys.argv[1]).signatures['serving_default']\n"
              "texts = json.loads(sys.stdin.read())\n"
              "out = f(text=tf.constant(texts))['translation'].numpy()\n"
              "assert not any(m.startswith('keras_transformer') for m in sys.modules)\n"
              "print(json.dumps([t.decode('utf-8') for t in out]))\n")
    process = subprocess.run([sys.executable, "-c", script, paths["saved_model"]], input=json.dumps(texts[:20]),
                             capture_output=True, text=True, cwd=str(tmp_path), timeout=300,
                             env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert process.returncode == 0, process.stderr[-2000:]
    assert json.loads(process.stdout.splitlines()[-1]) == expected[:20]


def test_fine_tuning_an_imported_run_lowers_the_loss_and_translates(imported, tmp_path, capsys):
    src, tgt = sentences(WORDS, 64, seed=11), sentences(EN_WORDS, 64, seed=12)
    (tmp_path / "train.de").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp_path / "train.en").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    out = str(tmp_path / "tuned")
    process = cli_here(capsys, "train", "--src", str(tmp_path / "train.de"), "--tgt", str(tmp_path / "train.en"),
                       "--output", out, "--init-from", imported, "--epochs", "3", "--batch-size", "16",
                       "--warmup-steps", "4", "--no-jit-compile")
    assert process.returncode == 0, process.stderr[-3000:]
    losses = [epoch["loss"] for epoch in json.load(open(os.path.join(out, "history.json")))["epochs"]]
    assert len(losses) == 3 and losses[-1] < losses[0], losses
    process = cli_here(capsys, "translate", out, "--beam-size", "1", stdin="\n".join(src[:5]) + "\n")
    assert process.returncode == 0 and len(process.stdout.split("\n")) == 6, process.stderr


def test_a_second_import_needs_overwrite_and_failures_leave_nothing(checkpoint, imported, tmp_path, capsys):
    assert_one_line_error(cli_here(capsys, "import", checkpoint[0], "--output", imported), "--overwrite")
    assert cli_here(capsys, "import", checkpoint[0], "--output", imported, "--overwrite").returncode == 0
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in os.listdir(checkpoint[0]):
        data = open(os.path.join(checkpoint[0], name), "rb").read()
        (broken / name).write_bytes(data[: len(data) // 2] if name == "model.safetensors" else data)
    out = tmp_path / "never"
    assert_one_line_error(cli_here(capsys, "import", str(broken), "--output", str(out)), "model.safetensors",
                          "truncated")
    assert not out.exists() and not [p for p in os.listdir(tmp_path) if p.startswith(".tmp")]


def test_bad_checkpoints_are_refused_in_one_line(checkpoint, tmp_path, capsys):
    # Another architecture.
    bart = tmp_path / "bart"
    bart.mkdir()
    (bart / "config.json").write_text(json.dumps({"model_type": "bart", "architectures": ["BartModel"]}))
    assert_one_line_error(cli_here(capsys, "import", str(bart), "--output", str(tmp_path / "a")), "config.json",
                          "'bart'", "marian")
    # A missing tokenizer file.
    partial = tmp_path / "partial"
    partial.mkdir()
    for name in os.listdir(checkpoint[0]):
        if name != "source.spm":
            (partial / name).write_bytes(open(os.path.join(checkpoint[0], name), "rb").read())
    assert_one_line_error(cli_here(capsys, "import", str(partial), "--output", str(tmp_path / "b")), "source.spm",
                          "missing")
    # A tensor of another shape than config.json says.
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    for name in os.listdir(checkpoint[0]):
        (wrong / name).write_bytes(open(os.path.join(checkpoint[0], name), "rb").read())
    config = json.load(open(wrong / "config.json"))
    config["encoder_ffn_dim"] = config["decoder_ffn_dim"] = 96
    (wrong / "config.json").write_text(json.dumps(config))
    assert_one_line_error(cli_here(capsys, "import", str(wrong), "--output", str(tmp_path / "c")), "fc1.weight",
                          "shape")
    # Generation settings past what the model holds or decoding should spend.
    for letter, setting, value in (("e", "num_beams", 64), ("f", "max_length", 100_000)):
        greedy = tmp_path / f"generation-{setting}"
        greedy.mkdir()
        for name in os.listdir(checkpoint[0]):
            (greedy / name).write_bytes(open(os.path.join(checkpoint[0], name), "rb").read())
        generation = json.load(open(greedy / "generation_config.json"))
        (greedy / "generation_config.json").write_text(json.dumps(dict(generation, **{setting: value})))
        assert_one_line_error(cli_here(capsys, "import", str(greedy), "--output", str(tmp_path / letter)),
                              "generation_config.json", f"{setting} {value}", "expected an integer from")
    # A hub id while offline.
    process = cli("import", "hf://Helsinki-NLP/opus-mt-de-en", "--output", str(tmp_path / "d"),
                  env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf-home")})
    assert_one_line_error(process, "cannot reach", "hf://Helsinki-NLP/opus-mt-de-en", "local directory")
    assert not any((tmp_path / name).exists() for name in "abcdef")


def test_pytorch_checkpoints_load_as_tensors_and_pickles_that_run_code_are_refused(checkpoint, tmp_path, capsys):
    import torch

    from keras_transformer import load_run

    plain = tmp_path / "plain"
    make_marian_checkpoint(str(plain), weights="pytorch")
    assert not (plain / "model.safetensors").exists()
    assert cli_here(capsys, "import", str(plain), "--output", str(tmp_path / "from-bin")).returncode == 0
    assert load_run(str(tmp_path / "from-bin")).model.count_params() > 0

    planted = tmp_path / "planted"
    planted.mkdir()
    for name in os.listdir(plain):
        (planted / name).write_bytes((plain / name).read_bytes())
    marker = tmp_path / "pwned.txt"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    state = torch.load(str(plain / "pytorch_model.bin"), weights_only=True)
    state["payload"] = Payload()
    torch.save(state, str(planted / "pytorch_model.bin"))
    assert not marker.exists()
    process = cli_here(capsys, "import", str(planted), "--output", str(tmp_path / "never"))
    assert_one_line_error(process, "pytorch_model.bin", "refused", "never code")
    assert not marker.exists() and not (tmp_path / "never").exists()


def test_from_preset_imports_a_checkpoint_once_and_generates(checkpoint, imported, tmp_path, monkeypatch):
    from keras_transformer import TransformerSeq2SeqLM
    from keras_transformer import load_run
    from keras_transformer.decoding.translator import Translator

    monkeypatch.setenv("KERAS_TRANSFORMER_CACHE", str(tmp_path / "cache"))
    task = TransformerSeq2SeqLM.from_preset(checkpoint[0])
    run = load_run(imported)
    texts = sentences(WORDS, 5, seed=5)
    # The task decodes as the imported run's decoding.json says (its default sampler), as the run's translator does.
    assert task.generate(texts) == Translator(run.model, run.source_tokenizer, run.target_tokenizer,
                                              decoding=run.decoding).translate(texts)
    cached = os.listdir(tmp_path / "cache" / "imported")
    assert len(cached) == 1
    TransformerSeq2SeqLM.from_preset(checkpoint[0])  # the second time from the cache
    assert os.listdir(tmp_path / "cache" / "imported") == cached


def _fake_hub(monkeypatch, files_from, snapshots, commit="0123456789abcdef0123456789abcdef01234567"):
    """`huggingface_hub.snapshot_download` over a local directory: it copies the files the patterns name into
    `snapshots/COMMIT`, as the Hub's cache lays them out; returns the list of its calls."""
    import fnmatch
    import shutil

    import huggingface_hub

    calls = []

    def download(repo, revision=None, allow_patterns=None):
        calls.append((repo, revision, list(allow_patterns)))
        snapshot = snapshots / "snapshots" / commit
        snapshot.mkdir(parents=True, exist_ok=True)
        for name in os.listdir(files_from):
            if any(fnmatch.fnmatch(name, pattern) for pattern in allow_patterns):
                shutil.copy(os.path.join(files_from, name), snapshot / name)
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    return calls


def test_a_hub_import_never_fetches_the_pickle_beside_safetensors_and_records_the_commit(checkpoint, tmp_path,
                                                                                       monkeypatch, capsys):
    import shutil

    both = tmp_path / "both"
    shutil.copytree(checkpoint[0], both)
    make_marian_checkpoint(str(tmp_path / "bin"), weights="pytorch")
    shutil.copy(tmp_path / "bin" / "pytorch_model.bin", both / "pytorch_model.bin")
    calls = _fake_hub(monkeypatch, both, tmp_path / "cache-a")
    assert cli_here(capsys, "import", "hf://owner/opus-mt@main", "--output", str(tmp_path / "run")).returncode == 0
    assert not any("pytorch_model.bin" in patterns for _, _, patterns in calls) and calls[-1][1] == "main"
    with open(tmp_path / "run" / "imported.json", encoding="utf-8") as f:
        record = json.load(f)
    assert record["source"] == "hf://owner/opus-mt@main"
    assert record["revision"] == "0123456789abcdef0123456789abcdef01234567"  # what was downloaded, not "main"
    # A repository with only the pickle: fetched in a second call, from the same commit.
    calls = _fake_hub(monkeypatch, tmp_path / "bin", tmp_path / "cache-b")
    assert cli_here(capsys, "import", "hf://owner/opus-mt", "--output", str(tmp_path / "run-bin")).returncode == 0
    assert calls[-1][1:] == ("0123456789abcdef0123456789abcdef01234567", ["pytorch_model.bin"])
    assert not any("pytorch_model.bin" in patterns for _, _, patterns in calls[:-1])


def test_tensors_the_model_has_no_place_for_are_named_in_a_note(checkpoint, tmp_path, capsys):
    import shutil

    from safetensors.numpy import load_file
    from safetensors.numpy import save_file

    extra = tmp_path / "extra"
    shutil.copytree(checkpoint[0], extra)
    tensors = load_file(str(extra / "model.safetensors"))
    tensors["model.encoder.adapter.weight"] = tensors["final_logits_bias"].copy()
    save_file(tensors, str(extra / "model.safetensors"), metadata={"format": "pt"})
    process = cli_here(capsys, "import", str(extra), "--output", str(tmp_path / "run"))
    assert process.returncode == 0, process.stderr
    notes = [line for line in process.stderr.splitlines() if "not part of the model" in line]
    assert len(notes) == 1 and "encoder.adapter.weight" in notes[0] and "1 tensors" in notes[0], process.stderr
