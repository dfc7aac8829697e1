"""Validation curves of several Multi30k runs against training minutes, in one figure (docs/quality.md).

    python tools/quality_curves.py --output docs/quality_curves.png \\
        "dropout 0.3=runs/q1_d03" "dropout 0.1, 30 min=runs/q2_d01_30min"

Each run is LABEL=RUN_DIR (its history.json). The x axis is the cumulative wall time of the epochs (what the time
budget counts), so runs that differ in speed per epoch are compared at equal compute; a table of each run's last
epoch is printed too.
"""

import argparse
import json
import os
import sys


def load_curve(run_dir):
    with open(os.path.join(run_dir, "history.json"), encoding="utf-8") as f:
        epochs = json.load(f)["epochs"]
    minutes, total = [], 0.0
    for epoch in epochs:
        total += epoch["epoch_seconds"] / 60
        minutes.append(total)
    return {"minutes": minutes, "val_loss": [e["val_loss"] for e in epochs],
            "val_accuracy": [e["val_masked_accuracy"] for e in epochs], "epochs": len(epochs)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", metavar="LABEL=RUN_DIR")
    parser.add_argument("--output", required=True, help="PNG file to write")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from keras_transformer.atomic import atomic_path

    curves = []
    for item in args.runs:
        label, sep, run_dir = item.partition("=")
        if not sep:
            parser.error(f"{item!r}: expected LABEL=RUN_DIR")
        curves.append((label, load_curve(run_dir)))
    figure = Figure(figsize=(11, 4.2))
    FigureCanvasAgg(figure)
    for index, (key, title) in enumerate((("val_loss", "validation loss (label-smoothed)"),
                                          ("val_accuracy", "validation token accuracy"))):
        axes = figure.add_subplot(1, 2, index + 1)
        for label, curve in curves:
            axes.plot(curve["minutes"], curve[key], marker=".", label=f"{label} ({curve['epochs']} epochs)")
        axes.set_xlabel("training minutes (2 CPU cores)")
        axes.set_title(title)
        axes.grid(alpha=0.3)
    figure.axes[0].legend(fontsize=8)
    figure.tight_layout()
    with atomic_path(args.output) as temporary:
        figure.savefig(temporary, format="png", dpi=90)
    print(f"{'run':<40} {'epochs':>6} {'minutes':>8} {'val loss':>9} {'val acc':>8}")
    for label, curve in curves:
        print(f"{label:<40} {curve['epochs']:>6} {curve['minutes'][-1]:>8.1f} {curve['val_loss'][-1]:>9.3f} "
              f"{curve['val_accuracy'][-1]:>8.3f}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
