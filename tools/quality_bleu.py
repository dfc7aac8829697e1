"""Test BLEU against training minutes for Multi30k runs, in one figure (docs/quality.md, the README).

    python tools/quality_bleu.py --output docs/quality_bleu.png --line "OPUS-MT de-en (reported)=40.5" \\
        --line "goal=42" "recipe=runs/seed0" "recipe=runs/seed1" "recipe=runs/r30" \\
        "keras.io KerasHub example=runs/keras_hub_baseline/results.json"

Each point is LABEL=RUN_DIR: the run's training minutes (the sum of its epochs' wall times in history.json; for an
ensemble directory, the sum over its members) and the
scores `keras-transformer evaluate RUN_DIR ... --report RUN_DIR/test2016.json` wrote (`--report-name` changes the
file name). A LABEL=results.json point is `benchmarks/multi30k_keras_hub.py`'s output (its beam row on test2016). A
LABEL=MINUTES,BLEU,CHRF point is a measurement typed in from docs/quality.md's tables, for runs whose directories
are no longer at hand (docs/quality_runs/ keeps the records of the recent runs).
Points that share a label share a colour (seeds, budgets of one recipe); a table of every point is printed too.
"""

import argparse
import json
import os
import sys


def run_point(run_dir, report_name):
    """(training minutes, BLEU, chrF) of a run directory and its evaluate report."""
    from quality_curves import load_curve  # tools/quality_curves.py: the cumulative minutes of each epoch

    ensemble_path = os.path.join(run_dir, "ensemble.json")  # an ensemble directory: its members' minutes, summed
    if os.path.exists(ensemble_path):
        with open(ensemble_path, encoding="utf-8") as f:
            members = [os.path.join(run_dir, member) for member in json.load(f)["members"]]
        minutes = sum(load_curve(member)["minutes"][-1] for member in members)
    else:
        minutes = load_curve(run_dir)["minutes"][-1]
    report_path = os.path.join(run_dir, report_name)
    if not os.path.exists(report_path):
        raise SystemExit(f"{report_path}: missing; write it with `keras-transformer evaluate {run_dir} --src ... "
                         f"--ref ... --report {report_path}`")
    with open(report_path, encoding="utf-8") as f:
        report = json.load(f)
    return minutes, report["bleu"], report["chrf"], report["decoding"]


def keras_hub_point(results_path, split="test2016"):
    """(training minutes, BLEU, chrF) of benchmarks/multi30k_keras_hub.py's results.json: its beam row."""
    with open(results_path, encoding="utf-8") as f:
        results = json.load(f)
    rows = [row for row in results["scores"] if row["split"] == split and row["decoding"].startswith("beam")]
    if not rows:
        raise SystemExit(f"{results_path}: no beam-search row on {split}")
    return results["training_minutes"], rows[0]["bleu"], rows[0]["chrf"], rows[0]["decoding"]


def literal_point(text):
    """(training minutes, BLEU, chrF) typed as MINUTES,BLEU,CHRF; None if `text` is not three numbers."""
    parts = text.split(",")
    if len(parts) != 3:
        return None
    try:
        minutes, bleu, chrf = (float(part) for part in parts)
    except ValueError:
        return None
    return minutes, bleu, chrf, "as documented"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("points", nargs="+", metavar="LABEL=RUN_DIR|results.json|MINUTES,BLEU,CHRF")
    parser.add_argument("--output", required=True, help="PNG file to write")
    parser.add_argument("--report-name", default="test2016.json", help="evaluate's report inside each run directory")
    parser.add_argument("--line", action="append", default=[], metavar="LABEL=BLEU",
                        help="a horizontal reference line (repeatable)")
    parser.add_argument("--title", default="Multi30k de->en, test2016, beam 4 (cased sacreBLEU)")
    args = parser.parse_args(argv)
    tools = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [os.path.dirname(tools), tools]
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from keras_transformer.atomic import atomic_path

    series, table = {}, []
    for item in args.points:
        label, sep, path = item.partition("=")
        if not sep:
            parser.error(f"{item!r}: expected LABEL=RUN_DIR, LABEL=results.json or LABEL=MINUTES,BLEU,CHRF")
        point = literal_point(path)
        if point is None:
            point = keras_hub_point(path) if path.endswith(".json") else run_point(path, args.report_name)
        series.setdefault(label, []).append(point)
        table.append((label, path) + point)
    lines = []
    for item in args.line:
        label, sep, value = item.partition("=")
        try:
            lines.append((label, float(value)))
        except ValueError:
            parser.error(f"--line {item!r}: expected LABEL=BLEU")

    figure = Figure(figsize=(7.5, 4.5))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    # One colour per label (tab10 for up to 10 labels, then tab20), and a marker shape that changes every 10
    # labels, so that no two series look alike.
    colours = matplotlib.colormaps["tab10" if len(series) + len(lines) <= 10 else "tab20"].colors
    for index, (label, points) in enumerate(series.items()):
        # Markers only: a line between two budgets would draw results that were never measured.
        axes.plot([p[0] for p in points], [p[1] for p in points], marker="osD^v"[index // 10 % 5], linestyle="none",
                  color=colours[index % len(colours)], label=label)
    for index, (label, value) in enumerate(lines):
        axes.axhline(value, color=colours[(len(series) + index) % len(colours)], linestyle="--", linewidth=1,
                     label=f"{label}: {value:g}")
    axes.set_xlabel("training minutes (2 CPU cores)")
    axes.set_ylabel("BLEU")
    axes.set_title(args.title, fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="best")  # "best" keeps it off the points (a low baseline sat under "lower right")
    figure.tight_layout()
    with atomic_path(args.output) as temporary:
        figure.savefig(temporary, format="png", dpi=90)
    print(f"{'label':<32} {'minutes':>8} {'BLEU':>6} {'chrF':>6}  decoding / source")
    for label, path, minutes, bleu, chrf, decoding in table:
        print(f"{label:<32} {minutes:>8.1f} {bleu:>6.2f} {chrf:>6.2f}  {decoding} / {path}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
