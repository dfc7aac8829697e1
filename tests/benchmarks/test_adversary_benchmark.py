"""benchmarks/adversary.py runs every attack against `keras-transformer serve` beside well-behaved clients and
reports the goals (a tiny random run, one-second phases; no timing is asserted)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_the_adversary_gets_only_4xx_and_compiles_nothing(tmp_path):
    from tests.export.helpers import write_tiny_run

    run_dir = write_tiny_run(tmp_path / "tiny")
    out_json = tmp_path / "adversary.json"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow", TMPDIR=str(tmp_path))
    result = subprocess.run(
        [sys.executable, "-W", "ignore", os.path.join(ROOT, "benchmarks", "adversary.py"), run_dir, "--clients", "2",
         "--seconds", "2", "--warmup-seconds", "0.5", "--max-batch-size", "4", "--body-timeout-s", "0.5",
         "--json", str(out_json)], capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    results = json.loads(out_json.read_text())
    attacks = results["phases"]["with adversary"]["adversary"]
    assert set(attacks) == {"n_best", "prefix", "longest", "instances", "slow-body", "host", "browser-type",
                            "garbage"}
    for name, statuses in attacks.items():  # each attack was answered, never with a 5xx
        assert statuses and not any(str(k).startswith("5") for k in statuses), (name, statuses)
    assert set(attacks["host"]) == {"403"} and set(attacks["browser-type"]) == {"415"}
    assert results["goals"]["server_errors"] == 0 and results["goals"]["new_compiled"] == 0
    assert all(phase["alive"] and phase["errors"] == 0 for phase in results["phases"].values())
    assert "goal: well-behaved p99 within 2x" in result.stdout
    assert not [p for p in os.listdir(tmp_path) if p.startswith("kt-adversary-")]  # its scratch space is gone
