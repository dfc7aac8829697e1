import os
import re

import pytest

from keras_transformer.quickstart import exact_match
from keras_transformer.quickstart import run_quickstart


def test_exact_match_counts_identical_strings():
    assert exact_match(["2020-01-02", "x"], ["2020-01-02", "y"]) == 0.5


def _rescore(output_dir):
    """The held-out exact match of a finished quickstart run, computed here as `run_quickstart` computes it."""
    from keras_transformer.data.synthetic import make_synthetic_splits
    from keras_transformer.decoding.translator import Translator
    from keras_transformer.runs.run import load_run

    run = load_run(output_dir)
    _, heldout = make_synthetic_splits(20000, 1000, seed=0)
    translator = Translator(run.model, run.source_tokenizer, run.target_tokenizer)
    return exact_match(translator.translate(list(heldout.sources), batch_size=128), heldout.targets)


@pytest.mark.slow
def test_quickstart_learns_the_date_task(tmp_path, capsys):
    """README's main job, with its default settings: >= 95% exact match on held-out pairs.

    Where `KT_QUICKSTART_DIR` names a directory in which `keras-transformer quickstart` has just run with its output
    in `quickstart.log` there (CI runs it from the installed wheel), the test checks that run instead of training
    the same model again: it re-scores the saved run here and compares the score with the one the command printed."""
    done = os.environ.get("KT_QUICKSTART_DIR")
    if done:
        output_dir = os.path.join(done, "saved_models", "quickstart")
        with open(os.path.join(done, "quickstart.log"), encoding="utf-8") as f:
            out = f.read()
        score = _rescore(output_dir)
        printed = re.search(r"Held-out exact match: ([\d.]+)% of 1000 pairs", out)
        assert printed, out[-2000:]
        assert float(printed.group(1)) == round(100 * score, 1), (printed.group(0), score)
    else:
        output_dir = str(tmp_path / "quickstart")
        run, score = run_quickstart(output_dir=output_dir, verbose=2)
        out = capsys.readouterr().out
        assert "Held-out exact match" in out
    assert score >= 0.95, score
    assert os.path.exists(os.path.join(output_dir, "model.keras"))
