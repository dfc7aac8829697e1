"""The Multi30k example script end to end on a tiny synthetic stand-in for the corpus (no score is asserted: the
model is too small and trained too briefly to translate)."""

import gzip
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
@pytest.mark.tensorflow_only
def test_multi30k_example_trains_two_members_and_decodes_them_as_one(tmp_path):
    from keras_transformer.data.synthetic import make_synthetic_splits

    train, heldout = make_synthetic_splits(200, 8, seed=1)
    data = tmp_path / "data"
    data.mkdir()
    for split, corpus in (("train", train), ("val", heldout), ("test_2016_flickr", heldout)):
        for lang, texts in (("de", corpus.sources), ("en", corpus.targets)):
            with gzip.open(data / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write("\n".join(texts) + "\n")
    output = tmp_path / "run"
    command = [sys.executable, "-W", "ignore", os.path.join(ROOT, "examples", "translate_multi30k.py"),
               "--data", str(data), "--output", str(output), "--epochs", "1", "--steps-per-epoch", "3",
               "--beam-size", "2", "--samples", "1"]
    for setting in ("num_layers=1", "d_model=16", "num_heads=2", "d_ff=32", "vocab_size=200", "max_minutes=10",
                    "warmup_steps=1"):
        command += ["--set", setting]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow")
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    # Two members, one after the other, each with half the minutes and its own seed.
    assert "member 0 of 2: seed 0, 5 minutes" in out and "member 1 of 2: seed 1, 5 minutes" in out, out
    # A member that fit 1 epoch into its minutes: the recipe says that one model would do better here.
    assert "note: member 0 fit only 1 epoch into 5 minutes" in out and "--members 1" in out, out
    spec = json.load(open(output / "ensemble.json"))
    assert spec["members"] == ["member0", "member1"]
    results = json.load(open(output / "results.json"))
    assert results["members"] == 2 and results["epochs"] == 2
    assert results["decoding"]["tuned_on"] == "val.de.gz / val.en.gz"
    assert len((output / "test2016.beam2.en").read_text().splitlines()) == len(heldout)
    # Run again: the finished members are reused, nothing is trained.
    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "member 0: " in again.stdout and "is trained already" in again.stdout
    assert "member 0 of 2" not in again.stdout
