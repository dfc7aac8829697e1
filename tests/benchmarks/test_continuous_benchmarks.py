"""benchmarks/engine_parity.py and benchmarks/continuous.py on a tiny random run (a few sentences; no timing is
asserted): the parity check passes where the engine decodes the whole loops' tokens, and the offline table has a
row per engine with its translations compared."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _script(name, *args, cwd):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow")
    result = subprocess.run([sys.executable, "-W", "ignore", os.path.join(ROOT, "benchmarks", name), *args],
                            capture_output=True, text=True, env=env, timeout=600, cwd=cwd)
    return result.returncode, result.stdout + result.stderr[-3000:]


@pytest.fixture(scope="module")
def run_and_sources(tmp_path_factory):
    from tests.export.helpers import SENTENCES
    from tests.export.helpers import write_tiny_run

    tmp = tmp_path_factory.mktemp("continuous")
    src = tmp / "src.txt"
    src.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return write_tiny_run(tmp / "tiny"), str(src), tmp


@pytest.mark.slow
def test_engine_parity_finds_every_check_equal(run_and_sources):
    run_dir, src, tmp = run_and_sources
    code, out = _script("engine_parity.py", run_dir, "--src", src, "--sentences", "12", "--slots", "4",
                        "--alone", "3", cwd=tmp)
    assert code == 0, out
    for check, count in (("greedy", 12), ("sampling (top-p 0.9, seeded)", 12), ("forced prefix (1-3 tokens)", 12),
                         ("alone (batch 1) vs the engine's rows", 3)):
        assert f"{check}: {count}/{count} equal" in out, out


@pytest.mark.slow
def test_continuous_benchmark_prints_a_row_per_engine_with_the_translations_compared(run_and_sources):
    """One run of the script with beam search (the engine's groups of rows, against sorted batches and CTranslate2).
    The greedy engine's translations against the whole loop are engine_parity's check above."""
    pytest.importorskip("ctranslate2")
    run_dir, src, tmp = run_and_sources
    code, out = _script("continuous.py", run_dir, "--src", src, "--sentences", "6", "--slots", "2", "--repeats", "1",
                        "--beam-size", "2", "--engines", "static", "engine-k4", "ct2-mkl0", "--work", str(tmp / "work"),
                        cwd=tmp)
    assert code == 0 and "beam 2" in out, out
    rows = {line.split("|")[0].strip(): line for line in out.splitlines() if "|" in line}
    assert set(rows) >= {"static", "engine-k4", "ct2-mkl0"}, out
    same, total = map(int, re.search(r"(\d+)/(\d+)", rows["engine-k4"]).groups())
    assert same == total == 6, out  # the engine decodes what the sorted batches decode
