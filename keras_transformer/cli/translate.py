"""`keras-transformer translate`, `evaluate` and `tune`: decoding a run directory or an exported model."""

import os
import sys

from keras_transformer.cli.settings import add_language_flags
from keras_transformer.cli.settings import add_length_penalty_rule_flag
from keras_transformer.cli.settings import length_penalty
from keras_transformer.cli.settings import positive_int
from keras_transformer.cli.settings import read_stdin_lines


def _load_translator(path):
    """`(translator, decoding)` for any artifact: `decoding` is a run's `decoding.json` (`None` for an export)."""
    from keras_transformer.translators import load_translator

    translator = load_translator(path)
    return translator, translator.decoding


def _load_run_translator(path):
    """`(Translator, decoding)` for a run directory or an ensemble directory (`keras-transformer ensemble`)."""
    from keras_transformer.decoding.translator import Translator

    translator, decoding = _load_translator(path)
    if not isinstance(translator, Translator):
        raise ValueError(f"{path}: an export decodes as it was exported; choose the decoding of the run directory it "
                         "came from (then export it again)")
    return translator, decoding


def _with_length_penalty_rule(translator, decoding, rule):
    """Sets the length penalty rule a run's `Translator` decodes with (its `decoding`, kept otherwise)."""
    import dataclasses

    from keras_transformer.decoding.beam_search import DEFAULT_LENGTH_PENALTY
    from keras_transformer.decoding.tuning import DecodingSettings

    decoding = decoding or DecodingSettings(beam_size=1, length_penalty=DEFAULT_LENGTH_PENALTY)
    translator.decoding = dataclasses.replace(decoding, length_penalty_rule=rule)


def _decoding_arguments(args, translator, decoding):
    """`translate()` keywords from `--beam-size`/`--length-penalty` (`None`: as the artifact decodes by default: a
    run's tuned choice, `decoding.json`, else greedy; an export as exported), `--length-penalty-rule` applied to a
    run's translator; the words that describe the decoding; and the decoding as resolved (for a report)."""
    from keras_transformer.decoding.samplers import BeamSampler
    from keras_transformer.decoding.translator import Translator

    beam_size = args.beam_size if args.beam_size is not None else decoding.beam_size if decoding else 1
    length_penalty = args.length_penalty
    if length_penalty is None and decoding is not None and beam_size > 1:
        length_penalty = decoding.length_penalty
    rule = args.length_penalty_rule
    if rule is None and decoding is not None and beam_size > 1:
        rule = decoding.length_penalty_rule
    kwargs = {"beam_size": args.beam_size, "length_penalty": args.length_penalty,
              "max_length": getattr(args, "max_length", None)}
    kwargs.update(_language_arguments(args))
    if args.length_penalty_rule is not None:
        if not isinstance(translator, Translator):
            raise ValueError(f"--length-penalty-rule applies to run directories; {args.model} decodes with the "
                             "length penalty rule it was exported with (export --length-penalty-rule)")
        _with_length_penalty_rule(translator, decoding, args.length_penalty_rule)
    if args.beam_size is None and decoding is None and not isinstance(translator, Translator):
        beam_size = getattr(translator, "beam_size", None)  # what an export records (a SavedModel, CTranslate2)
    if beam_size is None:
        words = "as exported"
    elif beam_size == 1:
        words = "greedy"
    elif isinstance(translator, Translator):
        alpha = length_penalty if length_penalty is not None else BeamSampler().length_penalty
        words = f"beam {beam_size}, length penalty {alpha:g}"
        if rule not in (None, BeamSampler().length_penalty_rule):
            words += f" ({rule} rule)"
    else:
        words = f"beam {beam_size}"
    flags = (args.beam_size, args.length_penalty, args.length_penalty_rule)
    if decoding is not None and all(flag is None for flag in flags):
        words += f" (decoding.json: {decoding.describe()})"
    resolved = {"beam_size": beam_size, "length_penalty": length_penalty, "length_penalty_rule": rule}
    return kwargs, words, resolved


def _language_arguments(args):
    """`source_language` / `target_language` keywords from `--source-lang` / `--target-lang` (only those given; a
    one-pair model refuses them in one line)."""
    return {name: value for name, value in (("source_language", getattr(args, "source_lang", None)),
                                            ("target_language", getattr(args, "target_lang", None))) if value}


def cmd_translate(args):
    translator, decoding = _load_translator(args.model)
    decoding_kwargs, _, _ = _decoding_arguments(args, translator, decoding)
    lines = read_stdin_lines()
    if args.plot_attention and not lines:
        raise ValueError("--plot-attention needs at least one input line on stdin")
    if args.n_best or args.score or args.prefix or args.alignments or args.stream:
        _print_decoding_outputs(args, translator, lines, decoding_kwargs)
    else:
        outputs = translator.translate(lines, batch_size=args.batch_size,
                                       **decoding_kwargs) if lines else []
        for line in outputs:
            print(line)
    sys.stdout.flush()
    if args.plot_attention:
        translator.plot_attention(lines[0], args.plot_attention, beam_size=decoding_kwargs["beam_size"])
        print(f"wrote the cross-attention of the first sentence to {args.plot_attention}", file=sys.stderr)
    return 0


def _read_lines_like(path, lines, flag):
    """The lines of `path`, one per input line (`ValueError` naming the flag when the counts differ)."""
    from keras_transformer.data.corpus import read_lines

    given = read_lines(path)
    if len(given) != len(lines):
        raise ValueError(f"{flag} {path}: {len(given)} lines for {len(lines)} input lines; give one per input line")
    return given


def _print_decoding_outputs(args, translator, lines, decoding_kwargs):
    """`--n-best`, `--score`, `--prefix`, `--alignments` or `--stream`: the output beyond one string per line."""
    for flag in ("n_best", "score", "prefix", "alignments", "stream"):
        if getattr(args, flag) and not translator.supports(
                {"n_best": "translate_n_best", "prefix": "translate_with_prefix", "alignments": "align"}.get(flag,
                                                                                                         flag)):
            raise ValueError(f"--{flag.replace('_', '-')} needs a run directory; {args.model} is a "
                             f"{type(translator).__name__}, which returns translations only")
    batch = {"batch_size": args.batch_size}
    if args.n_best:  # Moses/Marian n-best format: ID ||| translation ||| score
        for index, hyps in enumerate(translator.translate_n_best(lines, args.n_best, **batch, **decoding_kwargs)):
            for text, score in hyps:
                print(f"{index} ||| {text} ||| {score:.6f}")
    elif args.score:
        results = translator.score(lines, _read_lines_like(args.score, lines, "--score"), normalize=args.normalize,
                                   **batch)
        for result in results:
            print(f"{result['score']:.6f} ||| {' '.join(f'{v:.4f}' for v in result['token_scores'])}")
    elif args.prefix:
        prefixes = _read_lines_like(args.prefix, lines, "--prefix")
        for text in translator.translate_with_prefix(lines, prefixes, **batch, **decoding_kwargs):
            print(text)
    elif args.alignments:
        for text, pairs in translator.align(lines, **batch, **decoding_kwargs):
            print(f"{text} ||| {' '.join(f'{i}-{j}' for i, j in pairs)}")
    else:
        for line in lines:
            for piece in translator.stream(line, max_length=decoding_kwargs["max_length"]):
                print(piece, end="", flush=True)
            print(flush=True)


def cmd_evaluate(args):
    from keras_transformer.data.corpus import read_parallel_corpus
    from keras_transformer.scoring import corpus_scores

    corpus = read_parallel_corpus(args.src, args.ref)
    if corpus.dropped_empty:
        print(f"skipping {corpus.dropped_empty} pair(s) with a blank source or reference line "
              f"({len(corpus)} scored)", file=sys.stderr)
    if not len(corpus):
        raise ValueError(f"{args.src} / {args.ref}: no pair with both a source and a reference line to score")
    translator, decoding = _load_translator(args.model)
    decoding_kwargs, decoding_words, resolved = _decoding_arguments(args, translator, decoding)
    hypotheses = translator.translate(list(corpus.sources), batch_size=args.batch_size,
                                      verbose=1, **decoding_kwargs)
    scores = corpus_scores(hypotheses, corpus.targets)
    signatures = scores["signatures"]
    print(f"sentences: {len(hypotheses)}  decoding: {decoding_words}")
    print(f"BLEU (cased, detokenized, sacreBLEU 13a) = {scores['bleu']:.2f}   {scores['bleu_detail']}")
    print(f"BLEU (lowercased)                        = {scores['bleu_lowercased']:.2f}")
    print(f"chrF                                     = {scores['chrf']:.2f}")
    print(f"signatures: BLEU {signatures['bleu']}  chrF {signatures['chrf']}")
    if args.output:
        from keras_transformer.atomic import write_text

        write_text(args.output, "\n".join(hypotheses) + "\n")
    if args.report:
        from keras_transformer.atomic import write_json

        write_json(args.report, {
            "model": args.model, "src": args.src, "ref": args.ref, "sentences": len(hypotheses),
            "decoding": decoding_words, **resolved,
            "bleu": round(scores["bleu"], 4), "bleu_lowercased": round(scores["bleu_lowercased"], 4),
            "chrf": round(scores["chrf"], 4), "bleu_detail": scores["bleu_detail"], "signatures": signatures})
    return 0


def cmd_tune(args):
    from keras_transformer.data.corpus import read_parallel_corpus
    from keras_transformer.decoding.beam_search import DEFAULT_LENGTH_PENALTY_RULE
    from keras_transformer.decoding.tuning import DEFAULT_LENGTH_PENALTIES
    from keras_transformer.decoding.tuning import search_decoding
    from keras_transformer.runs.layout import DECODING_FILE
    from keras_transformer.runs.run import write_decoding_settings

    target = os.path.join(args.run_dir, DECODING_FILE)
    if os.path.exists(target) and not args.overwrite:  # before minutes of decoding, not after
        raise FileExistsError(f"{target}: exists; pass --overwrite to choose the decoding again")
    corpus = read_parallel_corpus(args.src, args.ref)
    if not len(corpus):
        raise ValueError(f"{args.src} / {args.ref}: no pair with both a source and a reference line to score")
    translator, decoding = _load_run_translator(args.run_dir)
    progress = 1 if sys.stdout.isatty() else 0
    alphas = args.length_penalties or DEFAULT_LENGTH_PENALTIES
    rule = args.length_penalty_rule or (decoding.length_penalty_rule if decoding is not None
                                        else DEFAULT_LENGTH_PENALTY_RULE)

    # The run's translator keeps its decoding's length limit and forced end (an imported checkpoint's own), and so
    # does the choice.
    _with_length_penalty_rule(translator, decoding, rule)
    keep = {} if decoding is None else {"max_length": decoding.max_length, "force_end": decoding.force_end}

    languages = _language_arguments(args)

    def translate(sources, beam_size, length_penalty):
        return translator.translate(sources, beam_size=beam_size, batch_size=args.batch_size, verbose=progress,
                                    length_penalty=length_penalty if beam_size > 1 else None, **languages)

    def show(row):
        print(f"beam {row['beam_size']}, length penalty {row['length_penalty']:g}: BLEU {row['bleu']:.2f}, "
              f"chrF {row['chrf']:.2f} ({row['seconds']:.0f} s)", flush=True)

    tuned_on = f"{os.path.basename(args.src)} / {os.path.basename(args.ref)}"
    print(f"Choosing the decoding of {args.run_dir} on {len(corpus)} pairs of {tuned_on}: beam sizes "
          f"{' '.join(map(str, args.beam_sizes))} x length penalties {' '.join(f'{a:g}' for a in alphas)}"
          + ("" if rule == DEFAULT_LENGTH_PENALTY_RULE else f" ({rule} rule)"), flush=True)
    search = search_decoding(translate, corpus.sources, corpus.targets, beam_sizes=args.beam_sizes,
                             length_penalties=alphas, tuned_on=tuned_on, on_row=show, length_penalty_rule=rule)
    print(search.table())
    import dataclasses

    best = dataclasses.replace(search.best, **keep)
    path = write_decoding_settings(args.run_dir, best, overwrite=args.overwrite)
    print(f"wrote {path}: translate, evaluate and export of this run now decode with {best.describe()}")
    return 0


def cmd_ensemble(args):
    from keras_transformer.runs.ensemble import write_ensemble

    ensemble = write_ensemble(args.output, args.runs, overwrite=args.overwrite, combine=args.combine)
    how = "log-probabilities averaged" if args.combine == "log_prob" else "probabilities averaged"
    print(f"wrote {args.output}: {len(ensemble.members)} runs decoded as one (their next-token {how}); choose its "
          f"decoding with `keras-transformer tune {args.output} --src ... --ref ...`")
    return 0


def register(sub, common):
    """Adds this module's subcommand(s) to the `keras-transformer` parser."""
    def add_decoding_flags(p):
        p.add_argument("--beam-size", type=positive_int, default=None,
                       help="1 = greedy; the paper uses 4 (default: the run's choice from `tune`, else 1)")
        p.add_argument("--length-penalty", type=length_penalty, default=None,
                       help="alpha, the length penalty's exponent for beam search (default: the run's choice "
                            "from `tune`, else 0.6)")
        add_length_penalty_rule_flag(p, "the run's choice from `tune`, else gnmt")
        p.add_argument("--batch-size", type=positive_int, default=32, help="sentences decoded together")
        p.add_argument("--max-length", type=positive_int, default=None, help="longest output in tokens")
        add_language_flags(p)

    p = sub.add_parser("translate", parents=[common], help="translate stdin to stdout",
                       description="Read sentences on stdin (one per line), write translations on stdout.")
    p.add_argument("model", help="run directory (from `train`), ensemble directory (`ensemble`), preset (`export "
                                 "--preset`), exported SavedModel or CTranslate2 directory (`export --ctranslate2`)")
    add_decoding_flags(p)
    p.add_argument("--plot-attention", metavar="FILE.png",
                   help="also save a heat map of the cross-attention for the first sentence")
    outputs = p.add_mutually_exclusive_group()
    outputs.add_argument("--n-best", type=positive_int, default=None, metavar="K",
                         help="the K best translations of each line by beam search, as 'LINE ||| translation ||| "
                              "score' lines (Moses/Marian n-best format; the beam widens to K)")
    outputs.add_argument("--score", metavar="FILE",
                         help="instead of translating, score the translations in FILE (one per input line): "
                              "'log-probability ||| each token's log-probability'")
    outputs.add_argument("--prefix", metavar="FILE",
                         help="target prefixes, one per input line ('' for none): each translation begins with its "
                              "prefix and goes on from there")
    outputs.add_argument("--alignments", action="store_true",
                         help="also print word alignments: 'translation ||| i-j ...' (source word i, target word j, "
                              "words split at spaces from 0)")
    outputs.add_argument("--stream", action="store_true",
                         help="print each translation as it is decoded (greedy, token by token)")
    p.add_argument("--normalize", action="store_true", help="with --score: divide by the number of tokens")
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("evaluate", parents=[common], help="sacreBLEU and chrF on a test set",
                       description="Translate --src and score against --ref with sacreBLEU (cased, detokenized; "
                                   "also lowercased) and chrF.")
    p.add_argument("model", help="run directory, ensemble directory or exported SavedModel directory")
    p.add_argument("--src", required=True, help="source sentences")
    p.add_argument("--ref", required=True, help="reference translations")
    p.add_argument("--output", help="also write the translations to this file")
    p.add_argument("--report", metavar="FILE.json",
                   help="also write the scores, the decoding and sacreBLEU's signatures to this JSON file")
    add_decoding_flags(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("tune", parents=[common], help="choose beam size and length penalty on held-out data",
                       description="Translate held-out pairs (a validation set, never the test set you report) "
                                   "with each beam size and length penalty of a grid, score them with sacreBLEU, and "
                                   "keep the best in RUN_DIR/decoding.json: translate, evaluate and export of the "
                                   "run then decode with it by default.")
    p.add_argument("run_dir", help="run directory written by `train` (or an ensemble directory)")
    p.add_argument("--src", required=True, help="held-out source sentences")
    p.add_argument("--ref", required=True, help="their reference translations")
    p.add_argument("--beam-sizes", type=positive_int, nargs="+", default=[4], metavar="N",
                   help="beam sizes to try (default 4)")
    p.add_argument("--length-penalties", type=length_penalty, nargs="+", metavar="ALPHA",
                   default=None, help="length-penalty alphas to try (default 0 0.2 0.4 0.6 0.8 1 1.2 1.5 2)")
    add_length_penalty_rule_flag(p, "the rule of RUN_DIR/decoding.json, else gnmt; the choice keeps it")
    p.add_argument("--batch-size", type=positive_int, default=32, help="sentences decoded together")
    p.add_argument("--overwrite", action="store_true", help="replace the run's decoding.json")
    add_language_flags(p)
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("ensemble", parents=[common], help="decode several runs as one",
                       description="Write an ensemble directory: the run directories named here (trained on the "
                                   "same corpus with the same vocabulary settings) decoded together, their next-token "
                                   "distributions combined at every step (--combine). translate, evaluate, tune and "
                                   "export take it wherever they take a run directory.")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="two or more run directories written by `train`")
    p.add_argument("--output", required=True, help="the ensemble directory to write")
    p.add_argument("--overwrite", action="store_true", help="replace an ensemble directory's members")
    p.add_argument("--combine", choices=["log_prob", "prob"], default="log_prob",
                   help="how the members' next-token distributions become one: the mean of their log-probabilities "
                        "(default, Marian's rule) or the log of the mean of their probabilities (fairseq's)")
    p.set_defaults(func=cmd_ensemble)
