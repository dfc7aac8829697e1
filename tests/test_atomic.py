"""Atomic writes: the destination holds the old or the new content, never a half-written one."""

import os
import signal
import subprocess
import sys
import time

import pytest

from keras_transformer.atomic import atomic_path
from keras_transformer.atomic import clean_temporaries
from keras_transformer.atomic import write_text


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "a.txt"
    write_text(path, "old")
    with pytest.raises(RuntimeError):
        with atomic_path(path) as temporary:
            with open(temporary, "w") as f:
                f.write("half")
            raise RuntimeError("killed")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["a.txt"]


def test_a_directory_is_replaced_whole(tmp_path):
    path = tmp_path / "model"
    path.mkdir()
    (path / "old.txt").write_text("old")
    with atomic_path(path) as temporary:
        os.makedirs(temporary)
        with open(os.path.join(temporary, "new.txt"), "w") as f:
            f.write("new")
    assert os.listdir(path) == ["new.txt"]
    assert os.listdir(tmp_path) == ["model"]


def test_temporaries_keep_the_suffix_writers_check(tmp_path):
    with atomic_path(tmp_path / "model.keras") as temporary:
        assert temporary.endswith("model.keras") and os.path.basename(temporary).startswith(".tmp-")
        open(temporary, "w").close()


def test_clean_temporaries_removes_leftovers_of_dead_processes_and_restores_a_swapped_directory(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f".tmp-{dead.pid}.model.keras").write_text("half")
    (tmp_path / f".old-{dead.pid}.saved").mkdir()  # killed between the two renames of a directory swap
    (tmp_path / f".tmp-{os.getpid()}.mine").write_text("being written by a live process")
    cleaned = clean_temporaries(tmp_path)
    assert sorted(os.listdir(tmp_path)) == [f".tmp-{os.getpid()}.mine", "saved"]
    assert len(cleaned) == 2


def test_kill_9_during_writes_never_leaves_a_broken_file(tmp_path):
    """A child rewrites a 4 MB file atomically in a loop; killed at a random moment, the file is whole."""
    path = tmp_path / "big.txt"
    code = (f"from keras_transformer.atomic import write_text\ni = 0\n"
            f"while True:\n    i += 1\n    write_text({str(path)!r}, str(i % 10) * 4_000_000)\n")
    for delay in (0.3, 0.55, 0.8):
        child = subprocess.Popen([sys.executable, "-c", code])
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait()
        if path.exists():
            content = path.read_text()
            assert len(content) == 4_000_000 and len(set(content)) == 1
    clean_temporaries(tmp_path)
    assert os.listdir(tmp_path) in ([], ["big.txt"])
