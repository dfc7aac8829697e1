"""`keras-transformer import`: a pretrained checkpoint (Marian / OPUS-MT) -> a run directory."""


def cmd_import(args):
    from keras_transformer.importers import import_checkpoint

    import_checkpoint(args.source, args.output, overwrite=args.overwrite, verbose=1)
    print(f"Try: echo 'a sentence' | keras-transformer translate {args.output}")
    return 0


def register(sub, common):
    """Adds this module's subcommand to the `keras-transformer` parser."""
    p = sub.add_parser("import", parents=[common], help="import a pretrained translator (Marian / OPUS-MT) as a run",
                       description="Import a Marian (OPUS-MT) checkpoint in the Hugging Face layout as a run "
                                   "directory that translate, evaluate, tune, export, ensemble and train --init-from "
                                   "take. Needs the hf extra: pip install \"keras-transformer[hf]\".")
    p.add_argument("source", help="a checkpoint directory (config.json, model.safetensors or pytorch_model.bin, "
                                  "source.spm, target.spm, vocab.json) or hf://OWNER/NAME, for example "
                                  "hf://Helsinki-NLP/opus-mt-de-en (downloaded from the Hugging Face Hub)")
    p.add_argument("--output", required=True, help="the run directory to write (written whole or not at all)")
    p.add_argument("--overwrite", action="store_true", help="replace a run directory at --output")
    p.set_defaults(func=cmd_import)
