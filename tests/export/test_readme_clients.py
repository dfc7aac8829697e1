"""The README's SavedModel and TFLite client snippets, run as written against a real export."""

import pathlib
import re

import numpy as np

README = (pathlib.Path(__file__).parents[2] / "README.md").read_text()
SENTENCE = "the first of May, nineteen ninety-nine"  # the sentence the snippets translate


def _snippet(marker):
    blocks = [b for b in re.findall(r"```python\n(.*?)```", README, flags=re.S) if marker in b]
    assert len(blocks) == 1, f"expected one README python block using {marker}, found {len(blocks)}"
    return blocks[0]


def _run(code, capsys):
    capsys.readouterr()
    exec(compile(code, "README.md", "exec"), {})
    return capsys.readouterr().out


def test_saved_model_client(exported, saved_translator, capsys):
    code = _snippet("tf.saved_model.load")
    assert '"saved_models/dates"' in code
    printed = _run(code.replace('"saved_models/dates"', repr(exported["saved_model"])), capsys)
    expected = np.array([saved_translator.translate([SENTENCE], beam_size=None)[0].encode("utf-8")])
    assert printed.strip() == str(expected)


def test_tflite_client(exported, tflite_translator, capsys):
    code = _snippet("InterpreterWithCustomOps")
    assert '"saved_models/dates.tflite"' in code
    printed = _run(code.replace('"saved_models/dates.tflite"', repr(exported["tflite"])), capsys)
    expected = np.array([tflite_translator.translate([SENTENCE])[0].encode("utf-8")], dtype=object)
    assert printed.strip() == str(expected)
