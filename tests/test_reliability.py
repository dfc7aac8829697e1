"""CI runs the fast part of the reliability table (tools/reliability.py --fast): every case a clear error, no
traceback, no silent accept. The whole table (with trained models, exports and kill -9 faults) is
docs/reliability.md, written by `python tools/reliability.py`."""

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_the_fast_reliability_cases(tmp_path):
    """The cases that need no trained model, in one interpreter (`--in-process`); one of them also through a
    fresh process."""
    rows_path = tmp_path / "rows.json"
    process = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "reliability.py"), "--fast", "--in-process",
                              "--output", str(tmp_path / "table.md"), "--json", str(rows_path)],
                             capture_output=True, text=True, timeout=900)
    rows = json.loads(rows_path.read_text())
    bad = [row for row in rows if row["outcome"] not in ("clear error", "worked")]
    assert not bad, bad
    assert process.returncode == 0, process.stdout[-3000:]
    assert len(rows) >= 30
    assert {row["area"] for row in rows} >= {"train", "translate", "evaluate", "export", "quickstart", "python-api"}
    # One case through a fresh `keras-transformer` process, as the whole table runs them: the same row.
    process = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "reliability.py"), "--only",
                              "translate-missing", "--json", str(tmp_path / "process.json")],
                             capture_output=True, text=True, timeout=900)
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    (fresh,) = json.loads((tmp_path / "process.json").read_text())
    (here,) = [row for row in rows if row["id"] == "translate-missing"]
    assert fresh["outcome"] == here["outcome"] == "clear error", (fresh, here)
    work = re.compile(r"kt-reliability-\w+")
    assert work.sub("WORK", fresh["detail"]) == work.sub("WORK", here["detail"])


def test_in_process_cases_see_tracebacks_exit_statuses_and_their_input_and_leave_no_trace(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "tools"))
    import reliability

    class Ctx:
        work = str(tmp_path)

    def crash():
        raise RuntimeError("deep inside")

    def read_and_exit():
        print("read", sys.stdin.read().strip(), os.environ["CASE_VALUE"], os.getcwd())
        sys.exit(2)

    before = os.getcwd(), dict(os.environ), list(sys.path), sys.stdin
    crashed = reliability._in_process(crash, Ctx, b"", None)
    exited = reliability._in_process(read_and_exit, Ctx, b"hello\n", {"CASE_VALUE": "7"})
    message = reliability._in_process(lambda: sys.exit("keras-transformer x: error: bad"), Ctx, b"", None)
    assert (os.getcwd(), dict(os.environ), list(sys.path), sys.stdin) == before
    assert crashed.rc == 1 and "Traceback (most recent call last)" in crashed.err and "deep inside" in crashed.err
    assert (exited.rc, exited.out.strip()) == (2, f"read hello 7 {tmp_path}")
    assert message.rc == 1 and "error: bad" in message.err
    case = reliability.Case("x", "train", "a crash", "error", None, names="x")
    assert reliability.classify(case, crashed)[0] == "traceback"
