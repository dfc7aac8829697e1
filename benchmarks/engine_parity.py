"""Check at volume: continuous batching (`SlotEngine`) decodes the tokens the whole-loop decoders decode.

A run's model and tokenizers, `--sentences` source sentences of mixed lengths submitted to the engine at random
steps (a sentence joins whatever is running), against:

* `greedy`: `greedy_decode` over all the sentences at once;
* `sampling`: `sample_decode(top_p=0.9, seed=7)`, the engine given each row's random numbers (`draw_uniforms`);
* `prefix`: `greedy_search(prefix=...)` with a forced target prefix of 1 to 3 tokens per sentence;
* `beam`: `beam_search` (`--beam-size`, `--length-penalty`) against a `BeamSlotEngine` of `--slots / --beam-size`
  sentences;
* `alone`: the first `--alone` sentences decoded one at a time (batch 1) against the engine's rows, which were
  decoded beside others and inserted mid-run.

It prints one row per check (sentences whose tokens are equal), for each sampled row that differs the float32
margin where it does (a tie at the top-p cut or the draw, see `sampling_margins`), and exits 1 if any differs. It
runs on the backend `KERAS_BACKEND` names (TensorFlow, JAX, PyTorch).

Usage:
    python benchmarks/engine_parity.py RUN --src test_2016_flickr.de.gz
    KERAS_BACKEND=jax python benchmarks/engine_parity.py RUN --src test_2016_flickr.de.gz --sentences 200
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import print_table  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a training run directory (or anything `load_translator` loads as a run)")
    parser.add_argument("--src", required=True, help="source sentences, one per line (.gz accepted)")
    parser.add_argument("--sentences", type=int, default=200, help="how many sentences (spread over the file)")
    parser.add_argument("--slots", type=int, default=16, help="the engine's slots")
    parser.add_argument("--steps-per-call", type=int, default=4, help="the engine's tokens per compiled call")
    parser.add_argument("--beam-size", type=int, default=4, help="beams of the beam-search check (its engine has "
                        "slots / beams sentences)")
    parser.add_argument("--length-penalty", type=float, default=0.6, help="the beam-search check's length penalty")
    parser.add_argument("--alone", type=int, default=20, help="sentences also decoded one at a time")
    parser.add_argument("--seed", type=int, default=0, help="seed of the arrival steps")
    return parser.parse_args(argv)


def trimmed(row):
    """A whole-loop output row without its trailing padding (the engine returns rows unpadded)."""
    import numpy as np

    row = np.asarray(row)
    nonzero = np.flatnonzero(row)
    return row[: nonzero[-1] + 1] if nonzero.size else row[:0]


def count_equal(expected, outputs):
    import numpy as np

    return sum(np.array_equal(trimmed(e), np.asarray(o)) for e, o in zip(expected, outputs))


def sampling_margins(model, source, expected, got, uniforms, start, top_p):
    """Where a sampled row differs: `(position, margin)`, the first differing position and the smallest float32
    margin there (float64 arithmetic on the model's logits, teacher-forced on the common prefix) between a kept
    token's preceding mass and the top-p cut, or between a cumulative mass and the draw's threshold: a margin near
    float32's resolution (1e-6) means the two orders of summation may fall on either side."""
    import numpy as np
    from keras import ops

    expected, got = trimmed(expected), np.asarray(got)
    t = next(i for i in range(min(len(expected), len(got)) + 1)
             if i == len(expected) or i == len(got) or expected[i] != got[i])
    decoder = np.concatenate([[start], expected[:t]]).astype("int32")[None]
    logits = ops.convert_to_numpy(model({"encoder_inputs": trimmed(source)[None], "decoder_inputs": decoder}))
    logits = np.asarray(logits[0, -1], "float64")
    logits[0] = logits[start] = -np.inf
    probs = np.sort(np.exp(logits - logits.max()))[::-1]
    probs /= probs.sum()
    before = np.cumsum(probs) - probs
    kept = probs[before < top_p]
    cut = np.min(np.abs(before[: kept.size + 1] - top_p))
    draw = np.min(np.abs(np.cumsum(kept) - uniforms[t] * kept.sum()))
    return t, min(cut, draw)


def main(argv=None):
    args = parse_args(argv)
    import keras
    import numpy as np
    from keras import ops
    from serve import read_sentences

    from keras_transformer import load_translator
    from keras_transformer.decoding import BeamSampler
    from keras_transformer.decoding import BeamSlotEngine
    from keras_transformer.decoding import SlotEngine
    from keras_transformer.decoding import TopPSampler
    from keras_transformer.decoding import beam_search
    from keras_transformer.decoding import greedy_decode
    from keras_transformer.decoding import greedy_search
    from keras_transformer.decoding import sample_decode
    from keras_transformer.decoding.sampling import draw_uniforms
    from keras_transformer.decoding.translator import pad_source_rows
    from keras_transformer.decoding.translator import tokenize_rows

    lines = read_sentences(args.src)
    texts = [lines[i * len(lines) // args.sentences] for i in range(args.sentences)]
    translator = load_translator(args.run_dir)
    model, source, target = translator.model, translator.source_tokenizer, translator.target_tokenizer
    src = pad_source_rows(tokenize_rows(source, texts), source, translator.parts.max_length)
    max_length, start, end = translator.max_length, target.start_id, target.end_id
    rng = np.random.default_rng(args.seed)
    arrivals = rng.integers(0, 3 * max_length, len(src))  # the engine's step before which each one arrives
    width = max(int(np.count_nonzero(row)) for row in src)
    print(f"{len(src)} sentences ({min(np.count_nonzero(src, axis=1))}-{width} source tokens), backend "
          f"{keras.backend.backend()}, {args.slots} slots, up to {args.steps_per_call} tokens per call, arrivals at "
          f"random steps 0-{3 * max_length - 1}", flush=True)

    def engine(**options):
        return SlotEngine(model, max_length, start, end, slots=args.slots, steps_per_call=args.steps_per_call,
                          **options)

    rows = []

    def check(name, expected, outputs, seconds):
        same = count_equal(expected, outputs)
        rows.append((name, f"{same}/{len(expected)}", f"{seconds:.1f}"))
        print(f"{name}: {same}/{len(expected)} equal", flush=True)
        return same == len(expected)

    begin = time.perf_counter()
    greedy = np.asarray(ops.convert_to_numpy(greedy_decode(model, src, max_length, start, end)))
    outputs = engine().run(src, arrivals=arrivals)
    ok = check("greedy", greedy, outputs, time.perf_counter() - begin)

    begin = time.perf_counter()
    sampled = np.asarray(ops.convert_to_numpy(sample_decode(model, src, max_length, start, end, top_p=0.9, seed=7)))
    uniforms = np.asarray(ops.convert_to_numpy(draw_uniforms(len(src), max_length, 7)))
    outputs = engine(sampler=TopPSampler(p=0.9)).run(src, uniforms=uniforms, arrivals=arrivals)
    ok &= check("sampling (top-p 0.9, seeded)", sampled, outputs, time.perf_counter() - begin)
    for i in [i for i in range(len(src)) if not np.array_equal(trimmed(sampled[i]), np.asarray(outputs[i]))]:
        t, margin = sampling_margins(model, src[i], sampled[i], outputs[i], uniforms[i], start, 0.9)
        print(f"  sampled row {i} differs from token {t + 1}: float32 margin there {margin:.1e}", flush=True)

    begin = time.perf_counter()
    prefixes = [greedy[i][: 1 + i % 3] for i in range(len(src))]
    rng.shuffle(prefixes)  # another sentence's first tokens: forced, not what the model would choose
    padded = np.zeros((len(src), 3), "int32")
    for i, prefix in enumerate(prefixes):
        prefixes[i] = np.asarray([t for t in prefix if t != end] or [greedy[0][0]], "int32")
        padded[i, : prefixes[i].size] = prefixes[i]
    forced = np.asarray(ops.convert_to_numpy(greedy_search(translator.parts, src, max_length, start, end,
                                                           prefix=ops.convert_to_tensor(padded))))
    outputs = engine().run(src, prefixes=prefixes, arrivals=arrivals)
    ok &= check("forced prefix (1-3 tokens)", forced, outputs, time.perf_counter() - begin)

    begin = time.perf_counter()
    sampler = BeamSampler(args.beam_size, args.length_penalty)
    searched = np.asarray(ops.convert_to_numpy(beam_search(model, src, max_length, start, end, beam_size=args.beam_size,
                                                           length_penalty=args.length_penalty)))
    beams = BeamSlotEngine(model, max_length, start, end, slots=max(1, args.slots // args.beam_size),
                           steps_per_call=args.steps_per_call, sampler=sampler)
    ok &= check(f"beam search ({args.beam_size} beams)", searched, beams.run(src, arrivals=arrivals),
                time.perf_counter() - begin)

    begin = time.perf_counter()
    alone = [np.asarray(ops.convert_to_numpy(greedy_decode(model, src[i: i + 1, : max(1, np.count_nonzero(src[i]))],
                                                           max_length, start, end)))[0]
             for i in range(min(args.alone, len(src)))]
    ok &= check("alone (batch 1) vs the engine's rows", alone, engine().run(src, arrivals=arrivals)[: len(alone)],
                time.perf_counter() - begin)

    print()
    print_table(["check", "equal", "seconds"], rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
