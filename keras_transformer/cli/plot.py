"""`keras-transformer plot`: a run's training curves."""

import os


def cmd_plot(args):
    from keras_transformer.training.callbacks import load_history
    from keras_transformer.training.plots import plot_history

    out = args.output or os.path.join(args.run_dir, "history.png")
    plot_history(load_history(os.path.join(args.run_dir, "history.json")), out)
    print(f"wrote {out}")
    return 0


def register(sub, common):
    """Adds this module's subcommand to the `keras-transformer` parser."""
    p = sub.add_parser("plot", parents=[common], help="plot training curves of a run",
                       description="Plot loss/accuracy curves from RUN_DIR/history.json to a PNG.")
    p.add_argument("run_dir")
    p.add_argument("--output", help="PNG path (default RUN_DIR/history.png)")
    p.set_defaults(func=cmd_plot)
