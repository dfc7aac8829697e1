"""CI runs the fast part of the reliability table (tools/reliability.py --fast): every case a clear error, no
traceback, no silent accept. The whole table (with trained models, exports and kill -9 faults) is
docs/reliability.md, written by `python tools/reliability.py`."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_the_fast_reliability_cases(tmp_path):
    rows_path = tmp_path / "rows.json"
    process = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "reliability.py"), "--fast",
                              "--output", str(tmp_path / "table.md"), "--json", str(rows_path)],
                             capture_output=True, text=True, timeout=900)
    rows = json.loads(rows_path.read_text())
    bad = [row for row in rows if row["outcome"] not in ("clear error", "worked")]
    assert not bad, bad
    assert process.returncode == 0, process.stdout[-3000:]
    assert len(rows) >= 30
    assert {row["area"] for row in rows} >= {"train", "translate", "evaluate", "export", "quickstart", "python-api"}
