"""The benchmark scripts still run and print their comparison (tiny dimensions; no timing is asserted)."""

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_MODEL = ["--d-model", "32", "--d-ff", "64"]


def run_script(name, *args, tmpdir=None):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow")
    if tmpdir is not None:  # the script's temporary files go there, so a test can see what it leaves behind
        env["TMPDIR"] = str(tmpdir)
    result = subprocess.run(
        [sys.executable, "-W", "ignore", os.path.join(ROOT, "benchmarks", name), *args],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_decode_benchmark_compares_with_keras_hub_in_python_and_saved_model(tmp_path):
    out = run_script(
        "decode.py", *TINY_MODEL, "--num-heads", "2", "--num-layers", "1", "--vocab-size", "60", "--tokens", "3",
        "--batch-sizes", "2", "--repeats", "1", "--source-length", "5", "--saved-model", tmpdir=tmp_path,
    )
    assert not list(tmp_path.glob("decode_saved_model_*")), "the benchmark's SavedModels were left in TMPDIR"
    assert re.search(r"batch  2:\s+[\d.]+x the default call greedy_decode\(...\) vs keras-hub", out), out
    for row in ("ours (greedy_decode)", "ours (cached)", "keras-hub (cached)", "re-decode (prefix)",
                "re-decode (fixed buffer)", "ours (cached) [SavedModel]", "keras-hub (cached) [SavedModel]"):
        assert re.search(re.escape(row) + r"\s+2\s+(yes|no)\s+[\d.]+\s+\d+", out), (row, out)
    assert re.search(r"batch  2, XLA yes:\s+[\d.]+x vs keras-hub \(cached\), both inside a SavedModel", out), out
    tied = run_script("decode.py", *TINY_MODEL, "--num-heads", "2", "--num-layers", "1", "--vocab-size", "60",
                      "--tokens", "3", "--batch-sizes", "1", "--repeats", "1", "--source-length", "5",
                      "--tie-output", "--skip-keras-hub", "--skip-redecode")
    assert "tied output" in tied and re.search(r"ours \(cached\)\s+1\s+yes\s+[\d.]+\s+\d+", tied), tied


@pytest.mark.slow
def test_train_step_benchmark_reports_both_implementations_and_the_ratio():
    out = run_script(
        "train_step.py", *TINY_MODEL, "--vocab", "60", "--heads", "2", "--layers", "1", "--batch", "4",
        "--src-len", "5", "--tgt-len", "6", "--steps", "1", "--jit-compile", "both", "--with-keras-dropout",
    )
    for mode in ("XLA", "no XLA"):
        for name in ("keras_transformer", "keras_transformer, keras dropout", "keras-hub"):
            assert re.search(re.escape(f"{name} ({mode})") + r"\s+\|\s+\d+", out), (name, mode, out)
        assert re.search(r"keras_transformer throughput = [\d.]+x keras-hub's " + re.escape(f"({mode})"), out), out
        assert re.search(r"HashDropout instead of Keras' random dropout: [\d.]+x the throughput "
                         + re.escape(f"({mode})"), out), out
    assert re.search(r"best against best: keras_transformer \((no )?XLA\) = [\d.]+x keras-hub \((no )?XLA\)", out), out
    assert "of matmul rate" in out


@pytest.mark.slow
def test_decode_profile_splits_both_steps_into_matmuls_and_other_ops(tmp_path):
    out = run_script(
        "decode_profile.py", *TINY_MODEL, "--num-heads", "2", "--num-layers", "1", "--vocab-size", "60",
        "--tokens", "3", "--batch-size", "2", "--repeats", "1", "--source-length", "5", "--top", "3",
        tmpdir=tmp_path,
    )
    assert not list(tmp_path.glob("decode_profile_*")), "the profiler traces were left in TMPDIR"
    assert re.search(r"whole step \(decode\)\s+\d+\s+\d+", out), out
    # One decoder block (projections, attention products, FFN) and the output projection: 8+ matmuls per step.
    counts = [int(n) for n in re.findall(r"\((\d+) ops\)", out.split("matmuls", 1)[1].splitlines()[0])]
    assert len(counts) == 2 and all(n >= 8 for n in counts), out
    assert "ours (cached): the 3 longest ops" in out and "keras-hub (cached): the 3 longest ops" in out


@pytest.mark.slow
def test_scale_benchmark_reports_memory_first_step_and_pipeline_rate():
    out = run_script("scale.py", "--data", "synthetic", "--pairs", "1000", "--shards", "2", "--steps", "2",
                     "--pipeline-batches", "2", "--num-layers", "1", *TINY_MODEL, "--num-heads", "2",
                     "--vocab-size", "200", "--batch-size", "32", "--no-jit-compile")
    assert re.search(r"1,000 pairs\s+\|\s+1,000\s+\|\s+2\s+\|", out), out
    assert re.search(r"peak RSS, large corpus: [\d.]+ GB \(goal < 2.5 GB: (met|NOT met)\); [\d.]+x the synthetic", out)
    assert re.search(r"first step, large corpus: \d+ s after the command started", out), out
    assert re.search(r"input pipeline, large corpus: [\d.]+x the batches/s the model trains", out), out


@pytest.mark.slow
def test_engines_benchmark_runs_tensorflows_multi_host_engine_beside_its_reference():
    """TensorFlow's engine and its one-process reference. The JAX engine's rows run the library's multi-host path
    (`keras_transformer.training.distribution`), which tests/training/test_distribution.py runs through
    `keras-transformer train --distribute multi-host` against one process."""
    out = run_script("engines.py", "--engines", "mwms")
    assert re.search(r"one process \(tensorflow\)\s+\|\s+yes\s+\|\s+[\d.]+, [\d.]+, [\d.]+", out), out
    assert re.search(r"MultiWorkerMirroredStrategy, 2 processes \(tensorflow\)\s+\|\s+(yes|no)", out), out
    assert "(jax)" not in out, out


def test_projection_prints_both_scaling_regimes():
    out = run_script("projection.py")
    assert "9.51 TFLOP per step" in out
    for gpus in (1, 8, 64):
        assert re.search(rf"mixed bf16\s+\|\s+{gpus}\s+\|", out), out
    assert "strong scaling" in out and "weak scaling" in out


def test_ensemble_combine_benchmark_scores_both_rules_and_agrees_for_identical_members(tmp_path):
    import shutil

    from tests.export.helpers import SENTENCES
    from tests.export.helpers import write_tiny_run

    run_dir = write_tiny_run(tmp_path / "run")
    shutil.copytree(run_dir, tmp_path / "copy")
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    ref.write_text("\n".join(["1999-05-01"] * len(SENTENCES)) + "\n", encoding="utf-8")
    out = run_script("ensemble_combine.py", run_dir, str(tmp_path / "copy"), "--src", str(src), "--ref", str(ref),
                     "--beam-size", "2", "--length-penalties", "0", "1")
    rows = re.findall(r"^(log_prob|prob) +\| ([\d.]+) +\| ([\d.]+) +\| ([\d.]+) +\| \d+", out, re.M)
    assert sorted((c, a) for c, a, _, _ in rows) == [("log_prob", "0"), ("log_prob", "1"), ("prob", "0"),
                                                     ("prob", "1")], out
    # A run with its own copy: both rules give the run's own distribution, so the same translations and scores.
    scores = {(c, a): (b, f) for c, a, b, f in rows}
    assert scores[("prob", "0")] == scores[("log_prob", "0")] and scores[("prob", "1")] == scores[("log_prob", "1")]
    assert "prob - log_prob at each rule's best: +0.00 BLEU, +0.00 chrF" in out


@pytest.mark.slow
def test_deploy_benchmark_runs_each_engine_against_ctranslate2_for_an_ensemble(tmp_path):
    """Each engine, at each batch size, for an ensemble of a run with its own copy (the script's ensemble handling:
    the CTranslate2 rows decode member 0). The exports are the run's export path with two members
    (tests/export/test_ensemble_export.py checks they translate as the members do; tests/decoding/test_ensemble.py
    that a model twice decodes as the model)."""
    pytest.importorskip("ctranslate2")
    import shutil

    from keras_transformer import cli
    from tests.export.helpers import SENTENCES
    from tests.export.helpers import write_tiny_run

    run_dir = write_tiny_run(tmp_path / "run")
    shutil.copytree(run_dir, tmp_path / "copy")
    ensemble = str(tmp_path / "ens")
    assert cli.main(["ensemble", run_dir, str(tmp_path / "copy"), "--output", ensemble]) == 0
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    ref.write_text("\n".join(["1999-05-01"] * len(SENTENCES)) + "\n", encoding="utf-8")
    engines = ("python", "saved_model", "tflite-fp32", "ct2-fp32")
    out = run_script("deploy.py", ensemble, "--src", str(src), "--ref", str(ref), "--sentences", "4",
                     "--bleu-sentences", "6", "--beams", "1", "--batches", "1", "2", "--engines", *engines,
                     "--json", str(tmp_path / "rows.json"), "--work", str(tmp_path / "work"))
    for engine in engines:
        for batch in (1, 2):
            assert re.search(rf"{engine}\s+1\s+{batch}\s+[\d.]+\s+[\d.]+\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+", out), out
    assert re.search(r"ct2-fp32\s+1\s+1\s+.*\s1\.00$", out, flags=re.M), out
    assert "an ensemble of 2 runs: the ct2 rows decode member 0" in out
    rows = json.load(open(tmp_path / "rows.json"))
    assert {(r["engine"], r["batch"]) for r in rows} == {(e, b) for e in engines for b in (1, 2)}


@pytest.mark.slow
def test_keras_hub_baseline_trains_within_its_budget_and_scores_val_and_test(tmp_path):
    import gzip
    import json

    from keras_transformer.data.synthetic import make_synthetic_splits

    train, heldout = make_synthetic_splits(200, 8, seed=1)
    for split, corpus in (("train", train), ("val", heldout), ("test_2016_flickr", heldout)):
        for lang, texts in (("de", corpus.sources), ("en", corpus.targets)):
            with gzip.open(tmp_path / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write("\n".join(texts) + "\n")
    out = run_script("multi30k_keras_hub.py", "--data", str(tmp_path), "--output", str(tmp_path / "run"),
                     "--max-epochs", "2", "--vocab-size", "200", "--embed-dim", "16", "--intermediate-dim", "32",
                     "--num-heads", "2", "--sequence-length", "24", "--beam-size", "2")
    for decoding in ("greedy", "beam 2"):
        for split in ("val", "test2016"):
            assert re.search(re.escape(decoding) + r"\s+\|\s+" + split + r"\s+\|\s+[\d.]+\s+\|\s+[\d.]+", out), out
    results = json.load(open(tmp_path / "run" / "results.json"))
    assert results["epochs"] == 2 and len(results["scores"]) == 4
    assert results["scores"][0]["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert len(open(tmp_path / "run" / "test2016.greedy.en").read().splitlines()) == len(heldout)


@pytest.mark.slow
def test_pretrained_benchmark_times_an_imported_marian_model_in_each_engine(tmp_path):
    pytest.importorskip("ctranslate2")
    pytest.importorskip("transformers")
    pytest.importorskip("sentencepiece")
    out = run_script("pretrained.py", "--layers", "1", "--d-model", "32", "--heads", "2", "--ffn", "64", "--vocab",
                     "300", "--sentences", "4", "--max-new-tokens", "8", "--repeats", "1",
                     "--json", str(tmp_path / "pretrained.json"), tmpdir=tmp_path)
    assert not list(tmp_path.glob("kt-pretrained-*")), "the checkpoint and exports were left in TMPDIR"
    for engine in ("ours (SavedModel, XLA)", "transformers (torch)", "CTranslate2 fp32"):
        for batch in (1, 8):
            for decoding in ("greedy", "beam 4"):
                assert re.search(rf"{re.escape(engine)}\s+\|\s+{batch}\s+\|\s+{decoding}\s+\|\s+[\d.]+\s+\|\s+"
                                 r"[\d.]+\s+\|\s+[\d.]+x\s+\|\s+[\d.]+", out), (engine, batch, decoding, out)
    assert re.search(r"^CPU: .+; 2 threads per engine", out, flags=re.M), out
    assert "vocabulary 300," in out
    assert len(re.findall(r"^  (PASS|FAIL)  ours ", out, flags=re.M)) == 6, out
    # A tiny random model still translates the same in all three engines (greedy; beam search too here).
    assert re.search(r"batch 1, greedy\s*: ours 4/4, CTranslate2 4/4, all three 4/4", out), out
    results = json.load(open(tmp_path / "pretrained.json"))
    assert len(results["rows"]) == 12 and all(r["tokens_per_sentence"] <= 8 for r in results["rows"])


def test_pretrained_parity_benchmark_compares_logits_and_tokens_with_transformers(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("sentencepiece")
    out = run_script("pretrained_parity.py", "--layers", "1", "--d-model", "32", "--heads", "2", "--ffn", "64",
                     "--extra-tokens", "0", "--sentences", "8", "--max-new-tokens", "8", tmpdir=tmp_path)
    assert re.search(r"max \|logit difference\| .*: [\d.e+-]+ \(PASS", out), out
    assert "greedy tokens equal: 8/8; beam-4 tokens equal: 8/8" in out, out


@pytest.mark.slow
def test_multilingual_benchmark_imports_exports_and_times_an_nllb_style_model(tmp_path):
    pytest.importorskip("ctranslate2")
    pytest.importorskip("transformers")
    pytest.importorskip("sentencepiece")
    out = run_script("multilingual.py", "--layers", "1", "--d-model", "32", "--heads", "2", "--ffn", "64", "--vocab",
                     "400", "--sentences", "3", "--batches", "1", "--max-new-tokens", "6",
                     "--json", str(tmp_path / "multilingual.json"), tmpdir=tmp_path)
    assert not list(tmp_path.glob("kt-multilingual-*")), "the checkpoint and exports were left in TMPDIR"
    assert re.search(r"PASS  logits within 0.0001 of transformers': [\d.e+-]+", out), out
    assert re.search(r"Import: \d+ s, peak RSS [\d.]+ GiB", out), out
    assert "greedy: 3/3 translations equal to CTranslate2's own conversion" in out, out
    for engine in ("ours (SavedModel, XLA)", "transformers (torch)", "CTranslate2 fp32 (CT2_USE_MKL=0)",
                   "CTranslate2 int8 (CT2_USE_MKL=0)"):
        for decoding in ("greedy", "beam 4"):
            assert re.search(rf"{re.escape(engine)}\s+\|\s+1\s+\|\s+{decoding}\s+\|\s+[\d.]+\s+\|\s+[\d.]+\s+\|\s+3/3",
                             out), (engine, decoding, out)
    assert "vocabulary 400," in out and re.search(r"TFLite \(int8 weights\)\s+\|\s+[\d.]+ MiB", out), out
    assert re.search(r"TFLite int8 \(greedy, batch 1\): [\d.]+ ms/sentence, CTranslate2 int8 [\d.]+ ms", out), out
    results = json.load(open(tmp_path / "multilingual.json"))
    assert len(results["rows"]) == 8 and results["logits"]["max_difference"] <= 1e-4
