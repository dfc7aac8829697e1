"""`keras-transformer train`."""

import sys

from keras_transformer.cli.settings import add_language_flags
from keras_transformer.cli.settings import add_settings_flags


def distribution_config(args):
    from keras_transformer.training.distribution import DistributionConfig

    return DistributionConfig(mode=args.distribute, devices=args.devices, coordinator=args.coordinator,
                              num_processes=args.num_processes, process_id=args.process_id,
                              timeout=args.coordinator_timeout).validate()


def cmd_train(args):
    # `main` checked the settings and the distribution, and chose the backend, before Keras was imported.
    distribution, settings = args.distribution, args.settings
    if bool(args.val_src) != bool(args.val_tgt):
        raise ValueError("--val-src and --val-tgt go together")
    from keras_transformer.data.corpus import read_parallel_corpus
    from keras_transformer.data.streaming import scan_corpus
    from keras_transformer.runs.config import TrainingConfig
    from keras_transformer.runs.config import check_settings
    from keras_transformer.training.trainer import train

    model_settings, training_settings = check_settings(settings)
    config = TrainingConfig(**training_settings)
    verbose = 1 if sys.stdout.isatty() else 2
    # A fine-tune keeps its starting run's vocabulary: the scan samples nothing to learn one from.
    sample_size = 1 if args.init_from else config.vocab_sample
    print(f"Reading {' '.join(args.src)} / {' '.join(args.tgt)} (one pass: line counts, UTF-8"
          + (")" if args.init_from else f", a vocabulary sample of up to {sample_size:,} pairs)"), flush=True)
    val = read_parallel_corpus(args.val_src, args.val_tgt) if args.val_src else None
    # The scan goes straight to train() (no reference kept here): its vocabulary sample is freed once used.
    train(scan_corpus(args.src, args.tgt, sample_size=sample_size, max_words=config.max_words,
                      seed=config.seed, verbose=1 if verbose == 1 else 0),
          args.output, val_data=val, model_settings=model_settings, training_settings=training_settings,
          verbose=verbose, distribution=distribution, overwrite=args.overwrite, init_from=args.init_from)
    return 0


def register(sub, common):
    """Adds this module's subcommand(s) to the `keras-transformer` parser."""
    p = sub.add_parser("train", parents=[common], help="train tokenizers and a model on a parallel corpus",
                       description="Train subword tokenizers and a Transformer on a parallel corpus "
                                   "(one sentence per line, .gz accepted) and write them under --output.")
    p.add_argument("--src", required=True, nargs="+", metavar="FILE",
                   help="source-language file(s): paths or quoted globs of shards, plain or .gz")
    p.add_argument("--tgt", required=True, nargs="+", metavar="FILE",
                   help="target-language file(s), as many shards as --src (line i translates --src line i)")
    p.add_argument("--output", required=True, help="run directory to write (re-run to resume)")
    p.add_argument("--val-src", help="validation source file")
    p.add_argument("--val-tgt", help="validation target file")
    p.add_argument("--config", help="JSON or YAML file with the same settings as the flags (flags win)")
    p.add_argument("--overwrite", action="store_true",
                   help="train from scratch where --output holds a finished or started run (its files are removed)")
    p.add_argument("--init-from", metavar="DIR", default=None,
                   help="fine-tune: start from the finished run DIR's weights and keep its tokenizers and model "
                        "settings (no vocabulary is learned; of the model flags only the dropout ones may differ "
                        "from DIR's). Unless given: --warmup-steps 400 and an --lr-scale that puts the peak "
                        "learning rate at 1e-4, then the inverse-square-root decay (--decay cosine: to zero at the "
                        "end). DIR must stay until the fine-tune has finished (a resume checks it again)")
    add_language_flags(p, fine_tune=True)
    add_settings_flags(p)
    group = p.add_argument_group("scale out (docs/scaling.md)")
    group.add_argument("--distribute", metavar="{mirrored,multi-host}", default=None,
                       help="mirrored: tf.distribute.MirroredStrategy over the local GPUs (or --devices logical CPU "
                            "devices); multi-host: Keras distribution API on JAX, one command per process")
    group.add_argument("--devices", type=int, default=None, help="mirrored: number of local devices")
    group.add_argument("--coordinator", metavar="HOST:PORT", default=None, help="multi-host: process 0's address")
    group.add_argument("--num-processes", type=int, default=None, help="multi-host: processes in the run")
    group.add_argument("--process-id", type=int, default=None, help="multi-host: this process (0 writes --output)")
    group.add_argument("--coordinator-timeout", type=float, default=300.0,
                       help="multi-host: seconds to wait for the other processes (default 300)")
    p.set_defaults(func=cmd_train)
