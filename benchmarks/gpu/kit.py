"""GPU benchmark kit: training-step speed, MFU, decoding speed and memory of the base Transformer on JAX.

One run measures, each stage on its own (a failing stage is recorded and the next one runs):

- the dense matmul rate through Keras in float32 and bfloat16 (the practical ceiling);
- training steps (Adam, XLA-compiled `train_on_batch`) of the paper's base model (6+6 layers, d_model 512,
  8 heads, d_ff 2048, vocab 32000) on batches of 1000 x 25 = 25,000 target tokens, in float32 and in
  `mixed_bfloat16`: step ms, target tokens/s, achieved TFLOP/s and MFU against a stated peak;
- the same model built from keras-hub's layers, when `keras_hub` imports;
- greedy and beam-4 decoding (XLA-compiled, fixed length) at batch 1, 8 and 64: tokens/s;
- continuous batching: a `SlotEngine` of 64 and 256 slots against static batches of the same size on the same
  sentences (`engine_stage.py`): useful tokens/s of each;
- peak device memory (JAX's `memory_stats()`), the device's name, and the versions.

It writes one JSON file and one markdown table (`--out`), rewritten after every stage, so a run cut short
still leaves what it measured. A total wall-clock budget (`--budget`) bounds the run: each stage gets a share of
what is left, stops its timed steps once that share is spent (after a minimum), and stages that no longer fit
are skipped; a watchdog writes the results and ends the process if a single call outruns the budget.

    KERAS_BACKEND=jax python benchmarks/gpu/kit.py             # full size, on a GPU
    KERAS_BACKEND=jax python benchmarks/gpu/kit.py --tiny      # tiny sizes: a check that runs on a CPU
"""

import argparse
import datetime
import gc
import json
import math
import os
import platform
import statistics
import sys
import threading
import time
import traceback

os.environ["KERAS_BACKEND"] = "jax"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHMARKS = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCHMARKS)
for path in (ROOT, BENCHMARKS, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

from engine_stage import SOURCE_WIDTH  # noqa: E402 - after the path set-up
from engine_stage import engine_stage  # noqa: E402
from engine_stage import markdown_rows  # noqa: E402

JSON_NAME = "gpu_kit.json"
MARKDOWN_NAME = "gpu_kit.md"

# H200 SXM specification, dense (no sparsity): BF16 tensor cores 989.5 TFLOP/s, TF32 tensor cores 494.7 TFLOP/s
# (plain FP32 on CUDA cores: 67 TFLOP/s). XLA lets float32 dots use TF32 on NVIDIA GPUs from Ampere on by default;
# the measured float32 matmul rate in the same run shows which one ran.
PEAK_BF16_TFLOPS = 989.5
PEAK_FP32_TFLOPS = 494.7

FULL = dict(vocab=32000, layers=6, d_model=512, heads=8, d_ff=2048, batch=1000, src_len=25, tgt_len=25,
            warmup=3, steps=10, decode_batches="1,8,64", decode_length=32, decode_repeats=5, matmul_size=8192,
            matmul_repeats=10, engine_slots="64,256", engine_length=64, engine_sentences_per_slot=4)
TINY = dict(vocab=200, layers=2, d_model=32, heads=2, d_ff=64, batch=8, src_len=10, tgt_len=10,
            warmup=1, steps=2, decode_batches="1,8,64", decode_length=8, decode_repeats=2, matmul_size=256,
            matmul_repeats=3, engine_slots="4,16", engine_length=16, engine_sentences_per_slot=2)
MIN_TIMED = 3  # timed steps/calls taken even past a stage's share of the budget (when --steps allows)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(HERE, "out"),
                        help=f"folder for {JSON_NAME} and {MARKDOWN_NAME} (default: benchmarks/gpu/out)")
    parser.add_argument("--tiny", action="store_true",
                        help="tiny sizes (2+2 layers, d_model 32, vocab 200, batch 8): runs on a CPU in under a minute")
    parser.add_argument("--budget", type=float, default=420.0,
                        help="total wall-clock seconds, compiles included (default 420)")
    parser.add_argument("--peak-bf16-tflops", type=float, default=PEAK_BF16_TFLOPS,
                        help="peak the bfloat16 MFU is measured against (default: H200 dense BF16, 989.5)")
    parser.add_argument("--peak-fp32-tflops", type=float, default=PEAK_FP32_TFLOPS,
                        help="peak the float32 MFU is measured against (default: H200 dense TF32, 494.7; "
                             "67 for plain FP32)")
    parser.add_argument("--forbid-tensorflow", action="store_true",
                        help="make `import tensorflow` fail in this process (proves the kit needs no TensorFlow)")
    parser.add_argument("--only", default=None,
                        help="comma-separated stage kinds to run (matmul, engine, train, decode); default all")
    parser.add_argument("--engine-steps-per-call", default="8",
                        help="comma-separated SlotEngine steps_per_call values, an engine stage per value and slots")
    parser.add_argument("--skip-keras-hub", action="store_true", help="leave out keras-hub's model")
    parser.add_argument("--train-policies", default="float32,mixed_bfloat16")
    parser.add_argument("--decode-policies", default=None,
                        help="default mixed_bfloat16,float32 (mixed_bfloat16 with --tiny)")
    for name, value in FULL.items():
        kind = str if isinstance(value, str) else int
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=None,
                            help=f"default {value} ({TINY[name]} with --tiny)")
    args = parser.parse_args(argv)
    sizes = TINY if args.tiny else FULL
    for name, value in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.decode_policies is None:
        args.decode_policies = "mixed_bfloat16" if args.tiny else "mixed_bfloat16,float32"
    args.decode_batches = [int(b) for b in str(args.decode_batches).split(",") if b]
    args.engine_slots = [int(b) for b in str(args.engine_slots).split(",") if b]
    args.engine_steps_per_call = [int(b) for b in str(args.engine_steps_per_call).split(",") if b]
    args.only = [kind for kind in (args.only or "").split(",") if kind]
    args.train_policies = [p for p in args.train_policies.split(",") if p]
    args.decode_policies = [p for p in args.decode_policies.split(",") if p]
    # what benchmarks/train_step.py's builders read
    args.dropout = 0.1
    args.activation_dropout = 0.0
    return args


class Results:
    """Everything the run measured; written as JSON and markdown after every stage (and by the watchdog)."""

    def __init__(self, args):
        self.args = args
        self.lock = threading.RLock()
        self.start = time.perf_counter()
        self.data = {
            "kit": "keras-transformer GPU benchmark kit",
            "schema": 1,
            "started_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "tiny": bool(args.tiny),
            "budget_s": args.budget,
            "environment": {},
            "config": {},
            "peaks": {},
            "stages": [],
            "peak_memory_bytes": None,
            "wall_s": None,
            "finished": False,
        }
        self.current = None  # the record of the stage running now
        self.pending = []  # the first fields of the stages not started yet

    def elapsed(self):
        return time.perf_counter() - self.start

    def add(self, record):
        with self.lock:
            self.data["stages"].append(record)
            self.write()

    def write(self):
        with self.lock:
            self.data["wall_s"] = round(self.elapsed(), 2)
            os.makedirs(self.args.out, exist_ok=True)
            for name, text in ((JSON_NAME, json.dumps(finite(self.data), indent=2, default=str) + "\n"),
                               (MARKDOWN_NAME, markdown(self.data))):
                path = os.path.join(self.args.out, name)
                with open(path + ".tmp", "w") as f:
                    f.write(text)
                os.replace(path + ".tmp", path)


def finite(value):
    """`value` with NaN and infinities as None (JSON has neither)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def log(results, line):
    print(f"[kit {results.elapsed():6.1f}s] {line}", flush=True)


def fmt(value, spec, missing="n/a"):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return missing
    return format(value, spec)


def markdown(data):
    env, config, peaks = data["environment"], data["config"], data["peaks"]
    lines = [
        "# keras-transformer GPU benchmark kit",
        "",
        f"device: {env.get('device_kind', '?')} ({env.get('platform', '?')}), jax {env.get('jax_version', '?')}, "
        f"keras {env.get('keras_version', '?')}, keras-hub {env.get('keras_hub_version') or 'n/a'}, "
        f"python {env.get('python_version', '?')}; TensorFlow loaded: {env.get('tensorflow_loaded', '?')}",
    ]
    if config:
        lines.append(
            f"model: {config['num_layers']}+{config['num_layers']} layers, d_model {config['d_model']}, "
            f"{config['num_heads']} heads, d_ff {config['d_ff']}, vocab {config['vocab']}; training batch "
            f"{config['batch']} x {config['src_len']} source / {config['tgt_len']} target tokens = "
            f"{config['target_tokens_per_batch']:,} target tokens; {config['warmup_steps']} warm-up + "
            f"{config['timed_steps']} timed steps (median); decoding {config['decode_length']} steps per call, "
            f"source length {config['src_len']}"
        )
    if peaks:
        lines.append(f"MFU against {peaks['bfloat16_tflops']} TFLOP/s (bfloat16) and {peaks['float32_tflops']} "
                     f"TFLOP/s (float32): {peaks['basis']}")
    if env.get("keras_hub_status", "imported") != "imported":
        lines.append(f"keras-hub: {env['keras_hub_status']}")
    memory = gib(data["peak_memory_bytes"])
    lines.append(f"peak device memory: {'n/a' if memory is None else f'{memory:.2f} GiB'}; wall time "
                 f"{fmt(data['wall_s'], '.0f')} s of a {data['budget_s']:.0f} s budget"
                 + ("" if data["finished"] else " (not finished)"))
    lines += ["", "| stage | precision | batch | tokens/call | ms | tokens/s | TFLOP/s | MFU | of matmul rate "
                  "| peak GiB so far | status |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in data["stages"]:
        status = s["status"] if not s.get("error") else f"{s['status']}: {one_line(s['error'])}"
        if s.get("cut_short"):
            status += f" (cut short: {s.get('timed')} timed)"
        lines.append("| " + " | ".join([
            s["name"], s.get("precision", ""), fmt(s.get("batch"), "d", ""), fmt(s.get("tokens"), ",d", ""),
            fmt(s.get("ms"), ".2f", ""), fmt(s.get("tokens_per_s"), ",.0f", ""), sig(s.get("tflops")),
            sig(pct(s.get("mfu")), "%"), sig(pct(s.get("of_matmul_rate")), "%"),
            fmt(gib(s.get("peak_memory_bytes")), ".2f"), status.replace("|", "/"),
        ]) + " |")
    lines += markdown_rows(data["stages"])
    return "\n".join(lines) + "\n"


def sig(x, unit=""):
    """Three significant digits (no exponent from 100 up): 312, 45.3, 0.00347."""
    if x is None or not math.isfinite(x):
        return ""
    return (f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}") + unit


def one_line(text, limit=160):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def pct(x):
    return None if x is None else 100.0 * x


def gib(x):
    return None if x is None else x / 2**30


def memory_stats():
    import jax

    try:
        stats = jax.devices()[0].memory_stats()
    except Exception:  # some platforms raise instead of returning None
        return None
    return stats or None


def peak_memory():
    stats = memory_stats()
    return None if stats is None else stats.get("peak_bytes_in_use")


def environment(args):
    import jax
    import keras
    import numpy as np

    import keras_transformer

    device = jax.devices()[0]
    env = {
        "device_kind": device.device_kind,
        "platform": device.platform,
        "device_count": jax.device_count(),
        "jax_version": jax.__version__,
        "jaxlib_version": getattr(__import__("jaxlib"), "__version__", None),
        "keras_version": keras.__version__,
        "keras_backend": keras.backend.backend(),
        "keras_transformer_version": keras_transformer.__version__,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "memory_stats_available": memory_stats() is not None,
        "tensorflow_forbidden": bool(args.forbid_tensorflow),
    }
    if args.skip_keras_hub:
        env["keras_hub_version"], env["keras_hub_status"] = None, "left out (--skip-keras-hub)"
    else:
        try:
            import keras_hub

            env["keras_hub_version"], env["keras_hub_status"] = keras_hub.__version__, "imported"
        except Exception as error:  # noqa: BLE001 - any failure to import means: no keras-hub column
            env["keras_hub_version"] = None
            env["keras_hub_status"] = f"not importable: {type(error).__name__}: {error}"
    env["tensorflow_loaded"] = tensorflow_loaded()
    return env


def tensorflow_loaded():
    return sys.modules.get("tensorflow") is not None


class Stage:
    """The budget of one stage: a soft deadline for its timed steps."""

    def __init__(self, share):
        self.share = share
        self.deadline = time.perf_counter() + share
        self.cut_short = False

    def timed(self, fn, warmup, repeats):
        """`warmup` untimed calls (the first one traces and compiles, its time is returned; past the deadline only
        two are made), then up to `repeats` timed calls, which get at least a fifth of the stage's share even when
        the compile spent it: past that only the first `MIN_TIMED` are taken."""
        start = time.perf_counter()
        fn()
        compile_s = time.perf_counter() - start
        for i in range(1, warmup):
            if i >= 2 and time.perf_counter() > self.deadline:
                break
            fn()
        deadline = max(self.deadline, time.perf_counter() + 0.2 * self.share)
        times = []
        for i in range(repeats):
            if i >= min(MIN_TIMED, repeats) and time.perf_counter() > deadline:
                self.cut_short = True
                break
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return compile_s, times


def free_memory():
    """Drops the device buffers of models no longer referenced (their variables and optimizer state)."""
    gc.collect()


def set_policy(policy):
    import keras

    keras.config.set_dtype_policy(policy)


def matmul_stage(args, dtype):
    def run(stage):
        from common import measure_matmul_flops

        flops = measure_matmul_flops(size=args.matmul_size, repeats=args.matmul_repeats, dtype=dtype)
        return {"tflops": flops / 1e12, "matmul_size": args.matmul_size}

    return run


def train_batch(args):
    import jax
    import numpy as np

    rng = np.random.default_rng(0)
    inputs = {
        "encoder_inputs": rng.integers(1, args.vocab, (args.batch, args.src_len)).astype("int32"),
        "decoder_inputs": rng.integers(1, args.vocab, (args.batch, args.tgt_len)).astype("int32"),
    }
    labels = rng.integers(1, args.vocab, (args.batch, args.tgt_len)).astype("int32")
    return jax.device_put(inputs), jax.device_put(labels)


def train_stage(args, implementation, policy, matmul_rates):
    def run(stage):
        import keras
        from common import seq2seq_training_flops
        from train_step import build_keras_hub
        from train_step import build_ours

        build = {"keras_transformer": build_ours, "keras-hub": build_keras_hub}[implementation]
        set_policy(policy)
        try:
            keras.utils.set_random_seed(0)
            model = build(args)
            model.compile(
                optimizer=keras.optimizers.Adam(1e-4, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                jit_compile=True,
            )
            inputs, labels = train_batch(args)
            losses = []

            def step():
                losses.append(float(model.train_on_batch(inputs, labels)))  # a Python float: waits for the step

            compile_s, times = stage.timed(step, args.warmup, args.steps)
            params = model.count_params()
        finally:
            set_policy("float32")
        seconds = statistics.median(times)
        flops = seq2seq_training_flops(args.batch, args.src_len, args.tgt_len, args.d_model, args.d_ff,
                                       args.layers, args.layers, args.vocab)
        achieved = flops / seconds
        peak = (args.peak_bf16_tflops if policy == "mixed_bfloat16" else args.peak_fp32_tflops) * 1e12
        matmul = matmul_rates.get("bfloat16" if policy == "mixed_bfloat16" else "float32")
        tokens = args.batch * args.tgt_len
        return {
            "implementation": implementation, "precision": policy, "batch": args.batch,
            "tokens": tokens, "ms": 1000 * seconds, "ms_min": 1000 * min(times), "timed": len(times),
            "compile_s": compile_s, "tokens_per_s": tokens / seconds, "tflop_per_step": flops / 1e12,
            "tflops": achieved / 1e12, "mfu": achieved / peak,
            "of_matmul_rate": None if not matmul else achieved / matmul, "params": params,
            "final_loss": losses[-1] if losses else None, "loss_finite": all(math.isfinite(v) for v in losses),
        }

    return run


class DecodeModels:
    """One model per precision for the decoding and engine stages, built on first use."""

    def __init__(self, args):
        self.args = args
        self.models = {}

    def get(self, policy):
        if policy not in self.models:
            import keras

            from keras_transformer import build_transformer

            free_memory()
            self.models.clear()
            set_policy(policy)
            try:
                keras.utils.set_random_seed(0)
                a = self.args
                self.models[policy] = build_transformer(
                    a.vocab, a.vocab, num_layers=a.layers, d_model=a.d_model, num_heads=a.heads, d_ff=a.d_ff,
                    dropout=a.dropout, max_length=max(a.src_len, a.decode_length, a.engine_length, SOURCE_WIDTH) + 8,
                )
            finally:
                set_policy("float32")
        return self.models[policy]


def decode_stage(args, models, method, batch, policy):
    def run(stage):
        import numpy as np

        from keras_transformer.decoding import beam_search
        from keras_transformer.decoding import greedy_decode

        model = models.get(policy)
        rng = np.random.default_rng(batch)
        source = rng.integers(3, args.vocab, (batch, args.src_len)).astype("int32")
        shapes = []
        if method == "greedy":
            def call():
                out = greedy_decode(model, source, args.decode_length, start_id=1, end_id=2, stop_early=False,
                                    jit_compile=True)
                shapes.append(np.asarray(out).shape)  # np.asarray waits for the result
        else:
            def call():
                out = beam_search(model, source, args.decode_length, start_id=1, end_id=2, beam_size=4,
                                  stop_early=False, jit_compile=True)
                shapes.append(np.asarray(out).shape)

        compile_s, times = stage.timed(call, 1, args.decode_repeats)
        seconds = statistics.median(times)
        tokens = batch * args.decode_length  # stop_early=False: every call runs decode_length steps
        return {
            "method": method, "beam_size": 4 if method == "beam" else 1, "precision": policy, "batch": batch,
            "steps": args.decode_length, "tokens": tokens, "ms": 1000 * seconds, "ms_min": 1000 * min(times),
            "timed": len(times), "compile_s": compile_s, "tokens_per_s": tokens / seconds,
            "output_shape": list(shapes[-1]),
        }

    return run


def plan(args, env, matmul_rates, decode_models):
    """(record, weight, function) of every stage, in order: the record's first fields; weights split the budget."""

    def record(name, kind, precision, batch=None, **fields):
        label = name.split(" ", 1)[1].replace(" ", "_")
        stage_id = f"{kind}/{label}/{precision}" + ("" if batch is None else f"/b{batch}")
        return dict(id=stage_id, name=name, kind=kind, precision=precision, batch=batch, **fields)

    stages = [(record(f"matmul {args.matmul_size}^3", "matmul", dtype), 0.5, matmul_stage(args, dtype))
              for dtype in ("float32", "bfloat16")]
    for steps_per_call in args.engine_steps_per_call:  # early: the stages most likely to be cut short are the older
        for slots in args.engine_slots:
            name = "engine continuous" + ("" if steps_per_call == 8 else f" k{steps_per_call}")
            stages.append((record(name, "engine", args.decode_policies[0], slots),
                           4.0, engine_stage(args, decode_models, slots, args.decode_policies[0], steps_per_call)))
    implementations = ["keras_transformer"]
    hub_missing = env["keras_hub_status"] != "imported"
    if not hub_missing:
        implementations.append("keras-hub")
    for implementation in implementations:
        for policy in args.train_policies:
            stages.append((record(f"train {implementation}", "train", policy, args.batch,
                                  implementation=implementation),
                           3.0, train_stage(args, implementation, policy, matmul_rates)))
    for policy in args.decode_policies:
        for method in ("greedy", "beam"):
            for batch in args.decode_batches:
                label = "greedy" if method == "greedy" else "beam-4"
                stages.append((record(f"decode {label}", "decode", policy, batch, method=method),
                               1.0, decode_stage(args, decode_models, method, batch, policy)))
    if args.only:
        stages = [stage for stage in stages if stage[0]["kind"] in args.only]
    return stages, hub_missing


def watchdog(results, hard_limit):
    """Ends the process, after writing what was measured, once the run is `hard_limit` seconds old (a compile or
    a step that hangs cannot be interrupted from Python)."""
    while True:
        time.sleep(1.0)
        if results.elapsed() > hard_limit:
            with results.lock:
                current = results.current
                if current is not None:
                    current.update(status="stopped", error=f"over the total budget ({hard_limit:.0f} s): stopped",
                                   seconds=round(time.perf_counter() - current.pop("_start"), 2))
                    results.data["stages"].append(current)
                for first in results.pending:
                    results.data["stages"].append(dict(first, status="skipped",
                                                       error="not reached: the run was over the total budget"))
                results.data["peak_memory_bytes"] = peak_memory()
                results.write()
            log(results, f"watchdog: past {hard_limit:.0f} s, results written, exiting")
            os._exit(3)


def main(argv=None):
    args = parse_args(argv)
    if args.forbid_tensorflow:
        for name in ("tensorflow", "tensorflow_text"):
            sys.modules[name] = None  # `import tensorflow` now raises ImportError
    results = Results(args)
    log(results, f"start: {'tiny' if args.tiny else 'full'} sizes, budget {args.budget:.0f} s, out {args.out}")
    hard_limit = args.budget + max(30.0, 0.1 * args.budget)
    threading.Thread(target=watchdog, args=(results, hard_limit), daemon=True).start()

    env = environment(args)
    results.data["environment"] = env
    results.data["config"] = {
        "vocab": args.vocab, "num_layers": args.layers, "d_model": args.d_model, "num_heads": args.heads,
        "d_ff": args.d_ff, "dropout": args.dropout, "batch": args.batch, "src_len": args.src_len,
        "tgt_len": args.tgt_len, "target_tokens_per_batch": args.batch * args.tgt_len,
        "warmup_steps": args.warmup, "timed_steps": args.steps, "train_policies": args.train_policies,
        "decode_policies": args.decode_policies, "decode_batches": args.decode_batches,
        "decode_length": args.decode_length, "decode_repeats": args.decode_repeats, "beam_size": 4,
        "matmul_size": args.matmul_size, "engine_slots": args.engine_slots, "engine_length": args.engine_length,
        "engine_sentences_per_slot": args.engine_sentences_per_slot, "optimizer": "Adam(1e-4, 0.9, 0.98, 1e-9)",
        "jit_compile": True,
    }
    results.data["peaks"] = {
        "bfloat16_tflops": args.peak_bf16_tflops, "float32_tflops": args.peak_fp32_tflops,
        "basis": "defaults are the H200 SXM dense tensor-core specification (BF16 989.5, TF32 494.7 TFLOP/s); "
                 "FLOPs count the matmuls of forward + backward (3x forward)",
    }
    results.write()
    log(results, f"device {env['device_kind']} ({env['platform']}), jax {env['jax_version']}, keras "
                 f"{env['keras_version']}, keras-hub: {env['keras_hub_status']}")

    matmul_rates = {}
    decode_models = DecodeModels(args)
    stages, hub_missing = plan(args, env, matmul_rates, decode_models)
    if hub_missing and (not args.only or "train" in args.only):
        results.add({"id": "train/keras-hub", "name": "train keras-hub", "kind": "train", "status": "skipped",
                     "error": env["keras_hub_status"], "implementation": "keras-hub", "precision": "", "batch": None})
    weights_left = sum(weight for _, weight, _ in stages)
    last_seconds = {}
    results.pending = [first for first, _, _ in stages]
    try:
        for first, weight, run in stages:
            left = args.budget - results.elapsed()
            share = left * weight / weights_left
            weights_left -= weight
            name, kind = first["name"], first["kind"]
            record = dict(first, status="ok", error=None)
            expected = last_seconds.get(kind, 0.0)  # what the last stage of this kind took
            if left <= 0 or left < expected:
                why = (f"budget spent ({args.budget:.0f} s)" if left <= 0 else
                       f"would not fit: {left:.0f} s of the budget left, the last {kind} stage took {expected:.0f} s")
                with results.lock:
                    results.pending.remove(first)
                    results.add(dict(record, status="skipped", error=why))
                log(results, f"{summary(record).rstrip(': ')}: skipped, {why}")
                continue
            stage = Stage(share)
            with results.lock:
                results.pending.remove(first)
                results.current = dict(record, _start=time.perf_counter())
            start = time.perf_counter()
            try:
                record.update(run(stage))
            except Exception as error:  # noqa: BLE001 - each stage is isolated: record and go on
                record.update(status="error", error=f"{type(error).__name__}: {error}")
                traceback.print_exc(limit=3, file=sys.stderr)
                if kind != "decode":
                    free_memory()
            record["cut_short"] = stage.cut_short
            record["seconds"] = round(time.perf_counter() - start, 2)
            last_seconds[kind] = record["seconds"]
            record["peak_memory_bytes"] = peak_memory()
            if kind == "matmul" and record["status"] == "ok":
                matmul_rates[record["precision"]] = record["tflops"] * 1e12
            if kind == "train":
                free_memory()
            with results.lock:
                results.current = None
                results.add(record)
            log(results, summary(record))
    finally:
        free_memory()
        env["tensorflow_loaded"] = tensorflow_loaded()
        results.data["peak_memory_bytes"] = peak_memory()
        results.data["finished"] = True
        results.write()
    log(results, f"done: {os.path.join(args.out, JSON_NAME)} and {MARKDOWN_NAME}")
    print(markdown(results.data), flush=True)
    return 0


def summary(record):
    head = record["name"] + "".join(f" {part}" for part in (record.get("precision"), record.get("batch") and
                                                           f"batch {record['batch']}") if part) + ": "
    if record["status"] == "ok" and "ms" not in record and "tflops" not in record:
        return head  # not run yet
    if record["status"] != "ok":
        return head + f"{record['status']}: {one_line(record['error'], 200)}"
    if record["kind"] == "matmul":
        return head + f"{sig(record['tflops'])} TFLOP/s ({record['seconds']:.1f} s)"
    text = f"{record['ms']:.2f} ms, {record['tokens_per_s']:,.0f} tokens/s"
    if record["kind"] == "train":
        text += f", {sig(record['tflops'])} TFLOP/s, MFU {sig(pct(record['mfu']), '%')}"
    if record["kind"] == "engine":
        text += f" (static batches {record['static_tokens_per_s']:,.0f} tokens/s: {record['speedup']:.2f}x)"
    return head + text + f" (compile {record['compile_s']:.1f} s, stage {record['seconds']:.1f} s" + (
        ", cut short)" if record["cut_short"] else ")")


if __name__ == "__main__":
    sys.exit(main())
