"""Plots of training curves (matplotlib, drawn off-screen with the Agg canvas)."""

import os

from keras_transformer.atomic import atomic_path


def plot_history(history, path, title=None):
    """Draws loss and accuracy curves of a training run into a PNG file.

    Args:
        history: `{metric: [value per epoch]}` (a `keras.callbacks.History().history`, or `load_history(...)`),
            or a list of per-epoch dicts.
        path: the PNG file to write (its directory is created).
        title: optional figure title.

    Returns:
        `path`.

    Example:

    >>> plot_history({"loss": [2.0, 1.0], "val_loss": [2.1, 1.3]}, "curves.png")  # doctest: +SKIP
    'curves.png'
    """
    # The figure is drawn on an Agg canvas directly: no pyplot, no global backend switch, no display needed.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if isinstance(history, (list, tuple)):
        from keras_transformer.training.callbacks import records_to_history

        history = records_to_history(history)
    history = {key: list(values) for key, values in history.items()}
    loss_keys = [k for k in history if k.endswith("loss")]
    accuracy_keys = [k for k in history if "acc" in k]
    panels = [("loss", loss_keys), ("accuracy", accuracy_keys)]
    panels = [(name, keys) for name, keys in panels if keys]
    if "learning_rate" in history:
        panels.append(("learning rate", ["learning_rate"]))
    if not panels:
        raise ValueError(f"history has no loss or accuracy series to plot; keys: {sorted(history)}")

    figure = Figure(figsize=(5 * len(panels), 4), dpi=100)
    FigureCanvasAgg(figure)
    for index, (name, keys) in enumerate(panels, start=1):
        axes = figure.add_subplot(1, len(panels), index)
        for key in keys:
            values = history[key]
            axes.plot(range(1, len(values) + 1), values, marker="o", markersize=3, label=key)
        axes.set_xlabel("epoch")
        axes.set_ylabel(name)
        axes.grid(alpha=0.3)
        axes.legend()
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    directory = os.path.dirname(os.fspath(path))
    if directory:
        os.makedirs(directory, exist_ok=True)
    with atomic_path(path) as temporary:
        figure.savefig(temporary, format="png")
    return path
