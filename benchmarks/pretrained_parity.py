"""Parity at OPUS-MT's base size: an imported Marian model against `transformers`' `MarianMTModel`, same weights.

A random-weight Marian checkpoint (`tests.importers.marian_files`; default 6+6 layers, d_model 512, 8 heads, ffn
2048, a ~58,300-token vocabulary) is imported with `import_marian`, and on the Keras backend in use the script
prints, against `MarianMTModel` in float32:

- the largest |logit difference| over 8 sentences x 10 teacher-forced target positions (goal <= 1e-4);
- how many of `--sentences` random sentences get the same greedy tokens (`generate(num_beams=1)` against
  `greedy_decode`), at most `--max-new-tokens` each, no forced end token;
- how many get the same beam-4 tokens (`generate(num_beams=4)`, length penalty 1, its early-stop heuristic, `</s>`
  forced at the last position, against `beam_search(length_penalty_rule="transformers", force_end=True)`).

Usage:
    python benchmarks/pretrained_parity.py                        # base size, TensorFlow
    KERAS_BACKEND=jax python benchmarks/pretrained_parity.py
    python benchmarks/pretrained_parity.py --layers 1 --d-model 32 --heads 2 --ffn 64 --extra-tokens 0 --sentences 8
"""

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--ffn", type=int, default=2048)
    parser.add_argument("--extra-tokens", type=int, default=58_101,
                        help="filler tokens added to vocab.json (default: an OPUS-MT-sized vocabulary)")
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    args = parser.parse_args(argv)

    import torch
    from keras import backend
    from keras import ops
    from transformers import MarianTokenizer
    from transformers.utils import logging as transformers_logging

    from keras_transformer import load_run
    from keras_transformer.decoding import beam_search
    from keras_transformer.decoding import greedy_decode
    from keras_transformer.importers import import_marian
    from tests.importers.marian_files import WORDS
    from tests.importers.marian_files import make_marian_checkpoint
    from tests.importers.marian_files import positions_are_marians
    from tests.importers.marian_files import sentences

    transformers_logging.set_verbosity_error()
    with tempfile.TemporaryDirectory(prefix="kt-parity-") as work:
        print(f"Writing a random-weight Marian checkpoint ({args.layers}+{args.layers} layers, d_model "
              f"{args.d_model}) and importing it ...", flush=True)
        model, config = make_marian_checkpoint(os.path.join(work, "checkpoint"), d_model=args.d_model,
                                               layers=args.layers, heads=args.heads, ffn=args.ffn,
                                               extra_tokens=args.extra_tokens, max_positions=512, scale=0.05)
        import_marian(os.path.join(work, "checkpoint"), os.path.join(work, "run"), verbose=0)
        run = load_run(os.path.join(work, "run"))
        tokenizer = MarianTokenizer.from_pretrained(os.path.join(work, "checkpoint"))
        target = run.target_tokenizer

        def ours(batch):
            ids = run.source_tokenizer.ids_from_original[batch["input_ids"].numpy()]
            return (ids * batch["attention_mask"].numpy()).astype("int32")

        batch = tokenizer(sentences(WORDS, 8, seed=3), return_tensors="pt", padding=True)
        rng = np.random.default_rng(0)
        decoder = np.concatenate([np.full((8, 1), config.decoder_start_token_id),
                                  rng.integers(2, config.vocab_size - 1, (8, 9))], axis=1)
        with torch.no_grad():
            expected = model(**batch, decoder_input_ids=torch.tensor(decoder)).logits.numpy()
        decoder_ours = target.ids_from_original[decoder]
        decoder_ours[:, 0] = target.start_id
        logits = ops.convert_to_numpy(run.model({"encoder_inputs": ours(batch), "decoder_inputs": decoder_ours}))
        difference = float(np.abs(logits[..., target.ids_from_original] - expected).max())

        texts = sentences(WORDS, args.sentences, seed=7)
        batch = tokenizer(texts, return_tensors="pt", padding=True)
        source = ours(batch)
        pad, n = config.pad_token_id, args.max_new_tokens

        def equal(tokens, reference):
            tokens = ops.convert_to_numpy(tokens)
            return sum([int(t) for t in target.original_ids[row[row != 0]]] == [int(t) for t in ref if t != pad]
                       for row, ref in zip(tokens, reference))

        with torch.no_grad():
            greedy_ref = model.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=n,
                                        forced_eos_token_id=None).numpy()[:, 1:]
            beam_ref = model.generate(**batch, num_beams=4, do_sample=False, max_new_tokens=n, length_penalty=1.0,
                                      early_stopping=False).numpy()[:, 1:]
        greedy = equal(greedy_decode(run.model, source, n, target.start_id, target.end_id, jit_compile=True),
                       greedy_ref)
        beam = equal(beam_search(run.model, source, n, target.start_id, target.end_id, beam_size=4,
                                 length_penalty=1.0, length_penalty_rule="transformers", force_end=True,
                                 jit_compile=True), beam_ref)

    print(f"Keras backend {backend.backend()}; Marian {args.layers}+{args.layers} layers, d_model {args.d_model}, "
          f"vocabulary {config.vocab_size:,}; the reference's position table follows Marian's formula: "
          f"{positions_are_marians(model)}")
    print(f"max |logit difference| (8 sentences x 10 positions): {difference:.2e} "
          f"({'PASS' if difference <= 1e-4 else 'FAIL'}, goal <= 1e-4; largest |logit| {np.abs(expected).max():.2f})")
    print(f"greedy tokens equal: {greedy}/{len(texts)}; beam-4 tokens equal: {beam}/{len(texts)} "
          f"(at most {n} new tokens)")
    return 0 if difference <= 1e-4 and greedy == beam == len(texts) else 1


if __name__ == "__main__":
    sys.exit(main())
