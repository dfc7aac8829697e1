"""Train German->English on Multi30k, choose the length penalty on the validation set, then score test2016 with
sacreBLEU and show sample translations.

    python examples/translate_multi30k.py --data DATA_DIR --output runs/multi30k
    python examples/translate_multi30k.py            # downloads Multi30k with keras.utils.get_file

DIR holds train/val/test_2016_flickr .de/.en .gz files. Settings come from examples/multi30k.yaml
(`--config`), overridable with `--epochs` etc. The recipe trains `--members 2` runs one after the other (seeds
`seed` and `seed + 1`, each given half of `max_minutes`, in OUTPUT/member0 and OUTPUT/member1) and decodes them as
one ensemble (OUTPUT is its ensemble directory); `--members 1` trains one run in OUTPUT with the whole budget.
Re-running the same command resumes an interrupted run and skips finished members.
Every choice is made on the validation set (the length penalty: OUTPUT/decoding.json); test2016 is only
translated at the end. Results go to OUTPUT/results.json and OUTPUT/test2016.*.en.
"""

import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="directory with the Multi30k .gz files (default: download)")
    parser.add_argument("--output", default="runs/multi30k", help="run directory")
    parser.add_argument("--config", default=os.path.join(HERE, "multi30k.yaml"), help="settings file")
    parser.add_argument("--src-lang", default="de")
    parser.add_argument("--tgt-lang", default="en")
    parser.add_argument("--epochs", type=int, help="override the config's epochs")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one setting of the config, e.g. --set dropout=0.1 --set seed=1 (YAML values; "
                             "the ablations of docs/quality.md)")
    parser.add_argument("--members", type=int, default=2,
                        help="runs trained one after the other and decoded as one ensemble, splitting max_minutes "
                             "(default 2, the recipe of docs/quality.md; 1: a single run in OUTPUT)")
    parser.add_argument("--steps-per-epoch", type=int, help="limit steps per epoch (smoke tests)")
    parser.add_argument("--max-train-pairs", type=int, help="use only the first N training pairs (smoke tests)")
    parser.add_argument("--max-test-pairs", type=int, help="score only the first N test pairs (smoke tests)")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--tune", action=argparse.BooleanOptionalAction, default=True,
                        help="choose the length penalty on the validation set (OUTPUT/decoding.json) before the test "
                             "set is translated (default on; kept if the run has one already)")
    parser.add_argument("--skip-training", action="store_true", help="only evaluate an existing run")
    parser.add_argument("--samples", type=int, default=8, help="sample translations to print")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    from keras_transformer.data.corpus import ParallelCorpus
    from keras_transformer.data.corpus import download_multi30k
    from keras_transformer.data.corpus import read_parallel_corpus
    from keras_transformer.runs.config import check_settings
    from keras_transformer.runs.config import load_settings_file
    from keras_transformer.runs.run import load_run
    from keras_transformer.scoring import corpus_scores
    from keras_transformer.training.trainer import train
    from keras_transformer.translators import load_translator

    if args.members < 1:
        raise SystemExit(f"--members {args.members}: expected 1 or more")
    members = [args.output] if args.members == 1 else [os.path.join(args.output, f"member{i}")
                                                      for i in range(args.members)]
    data = args.data or download_multi30k()
    src, tgt = args.src_lang, args.tgt_lang

    def path(split, lang):
        return os.path.join(data, f"{split}.{lang}.gz")

    test = read_parallel_corpus(path("test_2016_flickr", src), path("test_2016_flickr", tgt))
    if args.max_test_pairs:
        test = ParallelCorpus(test.sources[: args.max_test_pairs], test.targets[: args.max_test_pairs], name=test.name)

    started = time.time()
    if args.skip_training:
        runs = [load_run(member) for member in members]
        train_seconds = None
    else:
        corpus = read_parallel_corpus(path("train", src), path("train", tgt))
        if args.max_train_pairs:
            corpus = ParallelCorpus(corpus.sources[: args.max_train_pairs], corpus.targets[: args.max_train_pairs],
                                    name=corpus.name)
        val = read_parallel_corpus(path("val", src), path("val", tgt))
        settings = load_settings_file(args.config)
        settings.update(parse_overrides(args.set))
        if args.epochs:
            settings["epochs"] = args.epochs
        if args.steps_per_epoch:
            settings["steps_per_epoch"] = args.steps_per_epoch
        if settings.get("max_minutes") is not None:
            settings["max_minutes"] = settings["max_minutes"] / len(members)  # the members share the budget
        runs = []
        for i, member in enumerate(members):
            if len(members) > 1 and os.path.exists(os.path.join(member, "model.keras")) \
                    and not os.path.exists(os.path.join(member, "checkpoint")):
                print(f"member {i}: {member} is trained already", flush=True)
                runs.append(load_run(member))
                continue
            model_settings, training_settings = check_settings({**settings, "seed": settings.get("seed", 0) + i})
            if len(members) > 1:
                print(f"member {i} of {len(members)}: seed {training_settings['seed']}, "
                      f"{format(settings['max_minutes'], 'g') if settings.get('max_minutes') else 'no'} minutes "
                      f"-> {member}", flush=True)
            runs.append(train(corpus, member, val_data=val, model_settings=model_settings,
                              training_settings=training_settings, verbose=1 if sys.stdout.isatty() else 2))
            if len(members) > 1 and i == 0:
                warn_if_members_are_short(member, settings.get("max_minutes"))
        train_seconds = time.time() - started

    if len(runs) > 1:
        from keras_transformer.runs.ensemble import is_ensemble_directory
        from keras_transformer.runs.ensemble import write_ensemble

        if not is_ensemble_directory(args.output):
            write_ensemble(args.output, members)
    translator = load_translator(args.output)  # the run, or the ensemble of the members
    decoding = translator.decoding
    if args.tune and decoding is None and args.beam_size > 1:
        decoding = tune_on_validation(translator, args.output, path("val", src), path("val", tgt), args.beam_size,
                                      args.max_test_pairs)
    length_penalty = decoding.length_penalty if decoding is not None else None
    results = {"train_seconds": train_seconds, "members": len(runs),
               "parameters": sum(run.model.count_params() for run in runs), "test_sentences": len(test)}
    results.update(training_totals(members))
    hypotheses = {}
    for name, beam in (("greedy", 1), (f"beam{args.beam_size}", args.beam_size)):
        t0 = time.time()
        hyps = translator.translate(list(test.sources), beam_size=beam, batch_size=64, verbose=1,
                                    length_penalty=length_penalty if beam > 1 else None)
        hypotheses[name] = hyps
        with open(os.path.join(args.output, f"test2016.{name}.{tgt}"), "w", encoding="utf-8") as f:
            f.write("\n".join(hyps) + "\n")
        scores = corpus_scores(hyps, test.targets)
        results[name] = {
            "bleu": round(scores["bleu"], 2),
            "bleu_lowercased": round(scores["bleu_lowercased"], 2),
            "chrf": round(scores["chrf"], 2),
            "signature": scores["signatures"]["bleu"],
            "decode_seconds": round(time.time() - t0, 1),
        }
    if decoding is not None:
        results["decoding"] = {"beam_size": decoding.beam_size, "length_penalty": decoding.length_penalty,
                               "validation_bleu": decoding.bleu, "validation_chrf": decoding.chrf,
                               "tuned_on": decoding.tuned_on}
    with open(os.path.join(args.output, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)

    best = f"beam{args.beam_size}"
    print(f"\n{'source':<45} | {'translation (' + best + ')':<45} | reference")
    for s, h, r in list(zip(test.sources, hypotheses[best], test.targets))[: args.samples]:
        print(f"{s[:45]:<45} | {h[:45]:<45} | {r[:45]}")
    print()
    if decoding is not None:
        print(f"decoding: {decoding.describe()}")
    for name in ("greedy", best):
        r = results[name]
        print(f"test2016 {src}->{tgt} {name:>7}: sacreBLEU {r['bleu']:.2f} (cased, detokenized), "
              f"lowercased {r['bleu_lowercased']:.2f}, chrF {r['chrf']:.2f}  [{r['decode_seconds']} s]")
    if "epochs" in results:
        epochs = results["epochs"]
        print(f"training: {epochs} epoch{'s' if epochs != 1 else ''} over {len(runs)} run(s), "
              f"{results['training_minutes']:.1f} min (resumes included); {results['parameters']:,} parameters")
    if train_seconds is not None:
        print(f"this call's wall time (training) {train_seconds / 60:.1f} min; results in {args.output}/results.json")


def parse_overrides(items):
    """`["dropout=0.1", "share_embeddings=false"]` -> `{"dropout": 0.1, "share_embeddings": False}`, checked."""
    import yaml

    from keras_transformer.runs.config import check_settings

    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set {item!r}: expected KEY=VALUE")
        overrides[key.strip().replace("-", "_")] = yaml.safe_load(value)
    check_settings(overrides)
    return overrides


def tune_on_validation(translator, output, val_src, val_tgt, beam_size, max_pairs=None):
    """Chooses the length penalty on the validation set (never the test set) and keeps it in OUTPUT/decoding.json."""
    from keras_transformer.data.corpus import read_parallel_corpus
    from keras_transformer.decoding.tuning import search_decoding
    from keras_transformer.runs.run import write_decoding_settings

    val = read_parallel_corpus(val_src, val_tgt)
    sources, targets = list(val.sources)[:max_pairs], list(val.targets)[:max_pairs]
    print(f"Choosing the length penalty of beam {beam_size} on {len(sources)} validation pairs", flush=True)

    def translate(texts, beam_size, length_penalty):
        return translator.translate(texts, beam_size=beam_size, batch_size=64, length_penalty=length_penalty)

    def show(row):
        print(f"  length penalty {row['length_penalty']:g}: validation BLEU {row['bleu']:.2f}, chrF {row['chrf']:.2f} "
              f"({row['seconds']:.0f} s)", flush=True)

    search = search_decoding(translate, sources, targets, beam_sizes=[beam_size], on_row=show,
                             tuned_on=f"{os.path.basename(val_src)} / {os.path.basename(val_tgt)}")
    write_decoding_settings(output, search.best)
    return search.best


# Members that fit fewer epochs than this into their share of the minutes are, as an ensemble, no better than one
# model given all the minutes (docs/quality.md has the runs that place the crossover).
SHORT_MEMBER_EPOCHS = 13


def warn_if_members_are_short(member, max_minutes):
    """Prints one line when the first member fit only a few epochs into its minutes (too few for an ensemble)."""
    epochs = training_totals([member]).get("epochs")
    if max_minutes and epochs is not None and epochs < SHORT_MEMBER_EPOCHS:
        plural = "s" if epochs != 1 else ""
        print(f"note: member 0 fit only {epochs} epoch{plural} into {max_minutes:g} minutes on this machine; "
              f"ensembles of members under {SHORT_MEMBER_EPOCHS} epochs scored no better than one model given all "
              "the minutes (docs/quality.md): on a machine this slow, --members 1 is the better recipe", flush=True)


def training_totals(members):
    """Epochs trained and training minutes summed over the runs' histories (so a resumed run counts every part)."""
    from keras_transformer.training.callbacks import load_history

    seconds = [s for member in members for s in load_history(os.path.join(member, "history.json")).get(
        "epoch_seconds", [])]
    if not seconds or any(math.isnan(s) for s in seconds):  # no history, or epochs logged without their time
        return {}
    return {"epochs": len(seconds), "training_minutes": round(sum(seconds) / 60, 1)}

if __name__ == "__main__":
    main()
