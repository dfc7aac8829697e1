"""`keras-transformer quickstart`: the main job on the embedded synthetic corpus (`keras_transformer.quickstart`)."""

import os

from keras_transformer.cli.settings import add_settings_flags
from keras_transformer.cli.settings import positive_int
from keras_transformer.runs.layout import DEFAULT_SAVED_MODELS


def cmd_quickstart(args):
    from keras_transformer.quickstart import run_quickstart

    run_quickstart(output_dir=args.output, settings=args.settings, num_train=args.num_train,
                   num_heldout=args.num_heldout, overwrite=args.overwrite)
    return 0


def register(sub, common):
    """Adds this module's subcommand to the `keras-transformer` parser."""
    p = sub.add_parser("quickstart", parents=[common], help="the main job on the embedded data (no download)",
                       description="Train on a built-in synthetic date-translation corpus (spelled-out English "
                                   "dates -> ISO dates), report held-out exact match and show translations.")
    p.add_argument("--output", default=os.path.join(DEFAULT_SAVED_MODELS, "quickstart"))
    p.add_argument("--num-train", type=positive_int, default=None, help="training pairs")
    p.add_argument("--num-heldout", type=positive_int, default=None, help="held-out pairs")
    p.add_argument("--overwrite", action="store_true", help="train again where --output holds a finished run")
    p.add_argument("--config", help="JSON or YAML settings file")
    add_settings_flags(p)
    p.set_defaults(func=cmd_quickstart)
