"""Quality: how an ensemble combines its members' next-token distributions, on held-out pairs (val, never test).

Two rules are in use in the field: Marian averages the members' log-probabilities (a normalized geometric mean;
`EnsembleParts(combine="log_prob")`, what `keras-transformer ensemble` decodes with) and fairseq averages their
probabilities (`combine="prob"`). This decodes the same held-out pairs with each rule over a grid of length
penalties (beam search, `search_decoding` as `keras-transformer tune` does) and prints one table: BLEU and chrF per
rule and length penalty, each rule's best, and the difference.

Usage:
    python benchmarks/ensemble_combine.py RUN_DIR RUN_DIR [...] --src val.de.gz --ref val.en.gz
    python benchmarks/ensemble_combine.py runs/a runs/b --src val.de.gz --ref val.en.gz --length-penalties 1 1.2
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import print_table  # noqa: E402

from keras_transformer.data.corpus import read_parallel_corpus  # noqa: E402
from keras_transformer.decoding.translator import Translator  # noqa: E402
from keras_transformer.decoding.tuning import DEFAULT_LENGTH_PENALTIES  # noqa: E402
from keras_transformer.decoding.tuning import search_decoding  # noqa: E402
from keras_transformer.models.ensemble import COMBINES  # noqa: E402
from keras_transformer.models.ensemble import EnsembleParts  # noqa: E402
from keras_transformer.runs.ensemble import check_members  # noqa: E402
from keras_transformer.runs.run import load_run  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="member run directories (at least 2, sharing their tokenizers)")
    parser.add_argument("--src", required=True, help="held-out source file (val: this is a choice)")
    parser.add_argument("--ref", required=True, help="its reference translations")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--length-penalties", type=float, nargs="+", default=list(DEFAULT_LENGTH_PENALTIES))
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-pairs", type=int, help="only the first N pairs (smoke tests)")
    args = parser.parse_args(argv)

    runs = [load_run(directory) for directory in args.runs]
    check_members(runs)
    corpus = read_parallel_corpus(args.src, args.ref)
    sources, references = list(corpus.sources), list(corpus.targets)
    if args.max_pairs:
        sources, references = sources[: args.max_pairs], references[: args.max_pairs]
    print(f"{len(runs)} members, {len(sources)} pairs of {os.path.basename(args.src)}, beam {args.beam_size}, "
          f"length penalties {' '.join(f'{a:g}' for a in args.length_penalties)}", flush=True)
    rows, best = [], {}
    for combine in COMBINES:
        parts = EnsembleParts([run.model for run in runs], combine=combine)
        translator = Translator(parts, runs[0].source_tokenizer, runs[0].target_tokenizer)

        def translate(texts, beam_size, length_penalty, translator=translator):
            return translator.translate(texts, beam_size=beam_size, batch_size=args.batch_size,
                                        length_penalty=length_penalty if beam_size > 1 else None)

        def show(row, combine=combine):
            print(f"{combine}: length penalty {row['length_penalty']:g}: BLEU {row['bleu']:.2f}, chrF "
                  f"{row['chrf']:.2f} ({row['seconds']:.0f} s)", flush=True)

        search = search_decoding(translate, sources, references, beam_sizes=[args.beam_size],
                                 length_penalties=args.length_penalties, on_row=show)
        best[combine] = search.best
        rows += [[combine, f"{r['length_penalty']:g}", f"{r['bleu']:.2f}", f"{r['chrf']:.2f}", f"{r['seconds']:.0f}"]
                 for r in search.rows]
    print()
    print_table(["combine", "length penalty", "BLEU", "chrF", "seconds"], rows)
    print()
    print_table(["combine", "best length penalty", "BLEU", "chrF"],
                [[c, f"{b.length_penalty:g}", f"{b.bleu:.2f}", f"{b.chrf:.2f}"] for c, b in best.items()])
    print(f"\nprob - log_prob at each rule's best: {best['prob'].bleu - best['log_prob'].bleu:+.2f} BLEU, "
          f"{best['prob'].chrf - best['log_prob'].chrf:+.2f} chrF")
    return 0


if __name__ == "__main__":
    sys.exit(main())
