"""The persistent compilation cache: compiled programs land on disk for later processes."""

import os
import subprocess
import sys
import textwrap

import keras
import pytest

from keras_transformer.decoding.compile_cache import default_compile_cache
from keras_transformer.decoding.compile_cache import enable_compile_cache

PROGRAM = textwrap.dedent("""
    import sys
    import keras
    from keras_transformer.decoding.compile_cache import enable_compile_cache
    print(enable_compile_cache(sys.argv[1]))
    import numpy as np
    from keras_transformer import build_transformer
    from keras_transformer.decoding.slot_engine import SlotEngine
    model = build_transformer(30, 30, num_layers=1, d_model=8, num_heads=2, d_ff=16, max_length=8)
    engine = SlotEngine(model, max_length=6, start_id=1, end_id=2, slots=1, source_buckets=(8,))
    print(len(engine.run([np.array([5, 6, 7])])[0]) >= 1)
""")


@pytest.mark.skipif(keras.backend.backend() not in ("tensorflow", "jax"), reason="the backend compiles nothing")
def test_a_process_writes_what_it_compiled_into_the_cache(tmp_path):
    env = dict(os.environ, KERAS_BACKEND=keras.backend.backend(), TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TF_XLA_FLAGS", None)
    out = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path / "cache")], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    directory = out.stdout.split()[0]
    assert directory == str(tmp_path / "cache" / keras.backend.backend())
    assert os.listdir(directory), "nothing compiled was kept"  # the engine's insert and step programs


def test_the_default_directory_follows_xdg_and_a_bad_one_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_compile_cache() == str(tmp_path / "keras_transformer" / "compiled")
    (tmp_path / "file").write_text("not a directory")
    if keras.backend.backend() in ("tensorflow", "jax"):
        with pytest.raises(OSError, match="cannot make the compilation cache directory .*file"):
            enable_compile_cache(tmp_path / "file")
    else:
        assert enable_compile_cache(tmp_path / "file") is None


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="TensorFlow's flag")
def test_a_tensorflow_cache_flag_set_by_the_user_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_persistent_cache_directory=/elsewhere --xla_dummy")
    enable_compile_cache(tmp_path)
    assert os.environ["TF_XLA_FLAGS"] == "--tf_xla_persistent_cache_directory=/elsewhere --xla_dummy"
