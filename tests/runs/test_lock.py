"""One writer per run directory."""

import subprocess
import sys

import pytest

from keras_transformer.runs import RunLock
from keras_transformer.runs import RunLockedError


def test_a_second_writer_is_refused_until_the_first_releases(tmp_path):
    first = RunLock(str(tmp_path)).acquire()
    with pytest.raises(RunLockedError, match=r"is being written by process \d+ on .* \(since "):
        RunLock(str(tmp_path)).acquire()
    first.release()
    with RunLock(str(tmp_path)):
        pass


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from keras_transformer.runs.lock import "
                               f"RunLock; lock = RunLock({str(tmp_path)!r}).acquire(); print('held', flush=True); "
                               "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunLockedError, match=f"process {holder.pid} "):
            RunLock(str(tmp_path)).acquire()
    finally:
        holder.kill()  # SIGKILL: no cleanup code runs
        holder.wait()
    with RunLock(str(tmp_path)):
        pass


def test_train_on_a_directory_in_use_is_one_clear_line(tmp_path):
    lock = RunLock(str(tmp_path / "run")).acquire()
    try:
        (tmp_path / "s").write_text("ein Hund\n")
        (tmp_path / "t").write_text("a dog\n")
        result = subprocess.run([sys.executable, "-m", "keras_transformer.cli", "train", "--src", str(tmp_path / "s"),
                                 "--tgt", str(tmp_path / "t"), "--output", str(tmp_path / "run")],
                                capture_output=True, text=True, timeout=300)
    finally:
        lock.release()
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("keras-transformer train: error: ") and "is being written by process" in last
