"""The GPU benchmark kit (benchmarks/gpu) runs end to end at tiny sizes, through run.sh, on the JAX backend with
TensorFlow made unimportable: what a GPU machine without TensorFlow runs. No timing is asserted."""

import json
import math
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BLOCK_TENSORFLOW = """import sys

# `import tensorflow` (and tensorflow_text) raise ImportError in every process started with this on its path.
sys.modules["tensorflow"] = None
sys.modules["tensorflow_text"] = None
"""


def positive(value):
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


@pytest.mark.slow
def test_gpu_kit_runs_tiny_on_jax_without_tensorflow(tmp_path):
    blocker = tmp_path / "no_tensorflow"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCK_TENSORFLOW)
    out = tmp_path / "out"
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHON=sys.executable, OUT=str(out), SITE=str(tmp_path / "site"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(blocker), os.environ.get("PYTHONPATH")])))
    result = subprocess.run(["bash", os.path.join(ROOT, "benchmarks", "gpu", "run.sh"), "--tiny"],
                            capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    data = json.loads((out / "gpu_kit.json").read_text())
    assert {"environment", "config", "peaks", "stages", "peak_memory_bytes", "wall_s", "finished", "budget_s",
            "tiny"} <= set(data)
    assert data["finished"] and data["tiny"]
    environment, config = data["environment"], data["config"]
    assert environment["keras_backend"] == "jax"
    assert environment["tensorflow_loaded"] is False
    assert environment["device_kind"] and environment["jax_version"] and environment["keras_version"]
    assert positive(data["peaks"]["bfloat16_tflops"]) and positive(data["peaks"]["float32_tflops"])
    if environment["platform"] == "cpu":
        assert data["peak_memory_bytes"] is None

    hub = environment["keras_hub_status"] == "imported"
    expected = {f"matmul/{config['matmul_size']}^3/{dtype}" for dtype in ("float32", "bfloat16")}
    for implementation in ["keras_transformer"] + (["keras-hub"] if hub else []):
        for policy in ("float32", "mixed_bfloat16"):
            expected.add(f"train/{implementation}/{policy}/b{config['batch']}")
    for method in ("greedy", "beam-4"):
        for batch in (1, 8, 64):
            expected.add(f"decode/{method}/mixed_bfloat16/b{batch}")
    engine = {f"engine/continuous/mixed_bfloat16/b{slots}" for slots in config["engine_slots"]}
    stages = {stage["id"]: stage for stage in data["stages"]}
    assert expected | engine <= set(stages), sorted(expected | engine - set(stages))
    for stage_id in engine:  # the engine and the static batches decode the same sentences to the planned lengths
        stage = stages[stage_id]
        assert stage["status"] == "ok" and stage["error"] is None, stage
        assert stage["sentences"] == stage["batch"] * config["engine_sentences_per_slot"]
        assert stage["lengths_as_planned"] == stage["engine_lengths_equal"] == stage["sentences"], stage
        assert positive(stage["tokens_per_s"]) and positive(stage["static_tokens_per_s"]), stage
        assert stage["speedup"] == pytest.approx(stage["static_ms"] / stage["ms"], rel=1e-6)
        assert stage["static_row_steps"] >= stage["tokens"]  # static rows pay for steps after they end
    if not hub:  # the one line that says why keras-hub's model is missing
        assert stages["train/keras-hub"]["status"] == "skipped" and stages["train/keras-hub"]["error"]

    for stage_id in expected:
        stage = stages[stage_id]
        assert stage["status"] == "ok" and stage["error"] is None, stage
        if stage["kind"] == "matmul":
            assert positive(stage["tflops"]), stage
            continue
        for key in ("ms", "ms_min", "tokens_per_s", "compile_s"):
            assert positive(stage[key]), (key, stage)
        assert stage["timed"] >= 1
        assert stage["tokens_per_s"] == pytest.approx(stage["tokens"] / (stage["ms"] / 1000), rel=1e-6)
        if stage["kind"] == "train":
            assert stage["tokens"] == config["batch"] * config["tgt_len"] == config["target_tokens_per_batch"]
            for key in ("tflops", "mfu", "of_matmul_rate", "tflop_per_step"):
                assert positive(stage[key]), (key, stage)
            assert stage["loss_finite"], stage
        else:
            assert stage["tokens"] == stage["batch"] * config["decode_length"]
            assert stage["steps"] == config["decode_length"]
            assert stage["output_shape"][0] == stage["batch"] and stage["output_shape"][1] <= config["decode_length"]

    table = (out / "gpu_kit.md").read_text()
    assert "| stage | precision | batch | tokens/call | ms | tokens/s | TFLOP/s | MFU |" in table
    assert "TensorFlow loaded: False" in table
    for stage_id in expected:
        stage = stages[stage_id]
        cells = [stage["name"], stage["precision"]]
        if stage["kind"] != "matmul":
            cells += [str(stage["batch"]), f"{stage['tokens']:,}"]
        row = r"^\| " + r" \| ".join(re.escape(cell) for cell in cells) + r" \|.*\| ok \|$"
        assert re.search(row, table, re.MULTILINE), (stage_id, table)
    assert "| precision | slots | steps per call | engine calls | ms per call | sentences | mean length " in table
    progress = [line for line in result.stdout.splitlines() if line.startswith("[kit ")]
    assert len(progress) >= len(expected | engine) + 2, result.stdout
