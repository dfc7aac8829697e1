"""An adversarial client beside well-behaved ones, against `keras-transformer serve` on 127.0.0.1.

One server (`--signatures`, default `serving_default,n_best,translate_with_prefix`, with a fresh `--compile-cache`
of its own) answers 16 well-behaved closed-loop clients (one sentence per request, as `benchmarks/serve.py` sends
them) twice for `--seconds`: alone, then beside an adversary. The adversary runs one thread per attack in a loop,
each forming the worst request of its kind that the server's limits let through, and a few it must refuse:

* `n_best`: the largest `n_best` (`--max-n-best`) on the most instances of the longest text, and one over it;
* `prefix`: `translate_with_prefix` with prefixes of every width from 1 token to past the output's length;
* `longest`: the most instances of the longest text the body limit holds (`serving_default`);
* `instances`: one more instance than `--max-instances`, and exactly that many;
* `slow-body`: a body announced and never sent (the connection stays open until `--body-timeout-s`);
* `host`: a `Host` that is not the server's (DNS rebinding);
* `browser-type`: a browser's `text/plain` body (`Origin` header);
* `garbage`: malformed JSON, a body over `--max-body-bytes`, an unknown signature.

The adversary runs in a process of its own (as a client on another host would: its work never holds the
well-behaved clients' interpreter lock), on the same cores. `--attacks` picks some of them, to see what each costs.

Reported: the well-behaved clients' requests/s, p50 and p99 in each phase and the p99 ratio (goal <= 2x); their
errors and the adversary's statuses by attack (goal: no 5xx at all); the server's peak resident memory (VmHWM)
after the warm-up and at the end; the compiled programs the server's XLA cache holds after the warm-up and after
each phase (goal: no new one: each compiled program writes one entry); the adversary's requests per second and
CPU seconds.

Usage:
    python benchmarks/adversary.py                                  # saved_models/quickstart (run quickstart first)
    python benchmarks/adversary.py RUN --seconds 300 --json adversary.json
    python benchmarks/adversary.py RUN --compile-cache CACHE --attacks n_best,prefix  # CACHE kept for the next run
"""

import argparse
import collections
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import print_table  # noqa: E402
from serve import Server  # noqa: E402
from serve import describe_cpu  # noqa: E402
from serve import fmt  # noqa: E402
from serve import proc_status  # noqa: E402
from serve import read_sentences  # noqa: E402
from serve import run_load  # noqa: E402

DEFAULT_ARTIFACT = os.path.join("saved_models", "quickstart")
GOAL_P99 = 2.0
ATTACKS = ("n_best", "prefix", "longest", "instances", "slow-body", "host", "browser-type", "garbage")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("artifact", nargs="?", default=DEFAULT_ARTIFACT, help=f"default {DEFAULT_ARTIFACT}")
    parser.add_argument("--clients", type=int, default=16, help="well-behaved clients (default 16)")
    parser.add_argument("--seconds", type=float, default=300.0, help="measured seconds of each phase (default 300)")
    parser.add_argument("--warmup-seconds", type=float, default=5.0, help="load before each phase, not counted")
    parser.add_argument("--src", help="the well-behaved clients' sentences, one per line (default: date phrases)")
    parser.add_argument("--signatures", default="serving_default,n_best,translate_with_prefix",
                        help="the server's --signatures")
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--max-instances", type=int, default=256)
    parser.add_argument("--max-n-best", type=int, default=4)
    parser.add_argument("--max-body-bytes", type=int, default=1 << 20)
    parser.add_argument("--body-timeout-s", type=float, default=10.0)
    parser.add_argument("--max-length", type=int, default=None, help="the server's --max-length (longest output)")
    parser.add_argument("--request-timeout", type=float, default=60.0, help="the server's --timeout-s")
    parser.add_argument("--startup-timeout", type=float, default=3600.0)
    parser.add_argument("--attacks", help=f"some of the attacks, comma-separated ({', '.join(ATTACKS)}; default all)")
    parser.add_argument("--compile-cache", help="the server's --compile-cache: an existing one skips the compiling "
                        "(default: a fresh one, removed at the end)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    args.attacks = ATTACKS if args.attacks is None else tuple(args.attacks.split(","))
    unknown = sorted(set(args.attacks) - set(ATTACKS))
    if unknown:
        parser.error(f"unknown attacks {', '.join(unknown)}; the attacks are {', '.join(ATTACKS)}")
    args.batch_timeout_ms, args.steps_per_call, args.threads = 0.0, 8, None
    return args


class Adversary:
    """The attack threads; `statuses[attack]` counts the answers each got (HTTP status, or the exception's name)."""

    def __init__(self, url, args, signatures, longest_text):
        self.url, self.args, self.signatures = url, args, signatures
        self.predict = f"{url}:predict"
        host, port = url.removeprefix("http://").split("/", 1)[0].rsplit(":", 1)
        self.address = (host, int(port))
        self.longest = longest_text
        self.statuses = collections.defaultdict(collections.Counter)
        self.stop = threading.Event()
        self.threads = []

    def start(self):
        attacks = {"longest": self.longest_texts, "instances": self.most_instances, "slow-body": self.slow_body,
                   "host": self.wrong_host, "browser-type": self.browser_type, "garbage": self.garbage}
        if "n_best" in self.signatures:
            attacks["n_best"] = self.n_best
        if "translate_with_prefix" in self.signatures:
            attacks["prefix"] = self.prefixes
        for name, attack in attacks.items():
            if name not in self.args.attacks:
                continue
            thread = threading.Thread(target=self._loop, args=(name, attack), daemon=True, name=f"adversary-{name}")
            thread.start()
            self.threads.append(thread)

    def close(self):
        self.stop.set()
        for thread in self.threads:
            thread.join(self.args.request_timeout + self.args.body_timeout_s + 10)

    def _loop(self, name, attack):
        import httpx

        with httpx.Client(timeout=self.args.request_timeout + 10) as http:
            while not self.stop.is_set():
                try:
                    for status in attack(http):
                        self.statuses[name][status] += 1
                except Exception as error:  # noqa: BLE001 - counted; the attack goes on
                    self.statuses[name][type(error).__name__] += 1
                    time.sleep(0.05)

    def _post(self, http, body, **kwargs):
        return http.post(self.predict, json=body, **kwargs).status_code

    def n_best(self, http):
        count = min(self.args.max_instances, max(1, self.args.max_body_bytes // (2 * len(self.longest) + 64)))
        big = [{"text": self.longest, "n_best": self.args.max_n_best}] * count
        yield self._post(http, {"signature_name": "n_best", "instances": big})
        yield self._post(http, {"signature_name": "n_best", "instances": [{"text": "a",
                                                                          "n_best": self.args.max_n_best + 1}]})

    def prefixes(self, http):
        for width in range(1, 600, 7):
            yield self._post(http, {"signature_name": "translate_with_prefix",
                                    "instances": [{"text": self.longest, "prefix": " ".join(["x"] * width)}]})
            if self.stop.is_set():
                return

    def longest_texts(self, http):
        count = min(self.args.max_instances, max(1, self.args.max_body_bytes // (len(self.longest) + 8)))
        yield self._post(http, {"instances": [self.longest] * count})

    def most_instances(self, http):
        yield self._post(http, {"instances": ["a"] * (self.args.max_instances + 1)})
        yield self._post(http, {"instances": ["Dec 25, 2020"] * self.args.max_instances})

    def slow_body(self, http):
        with socket.create_connection(self.address, timeout=self.args.body_timeout_s + 30) as sock:
            path = self.predict.split(f"{self.address[1]}", 1)[1]
            sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {self.address[0]}:{self.address[1]}\r\nContent-Type: "
                         "application/json\r\nContent-Length: 1000\r\n\r\n{\"instances\": [".encode())
            answer = sock.recv(64).decode("latin-1")
        yield answer.split(" ")[1] if answer.startswith("HTTP/") else "no answer"

    def wrong_host(self, http):
        yield self._post(http, {"instances": ["a"]}, headers={"Host": "rebound.example"})

    def browser_type(self, http):
        yield http.post(self.predict, content=b'{"instances": ["a"]}', headers={
            "Content-Type": "text/plain", "Origin": "https://attacker.example"}).status_code

    def garbage(self, http):
        yield http.post(self.predict, content=b'{"instances": ["a"', headers={
            "Content-Type": "application/json"}).status_code
        yield http.post(self.predict, content=b"x" * (self.args.max_body_bytes + 1), headers={
            "Content-Type": "application/json"}).status_code
        yield self._post(http, {"signature_name": "classify", "instances": ["a"]})


def _adversary_main(url, args, signatures, longest, ready, stop, results):
    adversary = Adversary(url, args, signatures, longest)
    begin, cpu = time.monotonic(), time.process_time()
    adversary.start()
    ready.set()
    stop.wait()
    adversary.close()
    results.put(({name: dict(counts) for name, counts in adversary.statuses.items()}, time.process_time() - cpu,
                 time.monotonic() - begin))


class AdversaryProcess:
    """The adversary in a process of its own, as a client on another host would be: its threads' work (building
    1 MiB bodies, reading answers) never holds the well-behaved clients' interpreter lock, so their latencies are
    the server's alone. The cores are still shared. Made once its attacks run; `close()` returns its answers by
    attack, its CPU seconds and its wall seconds."""

    def __init__(self, url, args, signatures, longest):
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.stop, self.results, ready = context.Event(), context.Queue(), context.Event()
        self.process = context.Process(target=_adversary_main, name="adversary", daemon=True,
                                       args=(url, args, signatures, longest, ready, self.stop, self.results))
        self.process.start()
        if not ready.wait(300):  # its interpreter starts and imports first: the phase begins once it attacks
            raise RuntimeError("the adversary's process did not start within 300 s")

    def close(self):
        self.stop.set()
        answers = self.results.get()
        self.process.join()
        return answers


def compiled_programs(cache):
    directory = os.path.join(cache, "tensorflow")
    return len(os.listdir(directory)) if os.path.isdir(directory) else 0


def main(argv=None):
    args = parse_args(argv)
    sentences = read_sentences(args.src)
    work = tempfile.mkdtemp(prefix="kt-adversary-")
    cache = args.compile_cache or os.path.join(work, "compiled")
    server = Server("ours", args.artifact, args, os.path.join(work, "server.log"))
    server.command += ["--signatures", args.signatures, "--max-instances", str(args.max_instances),
                       "--max-n-best", str(args.max_n_best), "--max-body-bytes", str(args.max_body_bytes),
                       "--body-timeout-s", str(args.body_timeout_s), "--compile-cache", cache,
                       *(["--max-length", str(args.max_length)] if args.max_length else [])]
    print(f"CPU: {describe_cpu()}\nserver: {' '.join(server.command[3:])}", flush=True)
    try:
        programs = compiled_programs(cache)
        url = server.start(args.startup_timeout)
        print(f"ready in {server.ready_s:.1f} s (loading and warm-up)", flush=True)
        results = {"cpu": describe_cpu(), "command": server.command[3:], "ready_s": server.ready_s,
                   "compiled_before": programs,
                   "compiled_after_warm_up": compiled_programs(cache), "memory_after_warm_up": proc_status(server.pid)}
        longest = " ".join(["Dec 25, 2020 and the first of May, nineteen ninety-nine"] * 60)
        phases = {}
        for phase in ("alone", "with adversary"):
            adversary = AdversaryProcess(url, args, args.signatures.split(","), longest) if phase != "alone" else None
            print(f"{phase}: {args.clients} clients for {args.warmup_seconds:g} + {args.seconds:g} s ...", flush=True)
            row = run_load(url, sentences, args.clients, args.seconds, args.warmup_seconds, args.request_timeout,
                           server.pid)
            if adversary is not None:
                row["adversary"], row["adversary_cpu_s"], row["adversary_s"] = adversary.close()
            row.update(memory=proc_status(server.pid), compiled=compiled_programs(cache), alive=server.alive())
            phases[phase] = row
        results["phases"] = phases
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    report(results)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return 0


def report(results):
    phases = results["phases"]
    print_table(["phase", "req/s", "p50 ms", "p99 ms", "errors", "peak RSS MB", "compiled programs", "server up"],
                [[name, fmt(r["requests_per_s"], ".1f"), fmt(r["p50_ms"], ".1f"), fmt(r["p99_ms"], ".1f"),
                  r["errors"], fmt(r["memory"]["peak_rss_mb"], ".0f"), r["compiled"], r["alive"]]
                 for name, r in phases.items()])
    attacks = phases["with adversary"].get("adversary", {})
    answers = [[name, ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))]
               for name, counts in sorted(attacks.items())]
    print_table(["attack", "answers"], answers or [["(none)", "no answer"]])
    if "adversary_s" in phases["with adversary"]:
        row = phases["with adversary"]
        sent = sum(v for counts in attacks.values() for v in counts.values())
        print(f"the adversary: {sent / row['adversary_s']:.0f} requests/s, {row['adversary_cpu_s']:.0f} CPU seconds "
              f"in {row['adversary_s']:.0f} s (its own process)")
    alone, attacked = phases["alone"], phases["with adversary"]
    ratio = attacked["p99_ms"] / alone["p99_ms"] if alone["p99_ms"] else float("nan")
    server_errors = sum(v for counts in attacks.values() for k, v in counts.items() if str(k).startswith("5"))
    server_errors += sum(v for r in phases.values() for k, v in r["error_kinds"].items() if k.startswith("HTTP 5"))
    new = attacked["compiled"] - results["compiled_after_warm_up"]
    print(f"ready in {results['ready_s']:.1f} s; {results['compiled_after_warm_up']} compiled programs after the "
          f"warm-up ({results['compiled_before']} in the cache before); "
          f"peak RSS after warm-up {fmt(results['memory_after_warm_up']['peak_rss_mb'], '.0f')} MB")
    print(f"goal: well-behaved p99 within {GOAL_P99:g}x of the run alone: {ratio:.2f}x "
          f"({'met' if ratio <= GOAL_P99 else 'NOT met'}); p50 {attacked['p50_ms'] / alone['p50_ms']:.2f}x (the "
          "alone p99 moves more from run to run)")
    print(f"goal: no 5xx answer: {server_errors} ({'met' if server_errors == 0 else 'NOT met'}); server up: "
          f"{attacked['alive']}")
    print(f"goal: no compilation after the warm-up: {new} new programs ({'met' if new == 0 else 'NOT met'})")
    results["goals"] = {"p99_ratio": ratio, "server_errors": server_errors, "new_compiled": new}


if __name__ == "__main__":
    sys.exit(main())
