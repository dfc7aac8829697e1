"""The `keras-transformer` command line: train, translate, evaluate, tune, ensemble, export, import, plot,
quickstart, serve.

Every subcommand has `--help`. One module per command family (`train`; `translate` with `evaluate`, `tune` and
`ensemble`; `export`; `import_checkpoint`; `plot`; `quickstart`; `serve`), each registering its parser. Heavy imports
(TensorFlow) happen only inside the subcommands, so `keras-transformer --help` answers at once.
"""

import argparse
import contextlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from keras_transformer.cli import export  # noqa: E402 - none of these imports TensorFlow
from keras_transformer.cli import import_checkpoint  # noqa: E402
from keras_transformer.cli import plot  # noqa: E402
from keras_transformer.cli import quickstart  # noqa: E402
from keras_transformer.cli import serve  # noqa: E402
from keras_transformer.cli import train  # noqa: E402
from keras_transformer.cli import translate  # noqa: E402
from keras_transformer.cli.settings import collect_settings  # noqa: E402
from keras_transformer.extras import MissingExtra  # noqa: E402


def build_parser():
    parser = argparse.ArgumentParser(
        prog="keras-transformer",
        description="Train, run and export encoder-decoder Transformers (Keras 3 on TensorFlow).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", action="store_true",
                        help="also show TensorFlow's native start-up log lines (absl, oneDNN, CUDA)")
    for module in (train, translate, export, import_checkpoint, plot, quickstart, serve):
        module.register(sub, common)
    return parser


@contextlib.contextmanager
def _native_stderr_silenced():
    """Points file descriptor 2 at /dev/null: TensorFlow's C++ libraries log there at load time (absl lines about
    oneDNN, CUDA and CPU features) whatever TF_CPP_MIN_LOG_LEVEL says. Python's own stderr is restored before any
    error is reported."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _import_tensorflow(quiet):
    """Loads TensorFlow and tensorflow-text (all their native libraries) up front, silenced unless `--verbose`."""
    if "tensorflow" in sys.modules or not quiet:
        return
    with _native_stderr_silenced():
        import tensorflow  # noqa: F401
        import tensorflow_text  # noqa: F401


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    import warnings

    def show_note(message, category, *_args, **_kwargs):
        # The package's own warnings (a setting that could not be honoured as given) as one line each.
        if category.__module__.startswith("keras_transformer"):
            print(f"keras-transformer {args.command}: note: {message}", file=sys.stderr)
        else:
            default_showwarning(message, category, *_args, **_kwargs)

    default_showwarning = warnings.showwarning
    warnings.showwarning = show_note
    try:
        if args.command in ("train", "quickstart"):
            args.settings = collect_settings(args)  # every setting checked before TensorFlow is even imported
        if args.command == "train":
            # The distribution picks the Keras backend, which must be set before TensorFlow (which imports Keras).
            from keras_transformer.training.distribution import set_backend_for

            args.distribution = train.distribution_config(args)
            set_backend_for(args.distribution.mode)
        if args.command != "plot":
            _import_tensorflow(quiet=not args.verbose)
        return args.func(args)
    except (ValueError, OSError) as error:
        # Every error the package raises for bad input or a bad file names the input (one line, no traceback).
        message = str(error) if not isinstance(error, OSError) or not error.filename or str(error.filename) in str(
            error) else f"{error.filename}: {error.strerror}"
        print(f"keras-transformer {args.command}: error: {' '.join(message.split())}", file=sys.stderr)
        return 2
    except MissingExtra as error:  # an optional package a command or option needs: which extra to install
        print(f"keras-transformer {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"keras-transformer {args.command}: interrupted" + (" (re-run the same command to resume)"
                                                                   if args.command in ("train", "quickstart") else ""),
              file=sys.stderr)
        return 130
