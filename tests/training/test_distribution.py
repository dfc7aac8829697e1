"""Scale-out through the command line: one device, `--distribute mirrored --devices 2`, and two `multi-host`
processes over 127.0.0.1 train the same small model on the same batches and log the same per-epoch losses."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from keras_transformer.data.synthetic import make_synthetic_splits
from keras_transformer.training.distribution import DistributionConfig
from keras_transformer.training.distribution import DistributionError
from keras_transformer.training.distribution import wait_for_coordinator

# Dropout 0 and a fixed seed: every engine sees the same initial weights and the same global batches. (Initial
# weights come from the backend's random generator: the multi-host run, on JAX, is compared with a one-device JAX
# run, the mirrored one with a one-device TensorFlow run with the same flags.)
SMALL = ["--num-layers", "1", "--d-model", "32", "--num-heads", "2", "--d-ff", "64", "--max-length", "24",
         "--epochs", "2", "--batch-size", "32", "--vocab-size", "200", "--warmup-steps", "20", "--dropout", "0",
         "--label-smoothing", "0", "--seed", "7", "--lr-scale", "0.1"]


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale")
    train, _ = make_synthetic_splits(256, 0, seed=5)
    half = len(train) // 2  # two shards per side: exercises the interleaved reader too
    src = [_write(root / "train.src.0", train.sources[:half]), _write(root / "train.src.1", train.sources[half:])]
    tgt = [_write(root / "train.tgt.0", train.targets[:half]), _write(root / "train.tgt.1", train.targets[half:])]
    return root, src, tgt


def _env(**extra):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")
    env.pop("KERAS_BACKEND", None)
    env.update(extra)
    return env


def _train_command(src, tgt, out, *flags):
    return [sys.executable, "-m", "keras_transformer.cli", "train", "--src", *src, "--tgt", *tgt, "--output", out,
            *SMALL, *flags]


def _losses(out):
    with open(os.path.join(out, "history.json"), encoding="utf-8") as f:
        return [record["loss"] for record in json.load(f)["epochs"]]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def single_device_default(corpus):
    """One device with the default flags (XLA on): the batches a default mirrored run must see (in this process,
    which is on TensorFlow)."""
    from keras_transformer import cli

    root, src, tgt = corpus
    out = str(root / "one-default")
    assert cli.main(_train_command(src, tgt, out)[3:]) == 0
    return _losses(out)


@pytest.fixture(scope="module")
def single_device_jax(corpus):
    root, src, tgt = corpus
    out = str(root / "one-jax")
    subprocess.run(_train_command(src, tgt, out), check=True, env=_env(KERAS_BACKEND="jax"), capture_output=True,
                   timeout=600)
    return _losses(out)


@pytest.mark.slow
def test_mirrored_two_devices_give_the_single_device_losses(corpus, single_device_default):
    root, src, tgt = corpus
    out = str(root / "mirrored")
    # The default flags, as README shows them: XLA is on by default, and mirrored turns it off with one note.
    result = subprocess.run(_train_command(src, tgt, out, "--distribute", "mirrored", "--devices", "2"),
                            env=_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "MirroredStrategy over 2 logical CPU devices" in result.stdout
    notes = [line for line in result.stderr.splitlines() if "note:" in line and "XLA" in line]
    assert len(notes) == 1 and "note: --distribute mirrored trains without XLA" in notes[0], result.stderr
    losses = _losses(out)
    assert len(losses) == len(single_device_default) == 2
    assert losses[-1] < losses[0]  # it learns
    for ours, reference in zip(losses, single_device_default):
        assert abs(ours - reference) <= 0.02 * reference, (losses, single_device_default)


@pytest.mark.slow
def test_two_multi_host_processes_give_the_single_device_losses(corpus, single_device_jax):
    root, src, tgt = corpus
    out = str(root / "multi")
    flags = ["--distribute", "multi-host", "--coordinator", f"127.0.0.1:{_free_port()}", "--num-processes", "2",
             "--coordinator-timeout", "120"]
    processes = [subprocess.Popen(_train_command(src, tgt, out, *flags, "--process-id", str(i)), env=_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    outputs = [p.communicate(timeout=600)[0] for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
    assert "keras.distribution.DataParallel on JAX over 2 devices in 2 processes" in outputs[0]
    losses = _losses(out)
    assert len(losses) == len(single_device_jax) == 2
    assert losses[-1] < losses[0]  # it learns
    for ours, reference in zip(losses, single_device_jax):
        assert abs(ours - reference) <= 0.02 * reference, (losses, single_device_jax)
    # Process 0 alone wrote the run directory, and it loads on the TensorFlow backend (this process's) as any run
    # does.
    from keras_transformer.runs.run import load_run

    assert load_run(out).model.count_params() > 0


@pytest.mark.parametrize("flags, message", [
    (["--distribute", "ring"], "--distribute 'ring': expected one of mirrored, multi-host"),
    (["--distribute", "mirrored", "--devices", "0"], "--devices 0: expected a number of devices >= 1"),
    (["--distribute", "multi-host", "--coordinator", "127.0.0.1:1", "--num-processes", "2", "--process-id", "2"],
     "--process-id 2: expected 0 <= I < --num-processes (2)"),
    (["--distribute", "multi-host", "--num-processes", "2", "--process-id", "0"], "needs --coordinator"),
    (["--devices", "2"], "--devices goes with --distribute mirrored"),
    (["--distribute", "mirrored", "--devices", "2", "--jit-compile"],
     "--jit-compile with --distribute mirrored: XLA-compiled steps cannot read variables mirrored"),
])
def test_bad_distribution_flags_are_one_clear_line(corpus, flags, message):
    root, src, tgt = corpus
    result = subprocess.run(_train_command(src, tgt, str(root / "bad"), *flags), env=_env(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_multi_host_without_jax_names_the_extra_in_one_line(corpus, monkeypatch, capsys):
    import importlib.util

    from keras_transformer import cli

    root, src, tgt = corpus
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jax" else real(name, *a))
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    code = cli.main(_train_command(src, tgt, str(root / "no-jax"), "--distribute", "multi-host", "--coordinator",
                                   "127.0.0.1:1", "--num-processes", "1", "--process-id", "0")[3:])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert 'needs jax, which is not installed: pip install "keras-transformer-mt[jax]"' in lines[0]
    assert "KERAS_BACKEND" not in os.environ  # refused before the backend was chosen
    assert not os.path.exists(root / "no-jax")


def test_a_coordinator_nobody_answers_times_out_with_a_message(corpus):
    root, src, tgt = corpus
    port = _free_port()
    start = time.time()
    result = subprocess.run(_train_command(src, tgt, str(root / "lonely"), "--distribute", "multi-host",
                                           "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2",
                                           "--process-id", "1", "--coordinator-timeout", "3"),
                            env=_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert f"--coordinator 127.0.0.1:{port}: nobody answered within 3 s" in result.stderr.strip().splitlines()[-1]
    assert time.time() - start < 90


def test_wait_for_coordinator_returns_once_someone_listens():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        wait_for_coordinator(f"127.0.0.1:{server.getsockname()[1]}", timeout=5)


def test_distribution_config_checks_the_coordinator_address():
    with pytest.raises(DistributionError, match="expected HOST:PORT"):
        DistributionConfig(mode="multi-host", coordinator="localhost", num_processes=2, process_id=0).validate()
