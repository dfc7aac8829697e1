"""Load test of `keras-transformer serve` over HTTP: throughput, latency, errors and server memory under N clients.

Each engine is a `keras-transformer serve` process of its own on 127.0.0.1 (so the CPU time and resident memory
reported are the server's alone), answering TF Serving's REST API:

* `ours`: ARTIFACT as given (a run directory by default) with the server's default continuous batching (a
  `SlotEngine` of `--max-batch-size` slots: sentences join the running decode at its next step and leave it when
  they end; `--steps-per-call` as given) where the artifact allows it, else batch at a time;
* `ours-unbatched`: the same server with `--batching static --max-batch-size 1`: one request decoded at a time;
* `ours-static`: the same server with `--batching static`: batch at a time (`--max-batch-size`,
  `--batch-timeout-ms`), each batch decoded until its longest sentence ends;
* `ct2`: the same run exported with `keras-transformer export RUN --ctranslate2 DIR`, served by the same server
  (CTranslate2 on its oneDNN backend, `CT2_USE_MKL=0` unless the environment sets it, with passive OpenMP
  waiting, `OMP_WAIT_POLICY=PASSIVE`);
* `saved_model`: the same run exported with `keras-transformer export RUN --saved-model DIR` (the artifact TF
  Serving runs), served by the same server.

Each server starts with its default warm-up, which compiles every (batch, source width) bucket before it listens,
so that no compilation lands in a measured row (`--prime` also sends each server one request of b copies of a
sentence for every batch size b and sentence length in the set).

Clients are threads in this process, each with its own keep-alive `httpx.Client`, in a closed loop: send one
sentence (`POST /v1/models/NAME:predict {"instances": [s]}`), wait for its translation, send the next, with a
request timeout. Sentences come from `--src` in turn (or generated date phrases). After `--warmup-seconds` (not
counted) the clients run `--seconds` more; a row counts the requests answered within that window: requests/s (one
sentence each), p50 and p99 latency, the server's CPU use, its peak resident memory so far (VmHWM) and its current
one (VmRSS). Errors (non-200 answers, malformed ones, exceptions, by kind) are counted from the first request on.
The server's mean batch size is not reported: it is not exposed over HTTP.

Ratios at each client count: `x unbatched` (ours / ours-unbatched requests/s) and `x CT2` (ours / ct2).
Goals, at 16 clients: ours >= 4x ours-unbatched (batching pays), and ours within 1.5x of CTranslate2 (ct2/ours
<= 1.5); no errors. The clients share the machine's cores with the server: on a small CPU they take part of it.

`--soak SECONDS` runs one engine (ours unless `--engines` says otherwise) at 16 clients for that long instead,
sampling the server's VmRSS every 10 s. Goals: RSS growth from the start (after the warm-up) to the end < 5%, and
no errors.

Usage:
    python benchmarks/serve.py                                   # saved_models/quickstart
    python benchmarks/serve.py runs/multi30k --src val.de.gz --json serve.json
    python benchmarks/serve.py RUN --clients 1 4 16 --seconds 5  # quicker
    python benchmarks/serve.py RUN --soak 600                    # memory over 10 minutes at 16 clients
"""

import argparse
import collections
import gzip
import itertools
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import print_table  # noqa: E402

from keras_transformer.serving.protocol import json_safe  # noqa: E402

ENGINES = ("ours", "ours-unbatched", "ct2", "saved_model", "ours-static")
DEFAULT_ARTIFACT = os.path.join("saved_models", "quickstart")
GOAL_CLIENTS = 16
GOAL_BATCHING = 4.0  # ours >= 4x ours-unbatched requests/s
GOAL_CT2 = 1.5  # ct2 / ours requests/s <= 1.5
GOAL_SOAK_GROWTH = 5.0  # % of the RSS after the warm-up
READY = re.compile(r"keras-transformer serve: serving '(?P<name>[^']+)' at (?P<url>http://\S+)")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("artifact", metavar="ARTIFACT", nargs="?", default=None,
                        help=f"what to serve: a run directory for every engine (default: {DEFAULT_ARTIFACT})")
    parser.add_argument("--engines", nargs="+", default=None, choices=ENGINES,
                        help=f"default: all of them ({' '.join(ENGINES)}); with --soak: ours")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 64], help="concurrent clients per row")
    parser.add_argument("--seconds", type=float, default=30.0, help="measured duration of each row")
    parser.add_argument("--warmup-seconds", type=float, default=5.0, help="load before each row, not counted")
    parser.add_argument("--src", help="sentences the clients send, one per line (.gz accepted; default: generated "
                                      "date phrases)")
    parser.add_argument("--max-batch-size", type=int, default=32, help="the servers' --max-batch-size (ours, ct2)")
    parser.add_argument("--batch-timeout-ms", type=float, default=0.0,
                        help="the servers' --batch-timeout-ms (default 0, the server's)")
    parser.add_argument("--steps-per-call", type=int, default=8,
                        help="ours' --steps-per-call (the most tokens per compiled call)")
    parser.add_argument("--threads", type=int, default=None,
                        help="the servers' --threads (default: each engine's own); the clients run on the same "
                             "cores, so on a small CPU fewer server threads can be faster")
    parser.add_argument("--prime", action=argparse.BooleanOptionalAction, default=False,
                        help="before the rows, also send each server one request per batch size it decodes and "
                             "sentence length in the set (default off: the server's own warm-up already compiles "
                             "every batch and width bucket before it listens)")
    parser.add_argument("--request-timeout", type=float, default=120.0, help="client timeout per request, seconds")
    parser.add_argument("--startup-timeout", type=float, default=600.0,
                        help="seconds a server may take to load and warm up before it counts as failed")
    parser.add_argument("--soak", type=float, default=None, metavar="SECONDS",
                        help="run one engine at --soak-clients for this long, sampling the server's RSS")
    parser.add_argument("--soak-clients", type=int, default=GOAL_CLIENTS, help=argparse.SUPPRESS)
    parser.add_argument("--soak-interval", type=float, default=10.0, help=argparse.SUPPRESS)
    parser.add_argument("--work", help="directory for the CTranslate2 export and the server logs (default: a "
                                       "temporary one, removed at the end)")
    parser.add_argument("--json", help="also write every number here")
    args = parser.parse_args(argv)
    if args.artifact is None:
        if not os.path.exists(DEFAULT_ARTIFACT):
            parser.error(f"no ARTIFACT given and {DEFAULT_ARTIFACT} does not exist: run `keras-transformer "
                         "quickstart` first, or pass a run directory")
        args.artifact = DEFAULT_ARTIFACT
    if not os.path.exists(args.artifact):
        parser.error(f"{args.artifact}: no such file or directory")
    if args.soak is not None:
        args.engines = args.engines or ["ours"]
        if len(args.engines) != 1:
            parser.error("--soak runs one engine: pass one of --engines")
        if args.soak <= 0:
            parser.error("--soak must be > 0 seconds")
    args.engines = args.engines or list(ENGINES)
    if min(args.clients) < 1 or args.seconds <= 0 or args.warmup_seconds < 0 or args.request_timeout <= 0:
        parser.error("--clients must be >= 1, --seconds and --request-timeout > 0, --warmup-seconds >= 0")
    return args


# ---------------------------------------------------------------------------------------------------- sentences


def read_sentences(src, count=1000):
    """The non-empty lines of `src` (gzip-compressed when it starts with gzip's magic bytes), or `count` generated
    date phrases."""
    if src is None:
        from keras_transformer.data.synthetic import make_synthetic_corpus

        return list(make_synthetic_corpus(count, seed=1).sources)
    with open(src, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    sentences = [line.rstrip("\r") for line in data.decode("utf-8").split("\n") if line.strip()]
    if not sentences:
        raise SystemExit(f"{src}: no sentences")
    return sentences


# ------------------------------------------------------------------------------------------------- the servers


def cli_command(*args):
    """`keras-transformer ARGS` with this interpreter (the same environment as this script)."""
    return [sys.executable, "-W", "ignore", "-m", "keras_transformer.cli", *args]


def tail(path, lines=30):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


def export_artifacts(run_dir, work, formats):
    """`keras-transformer export RUN --ctranslate2 DIR --saved-model DIR` (the `formats` asked for, from `"ct2"`
    and `"saved_model"`) in one command: `{format: the directory written under work}`."""
    flags = {"ct2": "--ctranslate2", "saved_model": "--saved-model"}
    paths = {name: os.path.join(work, name) for name in formats}
    command = [part for name in formats for part in (flags[name], paths[name])]
    log = os.path.join(work, "export.log")
    with open(log, "w", encoding="utf-8") as out:
        process = subprocess.run(cli_command("export", run_dir, *command, "--overwrite"),
                                 stdout=out, stderr=subprocess.STDOUT, timeout=1800)
    if process.returncode != 0:
        raise RuntimeError(f"`keras-transformer export {run_dir} {' '.join(command)}` failed (exit "
                           f"{process.returncode}); {' and '.join(formats)} need a run directory. The end of its "
                           f"output:\n{tail(log)}")
    return paths


def proc_status(pid):
    """The process's resident memory in MB: `{"peak_rss_mb": VmHWM, "rss_mb": VmRSS}` (NaN once it is gone)."""
    values = {"peak_rss_mb": math.nan, "rss_mb": math.nan}
    keys = {"VmHWM:": "peak_rss_mb", "VmRSS:": "rss_mb"}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                field = line.split()
                if field and field[0] in keys:
                    values[keys[field[0]]] = int(field[1]) / 1024
    except OSError:
        pass
    return values


def cpu_seconds(pid):
    """User + system CPU seconds the process has used (its threads included; NaN once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14 and 15)


def die_with_parent():
    """In the child, before exec: SIGTERM it when this process dies, even killed (Linux's PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Server:
    """A `keras-transformer serve` subprocess on 127.0.0.1 (any free port); its output goes to `log`."""

    def __init__(self, engine, artifact, args, log):
        self.engine, self.log = engine, log
        self.max_batch_size = batch = 1 if engine == "ours-unbatched" else args.max_batch_size
        self.command = cli_command("serve", artifact, "--host", "127.0.0.1", "--port", "0", "--model-name", engine,
                                   "--max-batch-size", str(batch), "--batch-timeout-ms", str(args.batch_timeout_ms),
                                   "--timeout-s", str(args.request_timeout),
                                   *(["--steps-per-call", str(args.steps_per_call)] if engine == "ours" else []),
                                   *(["--batching", "static"] if engine in ("ours-unbatched", "ours-static") else []),
                                   *(["--threads", str(args.threads)] if args.threads else []))
        env = dict(os.environ)
        if engine == "ct2":
            # CTranslate2's MKL backend is much slower than its oneDNN one on some AVX-512 CPUs: the latter by default
            # (CT2_USE_MKL=1 in the environment measures the other).
            env.setdefault("CT2_USE_MKL", "0")
            # Its OpenMP threads otherwise spin at every barrier: when the cores are shared (with this script's
            # clients, or anything else), a call then stalls for seconds waiting on a descheduled thread.
            env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        self.env = env
        self.process = None
        self.url = None
        self.ready_s = None

    @property
    def pid(self):
        return self.process.pid

    def start(self, timeout):
        """Starts the server and waits until it listens; returns its model URL (`http://HOST:PORT/v1/models/N`)."""
        with open(self.log, "w", encoding="utf-8") as out:
            self.process = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                            stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        begin = time.monotonic()
        deadline = begin + timeout
        while time.monotonic() < deadline:
            match = READY.search(tail(self.log, 200))
            if match:
                self.url = match["url"]
                self.ready_s = time.monotonic() - begin
                return self.url
            if self.process.poll() is not None:
                raise RuntimeError(f"the {self.engine} server exited ({self.process.returncode}) before serving; the "
                                   f"end of its log ({self.log}):\n{tail(self.log)}")
            time.sleep(0.2)
        raise RuntimeError(f"the {self.engine} server did not serve within {timeout:g} s (--startup-timeout); the end "
                           f"of its log ({self.log}):\n{tail(self.log)}")

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout=90):
        """SIGTERM (uvicorn's graceful shutdown), then SIGKILL if it is still running after `timeout` s."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# ------------------------------------------------------------------------------------------------- the clients


def percentile(sorted_values, q):
    """Nearest-rank percentile of a sorted list (NaN when it is empty)."""
    if not sorted_values:
        return math.nan
    return sorted_values[max(0, math.ceil(q / 100 * len(sorted_values)) - 1)]


def run_load(url, sentences, clients, seconds, warmup_seconds, request_timeout, pid, sample_every=None,
             on_sample=None):
    """`clients` closed-loop threads against `url` for `warmup_seconds` + `seconds`.

    Returns the requests answered within the measured window (requests/s, latency), the errors of the whole run by
    kind, and the server's CPU use in the window; with `sample_every`, also the server's VmRSS sampled every
    `sample_every` s from the window's start to its end (`on_sample(seconds, rss_mb, answered, errors)` sees each).
    """
    import httpx

    predict = f"{url}:predict"
    counter = itertools.count()
    records = [[] for _ in range(clients)]  # per thread: (begin, end, error kind or None)
    begin_all = time.perf_counter()
    t0 = begin_all + warmup_seconds
    t1 = t0 + seconds

    def client(out):
        with httpx.Client(timeout=request_timeout) as http:
            while True:
                begin = time.perf_counter()
                if begin >= t1:
                    return
                text = sentences[next(counter) % len(sentences)]
                kind = None
                try:
                    response = http.post(predict, json={"instances": [text]})
                    if response.status_code != 200:
                        kind = f"HTTP {response.status_code}"
                    else:
                        predictions = response.json().get("predictions")
                        if not (isinstance(predictions, list) and len(predictions) == 1
                                and isinstance(predictions[0], str)):
                            kind = "malformed answer"
                except Exception as error:  # noqa: BLE001 - counted by kind; the loop goes on until the deadline
                    kind = type(error).__name__
                out.append((begin, time.perf_counter(), kind))
                if kind is not None and not kind.startswith("HTTP"):
                    time.sleep(0.01)  # a refused connection must not spin

    threads = [threading.Thread(target=client, args=(records[i],), daemon=True, name=f"client-{i}")
               for i in range(clients)]
    for thread in threads:
        thread.start()
    time.sleep(max(0.0, t0 - time.perf_counter()))
    cpu_start = cpu_seconds(pid)
    samples = []
    if sample_every:
        next_sample = t0
        while True:
            now = time.perf_counter()
            if now >= next_sample or now >= t1:
                answered = sum(1 for r in records for b, e, k in list(r) if k is None and t0 <= e)
                errors = sum(1 for r in records for b, e, k in list(r) if k is not None)
                sample = (min(now, t1) - t0, proc_status(pid)["rss_mb"])
                samples.append(sample)
                if on_sample is not None:
                    on_sample(*sample, answered, errors)
                next_sample += sample_every
                if now >= t1:
                    break
            time.sleep(max(0.0, min(next_sample, t1) - time.perf_counter()))
    else:
        time.sleep(max(0.0, t1 - time.perf_counter()))
    cpu_end = cpu_seconds(pid)
    for thread in threads:  # each finishes its request in flight; bounded by the request timeout
        thread.join(max(0.0, t1 + request_timeout + 5 - time.perf_counter()))
    stuck = sum(thread.is_alive() for thread in threads)
    every = [record for r in records for record in list(r)]
    latencies = sorted(1000 * (e - b) for b, e, k in every if k is None and t0 <= e <= t1)
    kinds = collections.Counter(k for _, _, k in every if k is not None)
    if stuck:
        kinds["client stuck past its timeout"] += stuck
    return {
        "clients": clients,
        "seconds": seconds,
        "requests": len(latencies),
        "requests_per_s": len(latencies) / seconds,
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "mean_ms": statistics.fmean(latencies) if latencies else math.nan,
        "errors": sum(kinds.values()),
        "error_kinds": dict(kinds),
        "server_cpu_percent": 100 * (cpu_end - cpu_start) / seconds,
        "rss_samples": samples,
    }


# ------------------------------------------------------------------------------------------------- the report


def fmt(value, spec):
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def ratio(a, b):
    return a / b if b > 0 and not math.isnan(a) else math.nan


def ratios_by_clients(rows, clients):
    """Per client count: ours / ours-unbatched and ours / ct2 requests/s (NaN where a side was not measured)."""
    speed = {(r["engine"], r["clients"]): r["requests_per_s"] for r in rows}
    out = []
    for c in clients:
        ours, unbatched, ct2 = (speed.get((e, c), math.nan) for e in ENGINES[:3])
        out.append({"clients": c, "x_unbatched": ratio(ours, unbatched), "x_ct2": ratio(ours, ct2),
                    "ct2_over_ours": ratio(ct2, ours)})
    return out


def goal_lines(ratios, clients, engines, rows):
    """The goal lines, at 16 clients (or the most clients measured, said so), and the goals as booleans."""
    at = GOAL_CLIENTS if GOAL_CLIENTS in clients else max(clients)
    where = f"at {GOAL_CLIENTS} clients" + ("" if at == GOAL_CLIENTS else f" (measured at {at}, the most run)")
    r = next(x for x in ratios if x["clients"] == at)
    lines, goals = [], {}
    if {"ours", "ours-unbatched"} <= set(engines):
        met = r["x_unbatched"] >= GOAL_BATCHING
        goals["batching"] = met
        lines.append(f"goal {where}: ours >= {GOAL_BATCHING:g}x ours-unbatched requests/s: {r['x_unbatched']:.2f}x "
                     f"({'met' if met else 'NOT met'})")
    else:
        lines.append(f"goal {where}: ours >= {GOAL_BATCHING:g}x ours-unbatched requests/s: not measured (needs "
                     "--engines ours ours-unbatched)")
    if {"ours", "ct2"} <= set(engines):
        met = r["ct2_over_ours"] <= GOAL_CT2
        goals["ct2"] = met
        lines.append(f"goal {where}: ours within {GOAL_CT2:g}x of ct2 (ct2/ours <= {GOAL_CT2:g}): "
                     f"ct2/ours = {r['ct2_over_ours']:.2f} ({'met' if met else 'NOT met'})")
    else:
        lines.append(f"goal {where}: ours within {GOAL_CT2:g}x of ct2 (ct2/ours <= {GOAL_CT2:g}): not measured "
                     "(needs --engines ours ct2)")
    errors = sum(row["errors"] for row in rows)
    goals["no_errors"] = errors == 0
    lines.append(f"goal: no errors: {errors} in all rows ({'met' if errors == 0 else 'NOT met'})")
    return lines, goals


def describe_cpu():
    name = "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        pass
    return f"{name}, {os.cpu_count()} cores"


def print_rows_table(rows):
    print_table(
        ["engine", "clients", "req/s", "p50 ms", "p99 ms", "errors", "server CPU %", "peak RSS MB", "RSS MB"],
        [[r["engine"], r["clients"], fmt(r["requests_per_s"], ".1f"), fmt(r["p50_ms"], ".1f"), fmt(r["p99_ms"], ".1f"),
          r["errors"], fmt(r["server_cpu_percent"], ".0f"), fmt(r["peak_rss_mb"], ".0f"), fmt(r["rss_mb"], ".0f")]
         for r in rows])


# ------------------------------------------------------------------------------------------------- the modes


def measure_engine(server, args, sentences, rows):
    url = server.start(args.startup_timeout)
    print(f"  {server.engine}: serving at {url} (pid {server.pid}) {server.ready_s:.1f} s after it started; "
          f"{describe_load()}", flush=True)
    check_status(url, args.request_timeout)
    if args.prime:
        count, seconds = prime(url, sentences, server.max_batch_size, args.request_timeout)
        print(f"    primed every (batch size, sentence length) shape: {count} requests in {seconds:.1f} s", flush=True)
    for clients in args.clients:
        row = run_load(url, sentences, clients, args.seconds, args.warmup_seconds, args.request_timeout, server.pid)
        row.update(engine=server.engine, server_pid=server.pid, **proc_status(server.pid))
        row.pop("rss_samples")
        if not server.alive():
            row["error_kinds"]["server exited"] = 1
            row["errors"] += 1
        rows.append(row)
        print(f"    {clients:>3} clients: {row['requests_per_s']:.1f} req/s, p50 {fmt(row['p50_ms'], '.1f')} ms, "
              f"p99 {fmt(row['p99_ms'], '.1f')} ms, {row['errors']} errors", flush=True)
        if not server.alive():
            print(f"    the server exited ({server.process.returncode}); the end of its log:\n{tail(server.log)}")
            break


def batch_sizes(max_batch_size):
    """The batch sizes the servers' decoders are compiled for: 1, 2, 4, 8, then multiples of 8 (`bucket_rows`)."""
    return sorted({min(n, max_batch_size) for n in (1, 2, 4, 8)} | set(range(16, max_batch_size + 1, 8)))


def length_representatives(sentences, count=24):
    """Up to `count` sentences whose lengths in characters are spread evenly from the shortest to the longest."""
    by_length = sorted(set(sentences), key=len)
    shortest, longest = len(by_length[0]), len(by_length[-1])
    picked = {}
    for i in range(count):
        target = shortest + (longest - shortest) * i / max(1, count - 1)
        picked.setdefault(min(by_length, key=lambda s: abs(len(s) - target)), None)
    return list(picked)


def prime(url, sentences, max_batch_size, timeout):
    """One request of b copies of a sentence, for each batch size b the server decodes and sentences of every length
    in the set: the compiled decoders' (batch, source width) shapes the load will reach are compiled before any
    measured row (the server's own warm-up compiles each batch size at one source width). Returns (requests, s)."""
    import httpx

    begin, count = time.perf_counter(), 0
    with httpx.Client(timeout=timeout) as http:
        for sentence in length_representatives(sentences):
            for size in batch_sizes(max_batch_size):
                response = http.post(f"{url}:predict", json={"instances": [sentence] * size})
                if response.status_code != 200:
                    raise RuntimeError(f"POST {url}:predict with {size} sentences: HTTP {response.status_code} "
                                       f"{response.text[:300]}")
                count += 1
    return count, time.perf_counter() - begin


def check_status(url, timeout):
    """The model's status answer (`GET /v1/models/NAME`) says AVAILABLE, or this raises."""
    import httpx

    body = httpx.get(url, timeout=timeout).raise_for_status().json()
    states = [v.get("state") for v in body.get("model_version_status", [])]
    if states != ["AVAILABLE"]:
        raise RuntimeError(f"GET {url}: {body}")


def describe_load():
    return f"load average {os.getloadavg()[0]:.2f}"


def run_table(args, sentences, work):
    rows = []
    artifacts = {"ours": args.artifact, "ours-unbatched": args.artifact, "ours-static": args.artifact}
    formats = [name for name in ("ct2", "saved_model") if name in args.engines]
    if formats:
        names = {"ct2": "CTranslate2", "saved_model": "a SavedModel"}
        print(f"Exporting {args.artifact} to {' and '.join(names[f] for f in formats)} in {work} ...", flush=True)
        artifacts.update(export_artifacts(args.artifact, work, formats))
    for engine in args.engines:
        server = Server(engine, artifacts[engine], args, os.path.join(work, f"server-{engine}.log"))
        try:
            measure_engine(server, args, sentences, rows)
        finally:
            server.stop()
    ratios = ratios_by_clients(rows, args.clients)
    lines, goals = goal_lines(ratios, args.clients, args.engines, rows)

    print(f"\n{args.artifact}; {len(sentences)} sentences, one per request; {args.seconds:g} s per row after "
          f"{args.warmup_seconds:g} s of warm-up; servers: --max-batch-size {args.max_batch_size} (ours, ct2), 1 "
          f"(ours-unbatched), --batch-timeout-ms {args.batch_timeout_ms:g}, --threads {args.threads or 'default'}; "
          f"ct2 with CT2_USE_MKL={os.environ.get('CT2_USE_MKL', '0')}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'PASSIVE')}; CPU: {describe_cpu()}")
    print_rows_table(rows)
    kinds = collections.Counter()
    for row in rows:
        kinds.update(row["error_kinds"])
    if kinds:
        print("errors by kind: " + ", ".join(f"{k}: {n}" for k, n in kinds.most_common()))
    print("\nours' requests/s against the other engines at the same client count:")
    print_table(["clients", "x unbatched", "x CT2", "ct2/ours"],
                [[r["clients"], fmt(r["x_unbatched"], ".2f"), fmt(r["x_ct2"], ".2f"), fmt(r["ct2_over_ours"], ".2f")]
                 for r in ratios])
    print()
    for line in lines:
        print(line)
    return {"rows": rows, "ratios": ratios, "goal_lines": lines, "goals": goals}


def run_soak(args, sentences, work):
    engine = args.engines[0]
    artifact = export_artifacts(args.artifact, work, ["ct2"])["ct2"] if engine == "ct2" else args.artifact
    server = Server(engine, artifact, args, os.path.join(work, f"server-{engine}.log"))
    clients = args.soak_clients
    print(f"Soak: {engine} at {clients} clients for {args.soak:g} s after {args.warmup_seconds:g} s of warm-up, the "
          f"server's RSS every {args.soak_interval:g} s", flush=True)

    def report(seconds, rss, answered, errors):
        print(f"  {seconds:7.0f} s: RSS {fmt(rss, '.1f')} MB, {answered} requests answered, {errors} errors",
              flush=True)

    try:
        url = server.start(args.startup_timeout)
        print(f"  serving at {url} (pid {server.pid}); {describe_load()}", flush=True)
        check_status(url, args.request_timeout)
        if args.prime:
            count, seconds = prime(url, sentences, server.max_batch_size, args.request_timeout)
            print(f"  primed every (batch size, sentence length) shape: {count} requests in {seconds:.1f} s",
                  flush=True)
        result = run_load(url, sentences, clients, args.soak, args.warmup_seconds, args.request_timeout, server.pid,
                          sample_every=args.soak_interval, on_sample=report)
        result.update(engine=engine, server_pid=server.pid, **proc_status(server.pid))
        if not server.alive():
            result["error_kinds"]["server exited"] = 1
            result["errors"] += 1
    finally:
        server.stop()
    rss = [value for _, value in result["rss_samples"] if not math.isnan(value)]
    start, end = (rss[0], rss[-1]) if rss else (math.nan, math.nan)
    growth = 100 * (end - start) / start if rss else math.nan
    result.update(rss_start_mb=start, rss_max_mb=max(rss) if rss else math.nan, rss_end_mb=end,
                  rss_growth_percent=growth)
    print(f"\n{args.artifact}; CPU: {describe_cpu()}")
    print_rows_table([result])
    print(f"RSS: {fmt(start, '.1f')} MB at the start (after the warm-up), {fmt(result['rss_max_mb'], '.1f')} MB "
          f"at most, {fmt(end, '.1f')} MB at the end; peak (VmHWM) {fmt(result['peak_rss_mb'], '.1f')} MB")
    if result["error_kinds"]:
        print("errors by kind: " + ", ".join(f"{k}: {n}" for k, n in result["error_kinds"].items()))
    goals = {"rss_growth": growth < GOAL_SOAK_GROWTH, "no_errors": result["errors"] == 0}
    lines = [f"goal: RSS growth over the soak < {GOAL_SOAK_GROWTH:g}%: {fmt(growth, '+.2f')}% "
             f"({'met' if goals['rss_growth'] else 'NOT met'})",
             f"goal: no errors: {result['errors']} ({'met' if goals['no_errors'] else 'NOT met'})"]
    for line in lines:
        print(line)
    return {"soak": result, "goal_lines": lines, "goals": goals}


def main(argv=None):
    args = parse_args(argv)
    # SIGTERM ends this script as Ctrl-C does: through the `finally` blocks that stop the servers.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    sentences = read_sentences(args.src)
    temporary = None if args.work else tempfile.TemporaryDirectory(prefix="kt-serve-bench-")
    work = args.work or temporary.name
    os.makedirs(work, exist_ok=True)
    try:
        result = run_soak(args, sentences, work) if args.soak is not None else run_table(args, sentences, work)
    except RuntimeError as error:
        print(f"serve.py: {error}", file=sys.stderr)
        return 1
    finally:
        if temporary is not None:
            temporary.cleanup()
    if args.json:
        config = {k: v for k, v in vars(args).items() if k != "json"}
        config.update(sentences=len(sentences), cpu=describe_cpu())
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(json_safe({"config": config, **result}), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
