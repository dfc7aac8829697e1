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
