"""Which multi-host engine works with Keras 3 `fit()` on our pinned stack: the evidence behind docs/scaling.md.

Trains the same tiny Transformer (fixed seed, no dropout, the same global batches) three ways and prints a table:

* one process (the reference, on each backend);
* `tf.distribute.MultiWorkerMirroredStrategy`, 2 worker processes over 127.0.0.1 (TF_CONFIG), Keras 3 `fit()`;
* the Keras distribution API on JAX (`jax.distributed` + `keras.distribution.DataParallel`), 2 processes over
  127.0.0.1, through `keras_transformer.training.distribution` (what `--distribute multi-host` runs).

    python benchmarks/engines.py                  # both engines
    python benchmarks/engines.py --engines mwms   # TensorFlow's engine only
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
RESULT = "RESULT "
GLOBAL_BATCH, STEPS, EPOCHS, VOCAB, LENGTH = 16, 6, 3, 50, 10
ENGINES = ("mwms", "jax")
BACKENDS = {"mwms": "tensorflow", "jax": "jax"}


def _data():
    import numpy as np

    rng = np.random.default_rng(0)
    tokens = rng.integers(3, VOCAB, size=(GLOBAL_BATCH * STEPS, LENGTH)).astype("int32")
    return {"encoder_inputs": tokens, "decoder_inputs": tokens}, np.roll(tokens, -1, axis=1)


def _model():
    import keras

    from keras_transformer import build_transformer

    keras.utils.set_random_seed(3)
    model = build_transformer(VOCAB, VOCAB, num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout=0.0,
                              max_length=LENGTH)
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _batches(rows=None):
    import tensorflow as tf

    x, y = _data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
    if rows is not None:  # this process's rows of every global batch
        begin, end = rows
        dataset = dataset.map(lambda x, y: ({k: v[begin:end] for k, v in x.items()}, y[begin:end]))
    return dataset


def worker(args):
    if args.engine == "mwms":
        import tensorflow as tf

        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = _model()
        dataset = _batches()
    elif args.engine == "jax":
        from keras_transformer.training.distribution import DistributionConfig
        from keras_transformer.training.distribution import setup_distribution

        placement = setup_distribution(DistributionConfig(
            mode="multi-host", coordinator=f"127.0.0.1:{args.port}", num_processes=2, process_id=args.index,
            timeout=120))
        model = _model()
        half = GLOBAL_BATCH // 2
        dataset = _batches((args.index * half, (args.index + 1) * half))
        del placement
    else:
        model, dataset = _model(), _batches()
    history = model.fit(dataset, epochs=EPOCHS, verbose=0, shuffle=False)
    print(RESULT + json.dumps(history.history["loss"]), flush=True)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(engine, index, env, port):
    command = [sys.executable, os.path.abspath(__file__), "--worker", engine, "--index", str(index), "--port",
               str(port)]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _outcome(processes):
    results = []
    for process in processes:
        try:
            out, err = process.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        lines = [line for line in out.splitlines() if line.startswith(RESULT)]
        if process.returncode == 0 and lines:
            results.append(json.loads(lines[-1][len(RESULT):]))
        else:
            return None, _last_error(err) or f"exit {process.returncode}"
    return results, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES),
                        help="the multi-host engines to run, each with its backend's one-process reference "
                             "(default: both)")
    parser.add_argument("--worker", choices=["single", "mwms", "jax"], help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        args.engine = args.worker
        return worker(args)

    base = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    rows = []
    references = {}
    for backend in [BACKENDS[engine] for engine in ENGINES if engine in args.engines]:
        results, error = _outcome([_launch("single", 0, dict(base, KERAS_BACKEND=backend), 0)])
        references[backend] = results[0] if results else None
        rows.append([f"one process ({backend})", "yes" if results else "no", _fmt(references[backend]), error or ""])

    if "mwms" in args.engines:
        rows.append(_mwms_row(base, references["tensorflow"]))
    if "jax" in args.engines:
        rows.append(_jax_row(base, references["jax"]))

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import keras
    import tensorflow as tf
    from common import print_table

    print(f"keras {keras.__version__}, tensorflow {tf.__version__}, jax {_jax_version()}; {EPOCHS} epochs of "
          f"{STEPS} global batches of {GLOBAL_BATCH}")
    print_table(["engine", "fit() runs", "losses per epoch", "notes"], rows)


def _mwms_row(base, reference):
    ports = [_free_port(), _free_port()]
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    processes = [_launch("mwms", i, dict(base, KERAS_BACKEND="tensorflow", TF_CONFIG=json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": i}})), 0) for i in range(2)]
    results, error = _outcome(processes)
    return ["MultiWorkerMirroredStrategy, 2 processes (tensorflow)", "yes" if results else "no",
            _fmt(results[0]) if results else "", error or _agreement(results, reference)]


def _jax_row(base, reference):
    port = _free_port()
    processes = [_launch("jax", i, dict(base, KERAS_BACKEND="jax"), port) for i in range(2)]
    results, error = _outcome(processes)
    return ["keras.distribution DataParallel, 2 processes (jax)", "yes" if results else "no",
            _fmt(results[0]) if results else "", error or _agreement(results, reference)]


def _jax_version():
    try:
        import jax

        return jax.__version__
    except ImportError:
        return "not installed"


def _last_error(stderr):
    """The last `XxxError: message` of a traceback, on one line, with the innermost reprs ({...}) elided."""
    starts = [m.start() for m in re.finditer(r"^\w+(Error|Exception): ", stderr, flags=re.M)]
    if not starts:
        return stderr.strip().splitlines()[-1][:200] if stderr.strip() else ""
    text = " ".join(stderr[starts[-1]:].split())
    text = re.sub(r"\{[^{}]*\}", "...", text)  # the innermost reprs (per-device tensors)
    return text[:220]


def _fmt(losses):
    return ", ".join(f"{v:.4f}" for v in losses) if losses else ""


def _agreement(results, reference):
    if not reference:
        return ""
    worst = max(abs(a - b) / abs(b) for result in results for a, b in zip(result, reference))
    same = all(result == results[0] for result in results)
    return (f"max relative gap to one process: {worst:.1e}; "
            f"{'every process logs the same losses' if same else 'the processes disagree'}")


if __name__ == "__main__":
    sys.exit(main())
