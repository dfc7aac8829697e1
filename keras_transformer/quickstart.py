"""`keras-transformer quickstart`: the main job on embedded data, no download.

Generates a synthetic translation task (spelled-out English dates in several surface forms ->
ISO dates, e.g. "the twenty-third of November, two thousand and twenty-six" -> "2026-11-23":
the model must reorder day, month and year and turn words into digits), trains tokenizers and
a small Transformer, reports exact match on held-out pairs never seen in training, and saves
the run under `saved_models/quickstart/`.
"""

import time

QUICKSTART_SETTINGS = {
    "num_layers": 2,
    "d_model": 128,
    "num_heads": 4,
    "d_ff": 256,
    "dropout": 0.1,
    "max_length": 32,
    "epochs": 3,
    "batch_size": 64,
    "vocab_size": 400,
    "warmup_steps": 1000,
    "lr_scale": 1.0,
    "clipnorm": 1.0,
    "label_smoothing": 0.1,
}


def exact_match(hypotheses, references):
    pairs = list(zip(hypotheses, references))
    return sum(h.strip() == r.strip() for h, r in pairs) / max(len(pairs), 1)


def run_quickstart(output_dir="saved_models/quickstart", settings=None, num_train=None, num_heldout=None,
                   verbose=None, show=8, overwrite=False):
    """Train on the synthetic date corpus and report held-out exact match. Returns `(run, exact_match)`.

    A finished run in `output_dir` is refused unless `overwrite` (see `train`); an interrupted one resumes.
    """
    import sys

    from keras_transformer.data.synthetic import make_synthetic_splits
    from keras_transformer.runs.config import check_settings
    from keras_transformer.training.trainer import train
    from keras_transformer.translators import load_translator

    if verbose is None:
        verbose = 1 if sys.stdout.isatty() else 2
    all_settings = dict(QUICKSTART_SETTINGS)
    all_settings.update(settings or {})
    model_settings, training_settings = check_settings(all_settings)
    start = time.time()
    train_corpus, heldout = make_synthetic_splits(num_train or 20000, num_heldout or 1000, seed=0)
    # Validation loss is watched on part of the held-out pairs (it picks nothing; no early stopping).
    validation = heldout.split(min(200, len(heldout)), seed=1)[1]
    run = train(train_corpus, output_dir, val_data=validation, model_settings=model_settings,
                training_settings=training_settings, verbose=verbose, overwrite=overwrite)
    translator = load_translator(output_dir)
    hypotheses = translator.translate(list(heldout.sources), batch_size=128)
    score = exact_match(hypotheses, heldout.targets)
    if verbose:
        print()
        for source, hypothesis, reference in list(zip(heldout.sources, hypotheses, heldout.targets))[:show]:
            mark = "ok " if hypothesis == reference else "BAD"
            print(f"  {mark} {source!r:70} -> {hypothesis!r}  (reference {reference!r})")
        print(f"\nHeld-out exact match: {100 * score:.1f}% of {len(hypotheses)} pairs never seen in training; "
              f"total time {time.time() - start:.0f} s; model and tokenizers in {output_dir}/")
    return run, score
