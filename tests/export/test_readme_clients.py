"""The README's SavedModel and TFLite client snippets, run as written against a real export, each in a fresh
process where `keras_transformer` cannot be imported (as on a serving machine that has only TensorFlow and
tensorflow-text)."""

import os
import pathlib
import re
import subprocess
import sys

import numpy as np

README = (pathlib.Path(__file__).parents[2] / "README.md").read_text()
SENTENCE = "the first of May, nineteen ninety-nine"  # the sentence the snippets translate


def _snippet(marker):
    blocks = [b for b in re.findall(r"```python\n(.*?)```", README, flags=re.S) if marker in b]
    assert len(blocks) == 1, f"expected one README python block using {marker}, found {len(blocks)}"
    return blocks[0]


# Makes `import keras_transformer` fail in the client's process (the package is installed in this environment).
_BLOCK = "import sys\nsys.modules['keras_transformer'] = None\n"
_CHECK = ("\ntry:\n    import keras_transformer\nexcept ImportError:\n    pass\nelse:\n"
          "    raise SystemExit('keras_transformer was importable')\n")


def _run(code, capsys, tmp_path):
    process = subprocess.run([sys.executable, "-c", _BLOCK + code + _CHECK], capture_output=True, text=True,
                             cwd=tmp_path, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    return process.stdout


def test_saved_model_client(exported, saved_translator, capsys, tmp_path):
    code = _snippet("tf.saved_model.load")
    assert '"saved_models/dates"' in code
    printed = _run(code.replace('"saved_models/dates"', repr(exported["saved_model"])), capsys, tmp_path)
    expected = np.array([saved_translator.translate([SENTENCE], beam_size=None)[0].encode("utf-8")])
    assert printed.strip() == str(expected)


def test_tflite_client(exported, tflite_translator, capsys, tmp_path):
    code = _snippet("InterpreterWithCustomOps")
    assert '"saved_models/dates.tflite"' in code
    printed = _run(code.replace('"saved_models/dates.tflite"', repr(exported["tflite"])), capsys, tmp_path)
    expected = np.array([tflite_translator.translate([SENTENCE])[0].encode("utf-8")], dtype=object)
    assert printed.strip() == str(expected)
