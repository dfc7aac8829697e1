"""`train` takes its training settings as a `TrainingConfig` as well as a dict, with the same result."""

import json
import os

from keras_transformer import TrainingConfig
from keras_transformer import train
from keras_transformer.data import make_synthetic_corpus

MODEL = {"num_layers": 1, "d_model": 16, "num_heads": 2, "d_ff": 32, "max_length": 24}


def test_a_training_config_trains_as_the_dict_of_its_fields(tmp_path):
    corpus = make_synthetic_corpus(120, seed=0)
    settings = {"epochs": 1, "vocab_size": 150, "jit_compile": False, "batch_size": 32, "warmup_steps": 10}
    by_dict = train(corpus, str(tmp_path / "dict"), model_settings=MODEL, training_settings=settings, verbose=0)
    by_config = train(corpus, str(tmp_path / "config"), model_settings=MODEL,
                      training_settings=TrainingConfig(**settings), verbose=0)
    assert by_config.training_config == by_dict.training_config
    records = [json.load(open(os.path.join(tmp_path, name, "history.json")))["epochs"] for name in ("dict", "config")]
    assert records[0][0]["loss"] == records[1][0]["loss"]
