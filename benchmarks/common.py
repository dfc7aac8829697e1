"""Helpers shared by the benchmark scripts: timing, FLOP counting, matmul ceiling, tables, engine processes."""

import json
import subprocess
import time

import numpy as np


def call_times(fn, repeats, warmup=1):
    """Wall times of `repeats` calls of `fn()` after `warmup` untimed calls (seconds)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def measure_matmul_flops(size=2048, repeats=10, dtype="float32"):
    """Achieved FLOP/s of one dense `size`^3 matmul through the Keras backend (the practical ceiling)."""
    import keras
    from keras import ops

    a = ops.convert_to_tensor(np.random.rand(size, size).astype("float32"), dtype=dtype)
    b = ops.convert_to_tensor(np.random.rand(size, size).astype("float32"), dtype=dtype)

    def run():
        out = ops.matmul(a, b)
        ops.convert_to_numpy(ops.cast(out[0, 0], "float32"))  # block until computed (numpy has no bfloat16)

    # The best of the repeats: this is the ceiling the model's step is compared with, and a busy moment
    # during one repeat must not lower it (that would inflate the fraction reported against it).
    seconds = min(call_times(run, repeats))
    del keras
    return 2.0 * size**3 / seconds


def seq2seq_training_flops(batch, src_len, tgt_len, d_model, d_ff, num_encoder_layers, num_decoder_layers, vocab):
    """FLOPs of one training step (forward + backward = 3x forward) counting the matmuls only.

    Forward per layer, per token (2 FLOPs per multiply-add): encoder 4*d^2 (Q, K, V, O) + 2*d*d_ff (FFN)
    + 2*S*d (scores and weighted sum); decoder 4*d^2 self + 2*d^2 cross Q/O per target token,
    2*d^2 cross K/V per source token, 2*d*d_ff FFN, 2*T*d + 2*S*d attention; output d*vocab.
    """
    d = d_model
    enc_per_token = 4 * d * d + 2 * d * d_ff + 2 * src_len * d
    dec_per_token = 4 * d * d + 2 * d * d + 2 * d * d_ff + 2 * tgt_len * d + 2 * src_len * d
    cross_kv_per_src_token = 2 * d * d
    macs = batch * (
        num_encoder_layers * src_len * enc_per_token
        + num_decoder_layers * (tgt_len * dec_per_token + src_len * cross_kv_per_src_token)
        + tgt_len * d * vocab
    )
    return 3 * 2 * macs


def print_table(headers, rows):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = " | ".join(str(h).ljust(w) for h, w in zip(headers, widths))
    print(line)
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(" | ".join(str(c).ljust(w) for c, w in zip(row, widths)))


ROWS = "ROWS "


def print_rows(rows):
    """What an engine process prints for its parent (`engine_rows`): its result rows as one JSON line."""
    print(ROWS + json.dumps(rows), flush=True)


def engine_rows(command):
    """Runs one engine's process (`command`); the rows it printed with `print_rows`, or `None` after printing why
    it failed."""
    process = subprocess.run(command, capture_output=True, text=True)
    line = next((line for line in process.stdout.splitlines() if line.startswith(ROWS)), None)
    if line is None:
        print(f"    failed: {process.stderr.strip().splitlines()[-1] if process.stderr.strip() else '?'}")
        return None
    return json.loads(line[len(ROWS):])
