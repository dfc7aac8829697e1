"""`keras-transformer export`: SavedModel, TFLite, CTranslate2 or a keras-hub style preset."""

import argparse

from keras_transformer.cli.settings import add_length_penalty_rule_flag
from keras_transformer.cli.settings import length_penalty
from keras_transformer.cli.settings import positive_int
from keras_transformer.runs.layout import DEFAULT_SAVED_MODELS


def cmd_export(args):
    from keras_transformer.export.exporter import export_run

    export_run(args.run_dir, saved_model=args.saved_model, tflite=args.tflite, ctranslate2=args.ctranslate2,
               preset=args.preset, beam_size=args.beam_size, max_length=args.max_length,
               length_penalty=args.length_penalty, tflite_quantize=args.tflite_quantize,
               ctranslate2_quantization=args.ctranslate2_quantization, overwrite=args.overwrite,
               jit_compile=args.jit_compile, length_penalty_rule=args.length_penalty_rule)
    return 0


def register(sub, common):
    """Adds this module's subcommand(s) to the `keras-transformer` parser."""
    p = sub.add_parser("export", parents=[common], help="export a run as a SavedModel (and TFLite)",
                       description="Export a trained run as a string-to-string SavedModel, and optionally TFLite.")
    p.add_argument("run_dir", help="run directory written by `train`, or an ensemble directory (`ensemble`: the "
                                   "SavedModel and TFLite model decode its members as one)")
    p.add_argument("--saved-model", default=None,
                   help=f"output SavedModel directory (default {DEFAULT_SAVED_MODELS}/<run name>)")
    p.add_argument("--tflite", default=None, help="also write a TFLite model to this file")
    p.add_argument("--ctranslate2", default=None, metavar="DIR",
                   help="write a CTranslate2 model directory (needs the ctranslate2 extra); translate takes it; "
                        "alone, no SavedModel is written")
    p.add_argument("--ctranslate2-quantization", default=None, metavar="TYPE",
                   help="CTranslate2 weight type, e.g. int8 or float16 (default float32)")
    p.add_argument("--preset", default=None, metavar="DIR",
                   help="write a keras-hub style preset (TransformerSeq2SeqLM.from_preset loads it; translate takes "
                        "it); alone, no SavedModel is written")
    p.add_argument("--tflite-quantize", choices=["float16", "dynamic_range"], default=None,
                   help="TFLite weights in float16 (half the weight bytes) or int8 (dynamic range)")
    p.add_argument("--beam-size", type=positive_int, default=None,
                   help="decoding of the serving signature: 1 greedy, more for beam search (default: the run's "
                        "choice from `tune`, else 1)")
    p.add_argument("--length-penalty", type=length_penalty, default=None,
                   help="alpha, the length penalty's exponent for beam search (default: the run's choice from `tune`, "
                        "else 0.6)")
    add_length_penalty_rule_flag(p, "the run's choice from `tune`, else gnmt")
    p.add_argument("--max-length", type=positive_int, default=None, help="longest output in tokens")
    p.add_argument("--jit-compile", action=argparse.BooleanOptionalAction, default=True,
                   help="the SavedModel decodes in one XLA program (the default, faster; TF Serving needs "
                        "--xla_cpu_compilation_enabled=true); --no-jit-compile writes plain graph ops")
    p.add_argument("--overwrite", action="store_true", help="replace an existing SavedModel / TFLite file")
    p.set_defaults(func=cmd_export)
