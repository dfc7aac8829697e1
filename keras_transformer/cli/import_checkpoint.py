"""`keras-transformer import`: a pretrained checkpoint (Marian / OPUS-MT, M2M-100, NLLB-200) -> a run directory."""


def cmd_import(args):
    from keras_transformer.importers import import_checkpoint

    import_checkpoint(args.source, args.output, overwrite=args.overwrite, verbose=1)
    from keras_transformer.runs.run import load_tokenizers

    languages = getattr(load_tokenizers(args.output)[1], "languages", None)
    target = f" --target-lang {languages[min(1, len(languages) - 1)]}" if languages else ""
    print(f"Try: echo 'a sentence' | keras-transformer translate {args.output}{target}")
    return 0


def register(sub, common):
    """Adds this module's subcommand to the `keras-transformer` parser."""
    p = sub.add_parser("import", parents=[common],
                       help="import a pretrained translator (OPUS-MT, M2M-100, NLLB-200) as a run",
                       description="Import a checkpoint in the Hugging Face layout as a run directory that translate, "
                                   "evaluate, tune, export, ensemble and train --init-from take: config.json's "
                                   "model_type picks the importer (marian: OPUS-MT; m2m_100: M2M-100 and NLLB-200). "
                                   "Needs the hf extra: pip install \"keras-transformer-mt[hf]\".")
    p.add_argument("source", help="a checkpoint directory (config.json, model.safetensors or pytorch_model.bin, and "
                                  "the tokenizer files: source.spm, target.spm and vocab.json for OPUS-MT; "
                                  "sentencepiece.bpe.model and tokenizer.json or vocab.json for M2M-100 / NLLB) or "
                                  "hf://OWNER/NAME, for example hf://Helsinki-NLP/opus-mt-de-en or "
                                  "hf://facebook/nllb-200-distilled-600M (downloaded from the Hugging Face Hub)")
    p.add_argument("--output", required=True, help="the run directory to write (written whole or not at all)")
    p.add_argument("--overwrite", action="store_true", help="replace a run directory at --output")
    p.set_defaults(func=cmd_import)
