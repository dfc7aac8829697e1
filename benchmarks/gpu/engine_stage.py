"""The GPU kit's continuous-batching stage: a `SlotEngine` of `slots` slots against static batches of `slots` rows.

Both decode the same workload: `sentences_per_slot x slots` sentences whose target lengths follow a fixed
distribution (gamma, mean about 16 tokens, 2 to `engine_length`), sources of about the same length (at most 32
ids: one source bucket). Random weights would never choose to end a sentence, so both decode by sampling with
given random numbers: a temperature of 1000 makes the distribution nearly flat, a number of 0.5 draws a token from
the middle of the vocabulary (never the end, which sits first) and 1e-7 draws `end_id`, placed at each sentence's
length. The engine and the static batches therefore decode the same rows to the same lengths and do the same
model work per row and step (the tokens between may differ where rounding moves the middle of a flat distribution:
`engine_equal_static` counts the rows equal token for token); what differs is only how rows share steps:

- static: sentences sorted by source length, cut into batches of `slots`, each decoded by the XLA-compiled
  whole-loop sampler (`sample_decode`'s compiled function) until its longest row ends;
- engine: every sentence submitted at once to a `SlotEngine(slots=..., steps_per_call=...)` (8 by default, as
  `Translator.translate` uses); a finished row's slot takes the next sentence.

Useful tokens (the sum of the lengths) per second of each, after a first untimed pass that compiles.
"""

import statistics

ENGINE_TEMPERATURE = 1000.0
CONTINUE, END = 0.5, 1e-7
SOURCE_WIDTH = 32


def workload(count, max_length, seed):
    """`(sources, lengths, uniforms)` of `count` sentences: int32 sources (at most `SOURCE_WIDTH` ids, no padding),
    target lengths (`end_id` included) and the float32 `[count, max_length]` numbers that end each at its length."""
    import numpy as np

    rng = np.random.default_rng(seed)
    lengths = np.clip(np.rint(rng.gamma(4.0, 4.0, count)), 2, max_length).astype("int64")
    source_lengths = np.clip(np.rint(lengths * rng.uniform(0.8, 1.25, count)), 2, SOURCE_WIDTH).astype("int64")
    sources = [rng.integers(3, 200, n).astype("int32") for n in source_lengths]
    uniforms = np.full((count, max_length), CONTINUE, "float32")
    uniforms[np.arange(count), lengths - 1] = END
    return sources, lengths, uniforms


def engine_stage(args, models, slots, policy, steps_per_call):
    """The stage function (`run(stage)`, see kit.py) for `slots` slots at `policy`, `steps_per_call` tokens per
    compiled call, on the decoding stages' model (`models`: kit.py's `DecodeModels`)."""

    def run(stage):
        import numpy as np

        from keras_transformer.decoding import RandomSampler
        from keras_transformer.decoding import SlotEngine
        from keras_transformer.decoding import compiled_decoders
        from keras_transformer.decoding.arguments import check_decoding_args
        from keras_transformer.decoding.sampling import sample_with_parts

        model = models.get(policy)
        max_length = args.engine_length
        parts = check_decoding_args(model, max_length, 1, 2)[0]
        count = args.engine_sentences_per_slot * slots
        sources, lengths, uniforms = workload(count, max_length, seed=slots)
        useful = int(lengths.sum())
        order = np.argsort([len(s) for s in sources], kind="stable")
        settings = dict(max_length=max_length, start_id=1, end_id=2, temperature=ENGINE_TEMPERATURE, top_k=None,
                        top_p=None, stop_early=True)
        static_out, static_steps = [None] * count, []

        def static():
            static_steps.clear()
            for begin in range(0, count, slots):
                rows = order[begin: begin + slots]
                batch = np.zeros((slots, SOURCE_WIDTH), "int32")  # a short last batch is padded with empty rows
                numbers = np.full((slots, max_length), END, "float32")
                for j, i in enumerate(rows):
                    batch[j, : len(sources[i])] = sources[i]
                    numbers[j] = uniforms[i]
                batch[len(rows):, 0] = 3  # padding rows: one source id, end at once
                tokens = np.asarray(compiled_decoders.run_compiled(
                    model, parts, sample_with_parts, {"encoder_inputs": batch, "uniforms": numbers}, settings))
                static_steps.append(int(lengths[rows].max()))
                for j, i in enumerate(rows):
                    static_out[i] = tokens[j]

        engine = SlotEngine(model, max_length=max_length, start_id=1, end_id=2, slots=slots,
                            sampler=RandomSampler(temperature=ENGINE_TEMPERATURE), steps_per_call=steps_per_call,
                            source_buckets=(SOURCE_WIDTH,), fixed_weights=True)
        engine_out, calls = [], []

        def continuous():  # what `engine.run` does, counting the engine's calls
            requests = [engine.submit(source, uniforms=numbers) for source, numbers in zip(sources, uniforms)]
            calls.append(0)
            while not engine.idle:
                engine.step()
                calls[-1] += 1
            engine_out[:] = [request.tokens for request in requests]

        repeats = max(1, args.decode_repeats // 2)
        static_compile, static_times = stage.timed(static, 1, repeats)
        engine_compile, engine_times = stage.timed(continuous, 1, repeats)
        ended = [int(np.flatnonzero(row == 2)[0]) + 1 if np.any(row == 2) else -1 for row in static_out]
        seconds, static_seconds = statistics.median(engine_times), statistics.median(static_times)
        return {
            "method": "engine", "precision": policy, "batch": slots, "sentences": count, "tokens": useful,
            "ms": 1000 * seconds, "ms_min": 1000 * min(engine_times), "timed": len(engine_times),
            "compile_s": engine_compile, "tokens_per_s": useful / seconds,
            "static_ms": 1000 * static_seconds, "static_timed": len(static_times), "static_compile_s": static_compile,
            "static_tokens_per_s": useful / static_seconds, "speedup": static_seconds / seconds,
            "static_row_steps": slots * sum(static_steps),
            "lengths_as_planned": int(sum(e == n for e, n in zip(ended, lengths))),
            "engine_equal_static": int(sum(len(a) == len(b) and bool(np.all(a == b[: len(a)]))
                                           for a, b in zip(engine_out, static_out))),
            "engine_lengths_equal": int(sum(len(a) == n for a, n in zip(engine_out, lengths))),
            "steps_per_call": steps_per_call, "engine_calls": calls[-1],
            "ms_per_engine_call": 1000 * seconds / calls[-1],
            "mean_length": useful / count,
        }

    return run


def markdown_rows(stages):
    """The engine-against-static table's lines for the engine stages that ran."""
    done = [s for s in stages if s.get("kind") == "engine" and s.get("status") == "ok" and "speedup" in s]
    if not done:
        return []
    lines = ["", "Continuous batching (`SlotEngine`) against static batches of the same size, the same sentences "
                 "(useful tokens = the sum of their lengths):", "",
             "| precision | slots | steps per call | engine calls | ms per call | sentences | mean length "
             "| useful tokens | static ms | engine ms | static tokens/s | engine tokens/s | engine / static "
             "| lengths as planned (static, engine) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in done:
        lines.append(
            f"| {s['precision']} | {s['batch']} | {s['steps_per_call']} | {s['engine_calls']} | "
            f"{s['ms_per_engine_call']:.2f} | {s['sentences']} | {s['mean_length']:.1f} | {s['tokens']:,} | "
            f"{s['static_ms']:.1f} | {s['ms']:.1f} | {s['static_tokens_per_s']:,.0f} | {s['tokens_per_s']:,.0f} | "
            f"{s['speedup']:.2f}x | {s['lengths_as_planned']}, {s['engine_lengths_equal']} of {s['sentences']} |")
    return lines
