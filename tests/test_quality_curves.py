"""tools/quality_curves.py draws runs' validation curves against cumulative training minutes."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _history(path, seconds, losses):
    os.makedirs(path)
    epochs = [{"epoch": i + 1, "loss": loss + 0.1, "val_loss": loss, "val_masked_accuracy": 1 - loss / 10,
               "masked_accuracy": 0.5, "learning_rate": 1e-3, "epoch_seconds": s}
              for i, (s, loss) in enumerate(zip(seconds, losses))]
    with open(os.path.join(path, "history.json"), "w") as f:
        json.dump({"epochs": epochs}, f)


def test_curves_use_cumulative_minutes_and_report_the_last_epoch(tmp_path):
    _history(tmp_path / "a", [60, 120, 60], [4.0, 3.0, 2.5])
    _history(tmp_path / "b", [300], [3.5])
    out = tmp_path / "curves.png"
    result = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "quality_curves.py"), "--output", str(out),
                             f"fast={tmp_path / 'a'}", f"slow={tmp_path / 'b'}"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["fast", "3", "4.0", "2.500", "0.750"]
    assert lines[2].split() == ["slow", "1", "5.0", "3.500", "0.650"]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bleu_figure_reads_each_runs_minutes_report_and_the_keras_hub_results(tmp_path):
    _history(tmp_path / "a", [600, 1200], [3.0, 2.5])
    _history(tmp_path / "b", [1800], [2.9])
    for name, bleu in (("a", 41.5), ("b", 38.25)):
        with open(tmp_path / name / "test2016.json", "w") as f:
            json.dump({"bleu": bleu, "chrf": 60.0, "decoding": "beam 4, length penalty 1.5"}, f)
    with open(tmp_path / "results.json", "w") as f:
        json.dump({"training_minutes": 87.5, "scores": [
            {"decoding": "greedy", "split": "test2016", "bleu": 30.0, "chrf": 50.0},
            {"decoding": "beam 4", "split": "val", "bleu": 33.0, "chrf": 52.0},
            {"decoding": "beam 4", "split": "test2016", "bleu": 31.5, "chrf": 51.0}]}, f)
    os.makedirs(tmp_path / "ab")  # an ensemble directory of a and b: their minutes summed
    with open(tmp_path / "ab" / "ensemble.json", "w") as f:
        json.dump({"format": "keras_transformer.ensemble", "members": ["../a", "../b"]}, f)
    with open(tmp_path / "ab" / "test2016.json", "w") as f:
        json.dump({"bleu": 42.5, "chrf": 61.0, "decoding": "beam 4, length penalty 1.2"}, f)
    out = tmp_path / "bleu.png"
    script = os.path.join(ROOT, "tools", "quality_bleu.py")
    result = subprocess.run([sys.executable, script, "--output", str(out), "--line", "OPUS-MT=40.5",
                             f"recipe={tmp_path / 'a'}", f"recipe={tmp_path / 'b'}",
                             f"keras-hub={tmp_path / 'results.json'}", "earlier=86.7,41.52,60.56",
                             f"ensemble={tmp_path / 'ab'}"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = [line.split()[:4] for line in result.stdout.splitlines()[1:6]]
    assert rows == [["recipe", "30.0", "41.50", "60.00"], ["recipe", "30.0", "38.25", "60.00"],
                    ["keras-hub", "87.5", "31.50", "51.00"], ["earlier", "86.7", "41.52", "60.56"],
                    ["ensemble", "60.0", "42.50", "61.00"]]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # A run without its report is named, with the command that writes it.
    os.remove(tmp_path / "b" / "test2016.json")
    result = subprocess.run([sys.executable, script, "--output", str(out), f"recipe={tmp_path / 'b'}"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "test2016.json: missing" in result.stderr
