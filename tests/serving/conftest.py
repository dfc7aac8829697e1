"""Fixtures for the serving tests: a tiny run directory (random weights, see `tests.export.helpers`), the
`ServedModel` over it, and the translations `load_translator` gives for the shared sentences."""

import keras
import pytest

from tests.export.helpers import SENTENCES
from tests.export.helpers import write_tiny_run


@pytest.fixture(scope="session")
def tiny_run_dir(tmp_path_factory):
    return write_tiny_run(tmp_path_factory.mktemp("serving") / "tiny")


@pytest.fixture(scope="session")
def served_model(tiny_run_dir):
    from keras_transformer.serving import ServerSettings
    from keras_transformer.serving import load_served_model

    return load_served_model(tiny_run_dir, settings=ServerSettings(signatures=None))  # every signature


@pytest.fixture(scope="session")
def expected_translations(tiny_run_dir):
    """`load_translator(run).translate(SENTENCES)`: what the server must answer for `SENTENCES`."""
    from keras_transformer.translators import load_translator

    return load_translator(tiny_run_dir).translate(SENTENCES)


@pytest.fixture(autouse=True)
def _clean_keras_state():
    """Replaces the root fixture of the same name: these tests build no Keras objects of their own, and the model a
    server holds across tests keeps its state, so only the dtype policy is reset, not the whole Keras state."""
    keras.config.set_dtype_policy("float32")
    yield
