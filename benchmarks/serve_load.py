"""Load test: concurrent clients against the exported SavedModel and against CTranslate2, one sentence per request.

Each client is a thread in a closed loop (send a sentence, wait for its translation, send the next) for `--seconds`;
the sentences come from the test set in turn. Two ways to serve each engine:

* `direct`: every request is one call of the engine with one sentence (what a server without batching does; the
  calls run concurrently, each on the engine's threads);
* `batched`: requests wait in a queue and run together, TF Serving style: a batch closes when it holds
  `--max-batch-size` sentences or `--batch-timeout-ms` after its first one arrived, and one batch runs at a time
  (TF Serving's `max_batch_size`, `batch_timeout_micros` and `num_batch_threads: 1`).

Printed per (engine, mode, clients): p50 and p99 latency of a request, sentences/s, the mean batch size, and
sentences/s as a ratio to CTranslate2 with the same mode and clients. Each engine runs in its own process and is
warmed up first (the SavedModel's XLA programs are compiled for every batch and width bucket the test will use).

Usage (a run from `examples/multi30k.yaml`, the test set from DATA_DIR, the Multi30k directory):
    python benchmarks/serve_load.py runs/multi30k --src test_2016_flickr.de.gz
    python benchmarks/serve_load.py RUN --src S --clients 1 4 --seconds 5 --engines saved_model   # quicker
"""

import argparse
import json
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import Future

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import engine_rows  # noqa: E402
from common import print_rows  # noqa: E402
from deploy import export_all  # noqa: E402

ENGINES = ("saved_model", "saved_model-graph", "ct2")
MODES = ("direct", "batched")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--src", required=True, help="source sentences the clients send (.gz accepted)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--seconds", type=float, default=15.0, help="duration of each measurement")
    parser.add_argument("--engines", nargs="+", default=["saved_model", "ct2"], choices=ENGINES)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--max-batch-size", type=int, default=16)
    parser.add_argument("--batch-timeout-ms", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=2, help="compute threads of each engine")
    parser.add_argument("--work", help="directory for the exports (default: a temporary one)")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--engine", help=argparse.SUPPRESS)  # internal: run one engine in this process
    return parser.parse_args(argv)


class MicroBatcher:
    """TF Serving style batching in front of `translate_batch(list of str) -> list of str`.

    One scheduler thread takes the first waiting request, waits at most `timeout_ms` for more (up to
    `max_batch_size`), runs the batch, and resolves each request's future.
    """

    def __init__(self, translate_batch, max_batch_size, timeout_ms):
        self.translate_batch = translate_batch
        self.max_batch_size = max_batch_size
        self.timeout = timeout_ms / 1000
        self.requests = queue.Queue()
        self.batch_sizes = []
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def submit(self, text):
        future = Future()
        self.requests.put((text, future))
        return future

    def close(self):
        self.requests.put(None)
        self.thread.join()

    def _loop(self):
        while True:
            first = self.requests.get()
            if first is None:
                return
            batch = [first]
            deadline = time.perf_counter() + self.timeout
            while len(batch) < self.max_batch_size:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    break
                try:
                    item = self.requests.get(timeout=remaining)
                except queue.Empty:
                    break
                if item is None:
                    self.requests.put(None)
                    break
                batch.append(item)
            self.batch_sizes.append(len(batch))
            try:
                outputs = self.translate_batch([text for text, _ in batch])
            except Exception as error:  # noqa: BLE001 - handed to the waiting clients
                for _, future in batch:
                    future.set_exception(error)
                continue
            for (_, future), output in zip(batch, outputs):
                future.set_result(output)


def make_translate_batch(engine, path, threads):
    """`translate_batch(list of str) -> list of str` for one engine, greedy."""
    if engine.startswith("saved_model"):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401

        signature = tf.saved_model.load(path).signatures["serving_default"]
        return lambda texts: [t.decode("utf-8") for t in signature(text=tf.constant(texts))["translation"].numpy()]
    from keras_transformer.export.ctranslate2_model import CTranslate2Translator

    translator = CTranslate2Translator(path, intra_threads=threads)
    return lambda texts: translator.translate(texts, beam_size=1, batch_size=len(texts))


def warm_up(translate_batch, sentences, tokenizer, max_batch_size):
    """Runs every batch bucket (1, 2, 4, 8, multiples of 8 up to `max_batch_size`) at every source width bucket the
    sentences reach, so that XLA compiles before the clock starts."""
    from keras_transformer.export.translator_module import BATCH_BUCKET
    from keras_transformer.export.translator_module import WIDTH_BUCKET

    lengths = tokenizer.tokenize(sentences).row_lengths().numpy()
    by_width = {}
    for sentence, length in zip(sentences, lengths):  # [START] and [END] make 2 more positions
        by_width.setdefault(-(-(int(length) + 2) // WIDTH_BUCKET), sentence)
    sizes = sorted({b for b in (1, 2, 4, 8) if b <= max_batch_size}
                   | set(range(BATCH_BUCKET, max_batch_size + 1, BATCH_BUCKET)) | {max_batch_size})
    for sentence in by_width.values():
        for size in sizes:
            translate_batch([sentence] * size)


def measure(translate_batch, sentences, clients, seconds, mode, max_batch_size, timeout_ms):
    """Closed-loop clients for `seconds`: `{"p50_ms", "p99_ms", "sentences_per_s", "mean_batch"}`."""
    batcher = MicroBatcher(translate_batch, max_batch_size, timeout_ms) if mode == "batched" else None
    latencies, lock, counter = [], threading.Lock(), [0]
    stop_at = time.perf_counter() + seconds

    def client():
        while time.perf_counter() < stop_at:
            with lock:
                text = sentences[counter[0] % len(sentences)]
                counter[0] += 1
            start = time.perf_counter()
            if batcher is None:
                translate_batch([text])
            else:
                batcher.submit(text).result()
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)

    begin = time.perf_counter()
    workers = [threading.Thread(target=client) for _ in range(clients)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - begin
    if batcher is not None:
        batcher.close()
    latencies.sort()
    return {
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "sentences_per_s": len(latencies) / wall,
        "requests": len(latencies),
        "mean_batch": statistics.mean(batcher.batch_sizes) if batcher is not None else 1.0,
    }


def run_engine(args):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    from keras_transformer.data.corpus import read_lines
    from keras_transformer.runs.run import load_tokenizers

    engine, path = args.engine.split("=", 1)
    sentences = [s for s in read_lines(args.src) if s.strip()]
    translate_batch = make_translate_batch(engine, path, args.threads)
    source_tokenizer, _ = load_tokenizers(args.run_dir)
    warm_up(translate_batch, sentences, source_tokenizer, args.max_batch_size)
    rows = []
    for mode in args.modes:
        for clients in args.clients:
            row = measure(translate_batch, sentences, clients, args.seconds, mode, args.max_batch_size,
                          args.batch_timeout_ms)
            rows.append({"engine": engine, "mode": mode, "clients": clients, **row})
    print_rows(rows)


def export_engines(run_dir, work, engines):
    """The exports `deploy.py` writes, under this script's engine names (`ct2` is deploy's `ct2-fp32`)."""
    names = {engine: "ct2-fp32" if engine == "ct2" else engine for engine in engines}
    paths = export_all(run_dir, work, list(names.values()))
    return {engine: paths[name] for engine, name in names.items()}


def main(argv=None):
    args = parse_args(argv)
    if args.engine:
        return run_engine(args)
    work = args.work or tempfile.mkdtemp(prefix="kt-serve-")
    print(f"Exporting {args.run_dir} into {work} ...", flush=True)
    paths = export_engines(args.run_dir, work, args.engines)
    load = os.getloadavg()[0]
    rows = []
    for engine in args.engines:
        command = [sys.executable, os.path.abspath(__file__), args.run_dir, "--src", args.src,
                   "--seconds", str(args.seconds), "--threads", str(args.threads),
                   "--max-batch-size", str(args.max_batch_size), "--batch-timeout-ms", str(args.batch_timeout_ms),
                   "--clients", *map(str, args.clients), "--modes", *args.modes,
                   "--engine", f"{engine}={paths[engine]}"]
        print(f"  {engine} ...", flush=True)
        rows += engine_rows(command) or []
    anchors = {(r["mode"], r["clients"]): r["sentences_per_s"] for r in rows if r["engine"] == "ct2"}
    print(f"\nload average before the runs: {load:.2f}; {args.threads} threads per engine; {args.seconds:.0f} s per "
          f"row; batched = at most {args.max_batch_size} sentences, {args.batch_timeout_ms:g} ms timeout")
    print(f"{'engine':18} {'mode':8} {'clients':>7} {'p50 ms':>7} {'p99 ms':>7} {'sent/s':>7} {'batch':>5} "
          f"{'x CT2':>6}")
    for r in rows:
        anchor = anchors.get((r["mode"], r["clients"]))
        r["ratio_to_ct2"] = r["sentences_per_s"] / anchor if anchor else float("nan")
        print(f"{r['engine']:18} {r['mode']:8} {r['clients']:>7} {r['p50_ms']:7.1f} {r['p99_ms']:7.1f} "
              f"{r['sentences_per_s']:7.1f} {r['mean_batch']:5.1f} {r['ratio_to_ct2']:6.2f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
