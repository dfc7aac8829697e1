"""Session fixtures for the export tests: a tiny run directory (see `helpers.write_tiny_run`), exported once
through the CLI and loaded once per format."""

import pytest

from tests.export.helpers import write_tiny_run


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory):
    return write_tiny_run(tmp_path_factory.mktemp("export") / "tiny-run")


@pytest.fixture(scope="session")
def exported(run_dir, tmp_path_factory):
    """`keras-transformer export RUN --saved-model OUT --tflite F`, run once: `{"saved_model", "tflite"}` paths."""
    from keras_transformer import cli

    out = tmp_path_factory.mktemp("exported")
    paths = {"saved_model": str(out / "saved_model"), "tflite": str(out / "tiny.tflite")}
    code = cli.main(["export", run_dir, "--saved-model", paths["saved_model"], "--tflite", paths["tflite"]])
    assert code == 0
    return paths


@pytest.fixture(scope="session")
def saved_translator(exported):
    from keras_transformer.translators import SavedModelTranslator

    return SavedModelTranslator(exported["saved_model"])


@pytest.fixture(scope="session")
def tflite_translator(exported):
    from keras_transformer.translators import TFLiteTranslator

    return TFLiteTranslator(exported["tflite"])


@pytest.fixture(scope="session")
def run(run_dir):
    from keras_transformer.runs.run import load_run

    return load_run(run_dir)
