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
    from keras_transformer.atomic import _host

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = _host()
    (tmp_path / f".tmp-{dead.pid}-{host}-0a1b2c3d.model.keras").write_text("half")
    (tmp_path / f".old-{dead.pid}-{host}-0a1b2c3d.saved").mkdir()  # killed between the two renames of a swap
    (tmp_path / f".tmp-{dead.pid}.legacy").write_text("half, named before hosts were")
    (tmp_path / f".tmp-{os.getpid()}-{host}-0a1b2c3d.mine").write_text("being written by a live process")
    # Another host's (a container sharing the volume): its process cannot be asked, so it is kept while recent.
    (tmp_path / f".tmp-{dead.pid}-otherhost-0a1b2c3d.theirs").write_text("being written elsewhere")
    (tmp_path / f".tmp-{dead.pid}-otherhost-0a1b2c3e.stale").write_text("left a day ago")
    os.utime(tmp_path / f".tmp-{dead.pid}-otherhost-0a1b2c3e.stale", (time.time() - 90_000,) * 2)
    cleaned = clean_temporaries(tmp_path)
    assert sorted(os.listdir(tmp_path)) == sorted([f".tmp-{dead.pid}-otherhost-0a1b2c3d.theirs",
                                                   f".tmp-{os.getpid()}-{host}-0a1b2c3d.mine", "saved"])
    assert len(cleaned) == 4


def test_temporary_names_differ_within_one_process_and_name_the_host(tmp_path):
    from keras_transformer.atomic import _host

    names = set()
    for _ in range(3):
        with atomic_path(tmp_path / "a.txt") as temporary:
            names.add(os.path.basename(temporary))
            open(temporary, "w").close()
    assert len(names) == 3 and all(n.startswith(f".tmp-{os.getpid()}-{_host()}-") for n in names)


def test_kill_9_during_writes_never_leaves_a_broken_file(tmp_path):
    """A child rewrites a 4 MB file atomically in a loop; killed at random moments once it has written it (not while
    it is still starting), the file is whole, and what it left behind is cleaned."""
    path = tmp_path / "big.txt"
    code = (f"import sys\nfrom keras_transformer.atomic import write_text\ni = 0\n"
            f"while True:\n    i += 1\n    write_text({str(path)!r}, str(i % 10) * 4_000_000)\n"
            f"    if i == 1:\n        print('written', flush=True)\n")
    for delay in (0.0, 0.05, 0.13, 0.31):
        path.unlink(missing_ok=True)
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline() == "written\n"  # the loop of writes is running
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait()
        content = path.read_text()
        assert len(content) == 4_000_000 and len(set(content)) == 1
    clean_temporaries(tmp_path)
    assert os.listdir(tmp_path) == ["big.txt"]


def test_a_written_file_and_its_directory_are_flushed_before_and_after_the_rename(tmp_path, monkeypatch):
    import keras_transformer.atomic as atomic

    synced = []
    monkeypatch.setattr(atomic, "_fsync", lambda path, directory=False: synced.append(
        (os.path.basename(path), directory)))
    with atomic_path(tmp_path / "model") as temporary:
        os.makedirs(os.path.join(temporary, "assets"))
        open(os.path.join(temporary, "assets", "vocab.txt"), "w").close()
    names = [name.split(".", 2)[-1] if name.startswith(".tmp-") else name for name, _ in synced]
    assert names == ["vocab.txt", "assets", "model", tmp_path.name]  # the tree bottom up, then the parent
    assert [directory for _, directory in synced] == [False, True, True, True]


def test_a_tree_is_removed_whole_or_not_at_all(tmp_path, monkeypatch):
    import keras_transformer.atomic as atomic

    tree = tmp_path / "checkpoint"
    (tree / "epochs").mkdir(parents=True)
    (tree / "epochs" / "epoch-1.npz").write_bytes(b"x" * 100)
    (tree / "checkpoint.json").write_text("{}")

    def killed(path):  # the process dies while the files are being deleted
        os.remove(os.path.join(path, "checkpoint.json"))
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic, "_remove", killed)
    with pytest.raises(KeyboardInterrupt):
        atomic.remove_atomically(str(tree))
    monkeypatch.undo()
    assert not tree.exists()  # gone at once: never a checkpoint directory with half its files
    hidden = [name for name in os.listdir(tmp_path) if name.startswith(".tmp-")]
    assert hidden and hidden[0].endswith(".checkpoint")
    monkeypatch.setattr(atomic, "_owner_alive", lambda *args: False)  # as after the process died
    assert clean_temporaries(str(tmp_path)) == hidden and os.listdir(tmp_path) == []
