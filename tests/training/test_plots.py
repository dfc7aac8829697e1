from keras_transformer.training import plot_history


def test_plot_history_writes_a_png(tmp_path):
    history = {"loss": [3.0, 2.0, 1.5], "val_loss": [3.1, 2.4, 2.0], "masked_accuracy": [0.2, 0.4, 0.5],
               "learning_rate": [1e-4, 2e-4, 3e-4]}
    path = plot_history(history, tmp_path / "plots" / "curves.png", title="run")
    assert (tmp_path / "plots" / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert str(path).endswith("curves.png")


def test_plot_history_accepts_records(tmp_path):
    records = [{"epoch": 1, "loss": 2.0}, {"epoch": 2, "loss": 1.0}]
    plot_history(records, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 0
