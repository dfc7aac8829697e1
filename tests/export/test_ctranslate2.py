"""CTranslate2 export: the same weights in CTranslate2 give our greedy tokens; the CLI writes and translates it."""

import io
import os
import sys

import numpy as np
import pytest

from keras_transformer import cli
from tests.export.helpers import BAD_INPUTS
from tests.export.helpers import SENTENCES
from tests.export.helpers import write_tiny_run

pytest.importorskip("ctranslate2")

from keras_transformer.decoding.translator import Translator  # noqa: E402
from keras_transformer.export.ctranslate2_model import export_ctranslate2  # noqa: E402
from keras_transformer.runs.run import load_run  # noqa: E402
from keras_transformer.translators.ctranslate2 import CTranslate2Translator  # noqa: E402


@pytest.fixture(scope="module", params=["post-norm-separate", "pre-norm-tied-learned"])
def run(request, tmp_path_factory):
    import keras

    from keras_transformer.models import TransformerConfig
    from keras_transformer.models import TransformerModel

    directory = write_tiny_run(tmp_path_factory.mktemp("ct2") / "run")
    run = load_run(directory)
    if request.param == "pre-norm-tied-learned":
        # The other architecture branch: pre-norm blocks with final norms, learned positions, tied output, with
        # random (not all-default) weights so that every mapped tensor matters.
        config = TransformerConfig.from_dict({**run.model_config.to_dict(), "norm_first": True, "tie_output": True,
                                              "position": "learned"})
        keras.utils.set_random_seed(5)
        model = TransformerModel(config)
        for weight in model.weights:
            weight.assign(np.random.default_rng(len(weight.path)).normal(0, 0.3, weight.shape).astype("float32"))
        run.model, run.model_config = model, config
    return run


def test_greedy_tokens_equal_ours_on_the_same_weights(run, tmp_path):
    path = export_ctranslate2(run, str(tmp_path / "ct2"))
    ours = Translator(run.model, run.source_tokenizer, run.target_tokenizer, max_length=12, jit_compile=False)
    theirs = CTranslate2Translator(path)
    texts = SENTENCES + [t for t in BAD_INPUTS if isinstance(t, str)]
    assert theirs.translate(texts, max_length=12) == ours.translate(texts, max_length=12)


def test_cli_exports_and_translates_and_refuses_overwrite(tmp_path, monkeypatch, capsys):
    directory = write_tiny_run(tmp_path / "run")
    out = str(tmp_path / "ct2")
    assert cli.main(["export", directory, "--ctranslate2", out]) == 0
    names = set(os.listdir(out))
    assert {"model.bin", "config.json", "keras_transformer_ctranslate2.json", "tokenizers"} <= names
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(("\n".join(SENTENCES) + "\n").encode())))
    assert cli.main(["translate", out]) == 0
    printed = capsys.readouterr().out.split("\n")[: len(SENTENCES)]
    assert printed == CTranslate2Translator(out).translate(SENTENCES)
    assert cli.main(["export", directory, "--ctranslate2", out]) == 2
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert cli.main(["export", directory, "--ctranslate2", str(tmp_path / "int8"),
                     "--ctranslate2-quantization", "int8"]) == 0
    assert len(CTranslate2Translator(str(tmp_path / "int8")).translate(SENTENCES)) == len(SENTENCES)
