"""`train()` traces its train step once: the optimizer's variables exist before the first trace (a `tf.function`
whose first trace creates variables is traced again, which doubled the time to the first step)."""

from keras_transformer.data.synthetic import make_synthetic_corpus
from keras_transformer.models.transformer import TransformerModel
from keras_transformer.training.trainer import train


def test_the_train_step_is_traced_once(tmp_path, monkeypatch):
    traces = []
    original = TransformerModel.train_step

    def counted(self, data):
        traces.append(len(self.optimizer.variables))
        return original(self, data)

    monkeypatch.setattr(TransformerModel, "train_step", counted)
    run = train(make_synthetic_corpus(64, seed=0), str(tmp_path / "run"),
                model_settings=dict(num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=24),
                training_settings=dict(epochs=2, vocab_size=100, batch_size=16, jit_compile=False), verbose=0)
    assert len(traces) == 1, traces
    assert traces[0] > 2  # Adam's moments were there when the step was traced
    assert int(run.model.optimizer.iterations.numpy()) > 1  # and the step ran as often as training needed
