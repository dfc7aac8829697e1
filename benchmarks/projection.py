"""On paper: the paper's base model on WMT14 en-de (100k steps of ~25k source + 25k target tokens) on 1, 8, 64 GPUs.

Nothing here is measured on a GPU (no GPU measurement has been made yet): the table is a
model, printed from stated inputs so that anyone can redo it with their own.

* FLOPs per step: `common.seq2seq_training_flops` (matmuls, forward + backward), the count that the CPU
  training-step benchmark (benchmarks/train_step.py) compares with measured step times: there the step ran at 77%
  of the machine's measured dense matmul rate, so the count is close to the work really done.
* Model FLOPs utilization on one GPU: `--mfu` (default 0.30). The paper's own numbers give an anchor: 100k base
  steps in 12 hours on 8 P100s (0.43 s per step; 8 x 9.3 TFLOP/s fp32) is 9.5 TFLOP / 0.43 s = 22 TFLOP/s, 30% of
  their peak.
* Data parallelism (`--distribute mirrored` on one host, `multi-host` across hosts) adds, per step, an all-reduce
  of the fp32 gradients: ring all-reduce moves 2 (n - 1) / n times their size through the slowest link
  (`--nvlink-gbs` inside a host, `--network-gbs` per GPU between hosts), counted here with no overlap with the
  backward pass (a pessimistic bound; XLA overlaps part of it).
* With the global batch fixed (the paper's recipe), each of n GPUs gets 1/n of it, and small per-GPU batches use a
  GPU less well: the MFU is scaled by `min(1, per-GPU tokens / --full-batch-tokens)` ** 0.5 (an assumption: a
  d_model 512 model at 3k tokens per GPU is taken to use an H100 a third as well as at 25k, sqrt(3/25)).

    python benchmarks/projection.py
    python benchmarks/projection.py --peak-tflops 989 --mfu 0.3   # H100 SXM, bf16 dense
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import print_table  # noqa: E402
from common import seq2seq_training_flops  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--tokens-per-step", type=int, default=25_000, help="source tokens per step (as many target)")
    p.add_argument("--sentence-tokens", type=int, default=27, help="mean subword tokens per WMT14 sentence")
    p.add_argument("--vocab", type=int, default=37_000, help="the paper's shared BPE vocabulary")
    p.add_argument("--params", type=float, default=63e6, help="parameters (gradients all-reduced each step)")
    p.add_argument("--peak-tflops", type=float, nargs="+", default=[989.0, 495.0],
                   help="dense peak per GPU: H100 SXM bf16 989, TF32 495")
    p.add_argument("--precision-names", nargs="+", default=["mixed bf16", "fp32 (TF32 matmuls)"])
    p.add_argument("--mfu", type=float, default=0.30, help="model FLOPs utilization on one GPU at the full batch")
    p.add_argument("--full-batch-tokens", type=int, default=25_000)
    p.add_argument("--nvlink-gbs", type=float, default=370.0, help="all-reduce bus bandwidth inside a host, GB/s")
    p.add_argument("--network-gbs", type=float, default=45.0, help="per-GPU network bandwidth between hosts, GB/s")
    p.add_argument("--gpus-per-host", type=int, default=8)
    return p.parse_args(argv)


def project(args, gpus, peak_tflops, weak=False):
    """Per step: FLOPs, tokens per GPU, MFU, compute s, all-reduce s, step s, scaling efficiency, steps."""
    tokens = args.tokens_per_step * (gpus if weak else 1)
    batch = tokens // args.sentence_tokens
    flops = seq2seq_training_flops(batch, args.sentence_tokens, args.sentence_tokens, 512, 2048, 6, 6, args.vocab)
    per_gpu_tokens = tokens / gpus
    mfu = args.mfu * min(1.0, per_gpu_tokens / args.full_batch_tokens) ** 0.5
    compute = flops / gpus / (peak_tflops * 1e12 * mfu)
    communication = 0.0
    if gpus > 1:
        bandwidth = args.nvlink_gbs if gpus <= args.gpus_per_host else args.network_gbs
        communication = 2 * (gpus - 1) / gpus * args.params * 4 / (bandwidth * 1e9)
    step = compute + communication
    single = flops / (peak_tflops * 1e12 * args.mfu)  # the same step's work on one GPU at the full-batch MFU
    steps = args.steps // gpus if weak else args.steps
    return flops, per_gpu_tokens, mfu, compute, communication, step, single / (gpus * step), steps


def main(argv=None):
    args = parse_args(argv)
    titles = {False: f"The paper's recipe: {args.steps:,} steps of {args.tokens_per_step:,} source + as many target "
                     "tokens, the global batch split over the GPUs (strong scaling)",
              True: f"{args.tokens_per_step:,} tokens per GPU, {args.steps:,} / n steps: the same tokens seen, an n "
                    "times larger global batch (weak scaling; the learning rate needs retuning for it)"}
    for weak in (False, True):
        rows = []
        for name, peak in zip(args.precision_names, args.peak_tflops):
            for gpus in (1, 8, 64):
                flops, per_gpu, mfu, compute, communication, step, efficiency, steps = project(args, gpus, peak, weak)
                rows.append([name, gpus, f"{steps:,}", f"{per_gpu:,.0f}", f"{mfu:.0%}", f"{compute * 1e3:.1f}",
                             f"{communication * 1e3:.1f}", f"{step * 1e3:.1f}", f"{efficiency:.0%}",
                             f"{step * steps / 3600:.2f}", f"{2 * per_gpu * gpus / step / 1e6:.2f}"])
        print(titles[weak])
        print_table(["precision", "GPUs", "steps", "tokens/GPU", "MFU", "compute ms", "all-reduce ms", "step ms",
                     "scaling eff.", "hours", "M tokens/s"], rows)
        print()
    base = project(args, 1, args.peak_tflops[0])[0]
    print(f"base model (d 512, 6+6 layers, vocab {args.vocab:,}): {base / 1e12:.2f} TFLOP per step of "
          f"{args.tokens_per_step:,} + {args.tokens_per_step:,} tokens (matmuls, forward + backward)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
