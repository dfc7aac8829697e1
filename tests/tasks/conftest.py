"""A tiny run, and its task trained for a few epochs through `task.fit` on raw strings (shared by the tests)."""

import pytest

from keras_transformer.data.synthetic import make_synthetic_corpus
from keras_transformer.tasks import TransformerSeq2SeqLM
from tests.export.helpers import write_tiny_run

EPOCHS = 12


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory):
    return write_tiny_run(tmp_path_factory.mktemp("task") / "run")


@pytest.fixture(scope="session")
def corpus():
    return make_synthetic_corpus(512, seed=3)


@pytest.fixture(scope="session")
def trained(run_dir, corpus):
    """`(task, loss before, history)`: the tiny run's task after `fit(x=(sources, targets))`."""
    import keras

    keras.utils.set_random_seed(0)
    task = TransformerSeq2SeqLM.from_run(run_dir)
    task.compile(optimizer=keras.optimizers.Adam(3e-3))  # keeps the run's sampler
    pairs = (corpus.sources, corpus.targets)
    before = task.evaluate(x=pairs, batch_size=64, verbose=0)[0]
    history = task.fit(x=pairs, batch_size=32, epochs=EPOCHS, verbose=0)
    return task, before, history.history
