"""The reliability table: every bad input and fault we know of, run through the real CLI, the Python API and the
exported artifacts, each with what was expected and what happened. Writes docs/reliability.md.

    python tools/reliability.py                 # every case (about 10 minutes on 2 cores), writes the table
    python tools/reliability.py --fast          # the cases that need no trained model
    python tools/reliability.py --fast --in-process   # the same, each case in this interpreter (CI runs this)
    python tools/reliability.py --only nul      # the cases whose id contains "nul"

A case expects either a clear error or that it works. What happened is classified as:

* clear error: exit status 2, no traceback, one `error:` line (TensorFlow's start-up noise aside) that names the
  input at fault (the file, the line, the flag or the setting);
* worked: exit status 0 and the case's own check of the output passed;
* traceback: a Python traceback reached the user (must be 0);
* silent accept: a bad input that was accepted without a word (must be 0);
* work lost: after a fault, a broken artifact, or a re-run of the same command that did not finish (must be 0);
* wrong: anything else (an unclear error, a wrong output).

Exit status 1 when any case is a traceback, a silent accept, lost work or wrong.
"""

import argparse
import contextlib
import dataclasses
import gzip
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = [sys.executable, "-m", "keras_transformer.cli"]
TINY = ["--epochs", "1", "--vocab-size", "200", "--num-layers", "1", "--d-model", "32", "--num-heads", "2",
        "--d-ff", "64", "--batch-size", "32", "--max-length", "32", "--no-jit-compile", "--warmup-steps", "20"]
NOISE = re.compile(r"^([IWEF]\d{4} |WARNING: All log messages|To enable the following instructions|.*oneDNN|.*cuda|"
                   r".*cuInit|.*TF-TRT|.*absl::InitializeLog|\s*$)")
OUTCOMES = ("clear error", "worked", "traceback", "silent accept", "work lost", "wrong")


@dataclasses.dataclass
class Case:
    id: str
    area: str  # train, translate, evaluate, export, quickstart, python-api, saved-model, tflite, fault
    what: str  # the input or fault
    expect: str  # "error" or "works"
    run: object  # function(ctx) -> Result
    names: str = ""  # what a clear error must mention
    fast: bool = False  # needs no trained model


@dataclasses.dataclass
class Result:
    rc: int
    out: str = ""
    err: str = ""
    ok: bool = True  # the case's own check (for "works" cases)
    note: str = ""
    lost: bool = False


# `--in-process`: each case calls the CLI's `main()`, or runs its Python code, in this interpreter.
IN_PROCESS = False


def run_cli(args, ctx, stdin=b"", timeout=600, env=None):
    if IN_PROCESS:
        from keras_transformer import cli

        return _in_process(lambda: cli.main(list(args)), ctx, stdin, env)
    process = subprocess.run(CLI + list(args), input=stdin, capture_output=True, cwd=ctx.work, timeout=timeout,
                             env={**os.environ, "PYTHONPATH": ROOT, **(env or {})})
    return Result(process.returncode, process.stdout.decode("utf-8", "replace"),
                  process.stderr.decode("utf-8", "replace"))


def python_case(code, ctx, timeout=600):
    """Runs Python code in a fresh interpreter (the API cases); it prints `OK ...` or raises."""
    if IN_PROCESS:
        result = _in_process(lambda: exec(compile(code, "<case>", "exec"), {"__name__": "__case__"}), ctx, b"",
                             {"TF_CPP_MIN_LOG_LEVEL": "3"})
        return dataclasses.replace(result, ok="OK" in result.out, note=_last_line(result.out))
    process = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ctx.work, timeout=timeout,
                             env={**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"})
    out = process.stdout.decode("utf-8", "replace")
    err = process.stderr.decode("utf-8", "replace")
    return Result(process.returncode, out, err, ok="OK" in out, note=_last_line(out))


def _in_process(call, ctx, stdin, env):
    """`call()` as a process would run it: in `ctx.work`, with `env` set, `stdin` as its standard input and its
    output captured; `SystemExit` gives the exit status, and an exception that escapes is printed as the traceback
    a user would see (status 1). The working directory, environment, `sys.path` and standard streams are restored."""
    saved = os.getcwd(), dict(os.environ), list(sys.path), sys.stdin
    out, err = io.StringIO(), io.StringIO()
    try:
        os.chdir(ctx.work)
        os.environ.update({"PYTHONPATH": ROOT, **(env or {})})
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = call() or 0
            except SystemExit as exit_:
                rc = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
                if isinstance(exit_.code, str):
                    print(exit_.code, file=sys.stderr)
            except Exception:  # noqa: BLE001 - what reaches the user of a real process: the traceback
                traceback.print_exc()
                rc = 1
    finally:
        os.chdir(saved[0])
        os.environ.clear()
        os.environ.update(saved[1])
        sys.path[:] = saved[2]
        sys.stdin = saved[3]
    return Result(rc, out.getvalue(), err.getvalue())


def meaningful_lines(text):
    return [line for line in text.splitlines() if not NOISE.match(line)]


def _last_line(text):
    lines = meaningful_lines(text)
    return lines[-1].strip() if lines else ""


def classify(case, result):
    text = result.out + result.err
    if "Traceback (most recent call last)" in text:
        return "traceback", _last_line(result.err)
    if result.lost:
        return "work lost", result.note
    if case.expect == "error":
        message = next((line for line in reversed(meaningful_lines(result.err)) if "error:" in line), "")
        if result.rc == 0:
            return "silent accept", result.note or "exit 0"
        if result.rc == 2 and message and case.names.lower() in message.lower():
            return "clear error", message.strip()
        return "wrong", f"exit {result.rc}: {message or _last_line(result.err)}"
    if result.rc == 0 and result.ok:
        return "worked", result.note
    return "wrong", f"exit {result.rc}: {result.note or _last_line(result.err)}"


# ---------------------------------------------------------------------------------------------------------------
# Shared material: a small corpus, a trained run, its exports (built once, on first use).


class Context:
    def __init__(self, work):
        self.work = work
        self._run = self._saved_model = self._tflite = None
        pairs = _corpus_pairs()
        self.src = self.write("corpus/train.src", "\n".join(s for s, _ in pairs) + "\n")
        self.tgt = self.write("corpus/train.tgt", "\n".join(t for _, t in pairs) + "\n")
        self.test_src = self.write("corpus/test.src", "\n".join(s for s, _ in pairs[:20]) + "\n")
        self.test_ref = self.write("corpus/test.ref", "\n".join(t for _, t in pairs[:20]) + "\n")

    def path(self, name):
        return os.path.join(self.work, name)

    def write(self, name, content):
        path = self.path(name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content.encode("utf-8") if isinstance(content, str) else content)
        return path

    def fresh(self, name):
        path = self.path(name)
        shutil.rmtree(path, ignore_errors=True)
        return path

    @property
    def run(self):
        if self._run is None:
            self._run = self.fresh("runs/main")
            result = run_cli(["train", "--src", self.src, "--tgt", self.tgt, "--output", self._run, *TINY], self)
            if result.rc:
                raise RuntimeError(f"could not train the shared run: {result.err[-2000:]}")
        return self._run

    @property
    def saved_model(self):
        if self._saved_model is None:
            self._saved_model = self.path("exports/main")
            self._tflite = self.path("exports/main.tflite")
            result = run_cli(["export", self.run, "--saved-model", self._saved_model, "--tflite", self._tflite], self)
            if result.rc:
                raise RuntimeError(f"could not export the shared run: {result.err[-2000:]}")
        return self._saved_model

    @property
    def tflite(self):
        self.saved_model  # noqa: B018 - exports both
        return self._tflite

    def copy_run(self, name):
        path = self.fresh(name)
        shutil.copytree(self.run, path)
        return path


def _corpus_pairs():
    sys.path.insert(0, ROOT)
    from keras_transformer.data.synthetic import make_synthetic_corpus

    corpus = make_synthetic_corpus(400, seed=3)
    return list(zip(corpus.sources, corpus.targets))


# ---------------------------------------------------------------------------------------------------------------
# Cases.

CASES = []


def case(id, area, what, expect, names="", fast=False):
    def register(function):
        CASES.append(Case(id, area, what, expect, function, names, fast))
        return function

    return register


def train_args(ctx, output, *extra, src=None, tgt=None):
    return ["train", "--src", src or ctx.src, "--tgt", tgt or ctx.tgt, "--output", output, *TINY, *extra]


def _setting_case(id, flags, names, what, area="train"):
    @case(id, area, what, "error", names=names, fast=True)
    def run(ctx):
        if area == "quickstart":
            return run_cli(["quickstart", "--output", ctx.fresh(f"runs/{id}"), *flags], ctx)
        return run_cli(train_args(ctx, ctx.fresh(f"runs/{id}"), *flags), ctx)


_setting_case("neg-layers", ["--num-layers", "-1"], "num_layers", "`--num-layers -1`")
_setting_case("tiny-vocab", ["--vocab-size", "3"], "vocab_size", "`--vocab-size 3` (fewer than the characters)")
_setting_case("dropout-1.5", ["--dropout", "1.5"], "dropout", "`--dropout 1.5`")
_setting_case("lr-nan", ["--lr-scale", "nan"], "lr_scale", "`--lr-scale nan`")
_setting_case("heads-divide", ["--d-model", "100", "--num-heads", "3"], "d_model", "`--d-model 100 --num-heads 3`")
_setting_case("zero-epochs", ["--epochs", "0"], "epochs", "`--epochs 0`")
_setting_case("batch-abc", ["--batch-size", "abc"], "--batch-size", "`--batch-size abc`")
_setting_case("average-more", ["--epochs", "2", "--average-last", "5"], "average_last",
              "`--average-last 5` with `--epochs 2`")
_setting_case("budget-small", ["--token-budget", "10"], "token_budget", "`--token-budget 10` below `--max-length`")
_setting_case("max-minutes-both", ["--max-minutes", "10", "--no-max-minutes"], "--no-max-minutes",
              "`--max-minutes 10` with `--no-max-minutes`")
_setting_case("quick-num-train", ["--num-train", "0"], "--num-train", "`quickstart --num-train 0`", area="quickstart")
_setting_case("quick-dropout", ["--dropout", "2"], "dropout", "`quickstart --dropout 2`", area="quickstart")


@case("config-unknown", "train", "config file with an unknown setting (`layers: 3`)", "error", "layers", fast=True)
def _(ctx):
    config = ctx.write("configs/unknown.yaml", "layers: 3\n")
    return run_cli(train_args(ctx, ctx.fresh("runs/config-unknown"), "--config", config), ctx)


@case("config-bad-json", "train", "config file that is not JSON", "error", "bad.json", fast=True)
def _(ctx):
    config = ctx.write("configs/bad.json", "{epochs: 3,\n")
    return run_cli(train_args(ctx, ctx.fresh("runs/config-bad"), "--config", config), ctx)


@case("config-missing", "train", "`--config` naming a missing file", "error", "nothere.yaml", fast=True)
def _(ctx):
    return run_cli(train_args(ctx, ctx.fresh("runs/config-missing"), "--config", ctx.path("nothere.yaml")), ctx)


@case("config-string", "train", "config value of the wrong type (`epochs: ten`)", "error", "epochs", fast=True)
def _(ctx):
    config = ctx.write("configs/string.yaml", "epochs: ten\n")
    return run_cli(train_args(ctx, ctx.fresh("runs/config-string"), "--config", config), ctx)


def _corpus_error_case(id, what, src_bytes, names, tgt_bytes=None):
    @case(id, "train", what, "error", names=names, fast=True)
    def run(ctx):
        src = ctx.write(f"bad/{id}.src", src_bytes)
        tgt = ctx.write(f"bad/{id}.tgt", tgt_bytes if tgt_bytes is not None else b"one\ntwo\nthree\n")
        return run_cli(train_args(ctx, ctx.fresh(f"runs/{id}"), src=src, tgt=tgt), ctx)


_corpus_error_case("utf8-invalid", "corpus line with invalid UTF-8 (byte 0xff)", b"eins\nzw\xffei\ndrei\n",
                   "utf8-invalid.src:2")
_corpus_error_case("lone-surrogate", "corpus line with an encoded lone surrogate (ED A0 80)",
                   b"eins\nzwei \xed\xa0\x80\ndrei\n", "lone-surrogate.src:2")
_corpus_error_case("line-counts", "source and target with different line counts", b"eins\nzwei\n",
                   "line-counts.src:3")
_corpus_error_case("empty-file", "empty corpus file", b"", "empty-file.src")
_corpus_error_case("truncated-gzip", "truncated gzip corpus (cut in half)",
                   gzip.compress(b"".join(b"satz %d\n" % i for i in range(3000)))[:3000], "truncated-gzip.src",
                   tgt_bytes=b"".join(b"line %d\n" % i for i in range(3000)))
_corpus_error_case("blank-only", "corpus whose lines are all blank or whitespace", b"\n   \n\t\n", "blank",
                   tgt_bytes=b"a\nb\nc\n")


@case("missing-corpus", "train", "`--src` naming a missing file", "error", "nothere.src", fast=True)
def _(ctx):
    return run_cli(train_args(ctx, ctx.fresh("runs/missing"), src=ctx.path("nothere.src")), ctx)


@case("output-file", "train", "`--output` naming an existing file", "error", "output-file.txt", fast=True)
def _(ctx):
    path = ctx.write("output-file.txt", "not a directory\n")
    return run_cli(train_args(ctx, path), ctx)


@case("output-foreign", "train", "`--output` naming a non-empty directory that is not a run", "error",
      "not a keras-transformer run directory", fast=True)
def _(ctx):
    ctx.write("foreign/notes.txt", "my notes\n")
    result = run_cli(train_args(ctx, ctx.path("foreign")), ctx)
    result.lost = sorted(os.listdir(ctx.path("foreign"))) != ["notes.txt"]
    return result


@case("nul-byte", "train", "NUL and other control characters in corpus lines (once a crash in the vocabulary learner)",
      "works")
def _(ctx):
    lines = open(ctx.src, encoding="utf-8").read().splitlines()
    lines[1] = "ein\x00null " + lines[1]
    lines[5] = lines[5] + " \x01\x7f"
    src = ctx.write("odd/nul.src", "\n".join(lines) + "\n")
    result = run_cli(train_args(ctx, ctx.fresh("runs/nul"), src=src), ctx)
    vocab = open(ctx.path("runs/nul/tokenizers/source/vocab.txt"), encoding="utf-8").read() if not result.rc else ""
    result.ok = "\x00" not in vocab and "\x01" not in vocab
    result.note = "trained; words with control characters are left out of the vocabulary ([UNK])"
    return result


@case("bom-crlf", "train", "UTF-8 BOM and CRLF line ends in the corpus", "works")
def _(ctx):
    src = ctx.write("odd/crlf.src", b"\xef\xbb\xbf" + open(ctx.src, "rb").read().replace(b"\n", b"\r\n"))
    result = run_cli(train_args(ctx, ctx.fresh("runs/crlf"), src=src), ctx)
    vocab = open(ctx.path("runs/crlf/tokenizers/source/vocab.txt"), encoding="utf-8").read() if not result.rc else ""
    result.ok = "\ufeff" not in vocab and "\r" not in vocab
    result.note = "trained; BOM and CR removed (no such token in the vocabulary)"
    return result


@case("long-line", "train", "a 100,000-character line in the corpus", "works")
def _(ctx):
    lines = open(ctx.src, encoding="utf-8").read().splitlines()
    lines[2] = "x" * 50_000 + " " + "y" * 49_999
    src = ctx.write("odd/long.src", "\n".join(lines) + "\n")
    start = time.time()
    result = run_cli(train_args(ctx, ctx.fresh("runs/long"), src=src), ctx, timeout=300)
    result.note = f"trained in {time.time() - start:.0f} s (long words tokenize as [UNK])"
    return result


@case("over-max-length", "train", "a pair of 200 words, over `--max-length`", "works")
def _(ctx):
    lines = open(ctx.src, encoding="utf-8").read().splitlines()
    lines[2] = " ".join(["wort"] * 200)
    src = ctx.write("odd/over.src", "\n".join(lines) + "\n")
    result = run_cli(train_args(ctx, ctx.fresh("runs/over"), src=src), ctx)
    config = ctx.path("runs/over/config.json")
    recorded = json.load(open(config))["data"]["skipped_over_max_length"] if not result.rc else None
    result.ok = recorded == 1 and "Skipping 1 of" in result.out
    result.note = (_first_match(result.out, r"Skipping 1 of .*\(") or "no count printed").rstrip(" (") + (
        f"; config.json records {recorded}")
    return result


@case("no-newline", "train", "a source file whose last 8 MiB hold no newline", "works")
def _(ctx):
    data = open(ctx.src, "rb").read()
    src = ctx.write("odd/no-newline.src", data + b"w " * (4 << 20))
    tgt = ctx.write("odd/no-newline.tgt", open(ctx.tgt, "rb").read() + b"one more\n")
    result = run_cli(train_args(ctx, ctx.fresh("runs/no-newline"), src=src, tgt=tgt), ctx)
    result.ok = "1 too long" in result.out
    result.note = (_first_match(result.out, r"\(skipping.*") or "no count of skipped pairs printed") + (
        "; the line is read in 1 MiB pieces, never whole")
    return result


@case("blank-lines", "train", "empty and whitespace-only lines among the pairs", "works")
def _(ctx):
    lines = open(ctx.src, encoding="utf-8").read().splitlines()
    lines[3], lines[7] = "", " \t "
    src = ctx.write("odd/blank.src", "\n".join(lines) + "\n")
    result = run_cli(train_args(ctx, ctx.fresh("runs/blank"), src=src), ctx)
    result.ok = "2 with an empty side" in result.out
    result.note = _first_match(result.out, r"\(skipping.*") or "no count of skipped pairs printed"
    return result


def _first_match(text, pattern):
    match = re.search(pattern, text)
    return match.group(0).strip() if match else ""


@case("finished-rerun", "train", "`train` again on a finished run, without `--overwrite`", "error", "--overwrite")
def _(ctx):
    run = ctx.copy_run("runs/finished")
    before = os.path.getmtime(os.path.join(run, "model.keras"))
    result = run_cli(train_args(ctx, run), ctx)
    result.lost = os.path.getmtime(os.path.join(run, "model.keras")) != before
    return result


@case("overwrite", "train", "`train --overwrite` on a finished run", "works")
def _(ctx):
    run = ctx.copy_run("runs/overwrite")
    result = run_cli(train_args(ctx, run, "--overwrite"), ctx)
    result.ok = os.path.exists(os.path.join(run, "model.keras"))
    result.note = "trained again from scratch"
    return result


@case("resume-other-settings", "train", "resuming a started run with another `--num-layers`", "error", "num_layers")
def _(ctx):
    run = ctx.copy_run("runs/other-settings")
    os.remove(os.path.join(run, "model.keras"))  # a started, unfinished run
    return run_cli(train_args(ctx, run, "--num-layers", "2"), ctx)


@case("locked", "train", "a second `train` on an output a live run holds", "error", "is being written by")
def _(ctx):
    output = ctx.fresh("runs/locked")
    first = subprocess.Popen(CLI + train_args(ctx, output, "--epochs", "50"), cwd=ctx.work, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": ROOT})
    try:
        _wait_for(lambda: os.path.exists(os.path.join(output, "config.json")), 120)
        result = run_cli(train_args(ctx, output, "--epochs", "50"), ctx)
        result.lost = first.poll() is not None  # the live run must go on
    finally:
        first.kill()
        first.wait()
    return result


@case("nan-loss", "train", "a loss that becomes NaN (`--lr-scale 1e30`)", "error", "loss became")
def _(ctx):
    output = ctx.fresh("runs/nan")
    result = run_cli(train_args(ctx, output, "--lr-scale", "1e30", "--epochs", "3", "--checkpoint-every", "2"), ctx)
    result.lost = os.path.exists(os.path.join(output, "model.keras"))  # NaN weights must not be saved
    state = os.path.join(output, "checkpoint", "checkpoint.json")
    result.note = "last good checkpoint kept" if os.path.exists(state) else "no checkpoint yet"
    return result


@case("same-seed", "train", "the same command twice (same seed, same machine)", "works")
def _(ctx):
    losses = []
    for name in ("seed-a", "seed-b"):
        output = ctx.fresh(f"runs/{name}")
        result = run_cli(train_args(ctx, output, "--epochs", "2"), ctx)
        if result.rc:
            return result
        with open(os.path.join(output, "history.json"), encoding="utf-8") as f:
            losses.append([record["loss"] for record in json.load(f)["epochs"]])
    result.ok = losses[0] == losses[1]
    result.note = f"losses {losses[0]} and {losses[1]}"
    return result


@case("damaged-model", "translate", "a run whose model.keras is damaged (truncated)", "error", "model.keras")
def _(ctx):
    run = ctx.copy_run("runs/damaged-model")
    path = os.path.join(run, "model.keras")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    return run_cli(["translate", run], ctx, stdin=b"hello\n")


@case("damaged-vocab", "translate", "a run whose tokenizer vocab.txt is truncated", "error", "vocab.txt")
def _(ctx):
    run = ctx.copy_run("runs/damaged-vocab")
    path = os.path.join(run, "tokenizers", "source", "vocab.txt")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    return run_cli(["translate", run], ctx, stdin=b"hello\n")


@case("damaged-config", "translate", "a run whose config.json is not JSON", "error", "config.json")
def _(ctx):
    run = ctx.copy_run("runs/damaged-config")
    ctx.write(os.path.join(run, "config.json"), "{\"model\": ")
    return run_cli(["translate", run], ctx, stdin=b"hello\n")


@case("damaged-checkpoint", "train", "resuming from a checkpoint whose weights file is damaged", "error",
      ".weights.h5")
def _(ctx):
    output = ctx.fresh("runs/damaged-checkpoint")
    args = train_args(ctx, output, "--epochs", "3", "--checkpoint-every", "3")
    process = subprocess.Popen(CLI + args, cwd=ctx.work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "PYTHONPATH": ROOT})
    state_path = os.path.join(output, "checkpoint", "checkpoint.json")
    try:
        _wait_for(lambda: os.path.exists(state_path) or process.poll() is not None, 300)
    finally:
        process.kill()
        process.wait()
    state = json.load(open(state_path, encoding="utf-8"))
    weights = os.path.join(output, "checkpoint", state["weights"])
    with open(weights, "r+b") as f:
        f.truncate(os.path.getsize(weights) // 3)
    return run_cli(args, ctx)


@case("translate-missing", "translate", "`translate` on a directory that does not exist", "error", "nothere",
      fast=True)
def _(ctx):
    return run_cli(["translate", ctx.path("nothere")], ctx, stdin=b"hello\n")


@case("translate-beam-0", "translate", "`translate --beam-size 0`", "error", "--beam-size", fast=True)
def _(ctx):
    return run_cli(["translate", ctx.path("nothere"), "--beam-size", "0"], ctx, stdin=b"hello\n")


def _stdin_case(id, what, data, expect, names="", target="run", lines=None):
    @case(id, "translate" if target == "run" else "saved-model", what, expect, names=names)
    def run(ctx):
        model = ctx.run if target == "run" else ctx.saved_model
        result = run_cli(["translate", model], ctx, stdin=data)
        if expect == "works":
            got = result.out.split("\n")[:-1] if result.out else []
            result.ok = len(got) == lines
            result.note = f"{len(got)} output lines for {lines} input lines"
        return result


_stdin_case("stdin-utf8", "stdin with invalid UTF-8 on line 2", b"one\ntw\xffo\n", "error", "<stdin>:2")
_stdin_case("stdin-control", "stdin with NUL, BEL and DEL characters", b"a\x00b\nc\x07d\x7f\n", "works", lines=2)
_stdin_case("stdin-empty", "empty stdin", b"", "works", lines=0)
_stdin_case("stdin-blank", "stdin with empty and whitespace-only lines", b"one\n\n \t \ntwo\n", "works", lines=4)
_stdin_case("stdin-long", "a 100,000-character line on stdin", b"z" * 100_000 + b"\n", "works", lines=1)
_stdin_case("stdin-separators", "stdin with a BOM, CRLF ends, a form feed and U+2028 inside lines",
            b"\xef\xbb\xbfone\r\ntw\x0co\r\nthree\xe2\x80\xa8four\n", "works", lines=3)
_stdin_case("saved-model-stdin-utf8", "`translate SAVED_MODEL` with invalid UTF-8 on stdin", b"ok\n\xc3\x28\n",
            "error", "<stdin>:2", target="saved-model")
_stdin_case("saved-model-stdin-odd", "`translate SAVED_MODEL` with NUL, blank and 100k-character lines",
            b"a\x00b\n\n" + b"q" * 100_000 + b"\n", "works", target="saved-model", lines=3)


@case("evaluate-ref-short", "evaluate", "`--ref` with fewer lines than `--src`", "error", "short.ref", fast=True)
def _(ctx):
    ref = ctx.write("eval/short.ref", "one\n")
    return run_cli(["evaluate", ctx.path("nothere"), "--src", ctx.test_src, "--ref", ref], ctx)


@case("evaluate-utf8", "evaluate", "`--src` with invalid UTF-8", "error", "bad.src:1", fast=True)
def _(ctx):
    src = ctx.write("eval/bad.src", b"\xff\xfe\n")
    ref = ctx.write("eval/one.ref", b"one\n")
    return run_cli(["evaluate", ctx.path("nothere"), "--src", src, "--ref", ref], ctx)


@case("evaluate-blank", "evaluate", "evaluation files with blank lines", "works")
def _(ctx):
    src_lines = open(ctx.test_src, encoding="utf-8").read().splitlines()
    src_lines[0] = ""
    src = ctx.write("eval/blank.src", "\n".join(src_lines) + "\n")
    result = run_cli(["evaluate", ctx.run, "--src", src, "--ref", ctx.test_ref], ctx)
    result.ok = "skipping 1 pair" in result.err and "BLEU" in result.out
    result.note = _first_match(result.err, r"skipping.*")
    return result


@case("export-exists", "export", "`export` onto an existing SavedModel without `--overwrite`", "error",
      "--overwrite")
def _(ctx):
    return run_cli(["export", ctx.run, "--saved-model", ctx.saved_model], ctx)


@case("export-tflite-exists", "export", "`export --tflite` onto an existing file without `--overwrite`", "error",
      "--overwrite")
def _(ctx):
    return run_cli(["export", ctx.run, "--saved-model", ctx.fresh("exports/new"), "--tflite", ctx.tflite], ctx)


@case("export-overwrite", "export", "`export --overwrite` onto an existing SavedModel", "works")
def _(ctx):
    target = ctx.fresh("exports/again")
    shutil.copytree(ctx.saved_model, target)
    result = run_cli(["export", ctx.run, "--saved-model", target, "--overwrite"], ctx)
    result.ok = os.path.exists(os.path.join(target, "saved_model.pb")) and not [
        n for n in os.listdir(ctx.path("exports")) if n.startswith((".tmp-", ".old-"))]
    result.note = "replaced whole; no temporary left"
    return result


@case("export-not-run", "export", "`export` of a directory that is not a run", "error", "not a keras-transformer",
      fast=True)
def _(ctx):
    os.makedirs(ctx.path("empty-dir"), exist_ok=True)
    return run_cli(["export", ctx.path("empty-dir"), "--saved-model", ctx.fresh("exports/never")], ctx)


@case("damaged-saved-model", "saved-model", "a SavedModel whose saved_model.pb is truncated", "error",
      "saved_model")
def _(ctx):
    target = ctx.fresh("exports/damaged")
    shutil.copytree(ctx.saved_model, target)
    path = os.path.join(target, "saved_model.pb")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    return run_cli(["translate", target], ctx, stdin=b"hello\n")


_ARTIFACT_INPUTS = ("[b'', b'   ', b'a\\x00b', b'\\xff\\xfe bad', b'\\xed\\xa0\\x80', b'x' * 100000, "
                    "'\\ufeff\\u2028 caf\\u00e9 \\U0001F600'.encode('utf-8')]")


@case("saved-model-odd-strings", "saved-model", "serving_default on '', spaces, NUL, invalid UTF-8, a lone "
      "surrogate, 100k characters, BOM/U+2028/emoji (without keras_transformer)", "works")
def _(ctx):
    code = f"""
import sys
sys.path = [p for p in sys.path if p not in ('', {ROOT!r})]
import tensorflow as tf, tensorflow_text
inputs = {_ARTIFACT_INPUTS}
out = tf.saved_model.load({ctx.saved_model!r}).signatures['serving_default'](text=tf.constant(inputs))['translation']
assert out.shape == (len(inputs),), out.shape
empty = tf.saved_model.load({ctx.saved_model!r}).signatures['serving_default'](text=tf.constant([], tf.string))
assert empty['translation'].shape == (0,)
print('OK', len(inputs), 'inputs -> as many outputs; an empty batch -> an empty batch')
"""
    return python_case(code, ctx)


@case("tflite-odd-strings", "tflite", "the TFLite model on '', spaces, NUL, invalid UTF-8, a lone surrogate, "
      "100k characters, BOM/U+2028/emoji, one per call", "works")
def _(ctx):
    code = f"""
import sys
sys.path = [p for p in sys.path if p not in ('', {ROOT!r})]
import numpy as np, tensorflow_text
from tensorflow.lite.python.interpreter import InterpreterWithCustomOps
interpreter = InterpreterWithCustomOps(
    custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS, model_path={ctx.tflite!r})
runner = interpreter.get_signature_runner('serving_default')
inputs = {_ARTIFACT_INPUTS}
outs = [runner(text=np.array([t], dtype=object))['translation'] for t in inputs]
assert all(o.shape == (1,) for o in outs)
print('OK', len(outs), 'inputs -> one output each')
"""
    return python_case(code, ctx)


@case("api-config", "python-api", "`TransformerConfig(num_layers=0)`", "error", "num_layers", fast=True)
def _(ctx):
    return _api_error(ctx, "from keras_transformer.models import TransformerConfig\n"
                           "TransformerConfig(src_vocab_size=100, tgt_vocab_size=100, num_layers=0)")


@case("api-train-type", "python-api", "`train(..., training_settings={'epochs': '3'})`", "error", "epochs", fast=True)
def _(ctx):
    return _api_error(ctx, "from keras_transformer.training.trainer import train\n"
                           f"train(([\"a\"], [\"b\"]), {ctx.path('runs/api')!r}, training_settings={{'epochs': '3'}})")


@case("api-tokenizer-damaged", "python-api", "`SubwordTokenizer.load` of a binary-garbage vocab.txt", "error",
      "vocab.txt", fast=True)
def _(ctx):
    folder = ctx.fresh("tok-damaged")
    ctx.write("tok-damaged/vocab.txt", b"[PAD]\n\xff\xfe\x00garbage\n")
    ctx.write("tok-damaged/tokenizer.json", json.dumps({"format": "keras_transformer.SubwordTokenizer",
                                                        "vocab_size": 2}))
    return _api_error(ctx, "from keras_transformer.data.tokenizer import SubwordTokenizer\n"
                           f"SubwordTokenizer.load({folder!r})")


def _api_error(ctx, code):
    """A Python API call that must raise a ValueError whose message names the input; printed as `error:`."""
    wrapped = ("import sys\ntry:\n" + "".join(f"    {line}\n" for line in code.splitlines())
               + "except ValueError as error:\n    print('error:', type(error).__name__, error, file=sys.stderr)\n"
               "    sys.exit(2)\n")
    return python_case(wrapped, ctx)


@case("api-nan", "python-api", "`train()` where the weights become NaN mid-run (a callback poisons them)",
      "error", "became")
def _(ctx):
    output = ctx.fresh("runs/api-nan")
    code = f"""
import os, numpy as np, keras
from keras_transformer.training.trainer import train
from keras_transformer.data.synthetic import make_synthetic_corpus

class Poison(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == 5:
            self.model.trainable_variables[0].assign(np.full(self.model.trainable_variables[0].shape, np.nan))

corpus = make_synthetic_corpus(400, seed=3)
try:
    train(corpus, {output!r}, model_settings=dict(num_layers=1, d_model=32, num_heads=2, d_ff=64, max_length=32),
          training_settings=dict(epochs=2, vocab_size=200, batch_size=32, jit_compile=False, checkpoint_every=2),
          verbose=0, callbacks=[Poison()])
except ValueError as error:
    import sys
    print('error:', error, file=sys.stderr)
    kept = os.path.exists(os.path.join({output!r}, 'checkpoint', 'checkpoint.json'))
    saved = os.path.exists(os.path.join({output!r}, 'model.keras'))
    sys.exit(2 if kept and not saved else 3)
"""
    return python_case(code, ctx)


@case("quickstart-finished", "quickstart", "`quickstart` again on its finished output", "error", "--overwrite")
def _(ctx):
    output = ctx.fresh("runs/quick")
    first = run_cli(["quickstart", "--output", output, "--num-train", "300", "--num-heldout", "20", *TINY], ctx)
    if first.rc:
        return first
    return run_cli(["quickstart", "--output", output, "--num-train", "300", "--num-heldout", "20", *TINY], ctx)


# ---------------------------------------------------------------------------------------------------------------
# Faults: kill -9 at a moment of the run, then the same command again.


def _wait_for(condition, timeout, interval=0.001):
    end = time.time() + timeout
    while time.time() < end:
        if condition():
            return True
        time.sleep(interval)
    return False


def _temporaries(*folders):
    found = []
    for folder in folders:
        if os.path.isdir(folder):
            found += [os.path.join(folder, n) for n in os.listdir(folder) if n.startswith((".tmp-", ".old-"))]
    return found


def _check_run_files(output):
    """Every artifact that exists in a run directory loads; returns a list of problems."""
    problems = []
    code = f"""
import json, os, sys, keras
import keras_transformer.models  # registers the layers for loading
from keras_transformer.data.tokenizer import SubwordTokenizer
run = {output!r}
for name in ("model.keras", "best.keras", "last.keras"):
    path = os.path.join(run, name)
    if os.path.exists(path):
        keras.saving.load_model(path, compile=False)
for side in ("source", "target"):
    path = os.path.join(run, "tokenizers", side)
    if os.path.isdir(path):
        SubwordTokenizer.load(path)
for name in ("config.json", "history.json", "checkpoint/checkpoint.json"):
    path = os.path.join(run, name)
    if os.path.exists(path):
        json.load(open(path))
print("OK")
"""
    process = subprocess.run([sys.executable, "-c", code], capture_output=True, env={
        **os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"})
    if b"OK" not in process.stdout:
        problems.append("an artifact does not load: " + _last_line(process.stderr.decode("utf-8", "replace")))
    return problems


def _fault_case(id, moment, args_fn, trigger, check_dirs):
    @case(f"kill-{id}", "fault", f"`kill -9` {moment}, then the same command", "works")
    def run(ctx):
        args, output = args_fn(ctx)
        process = subprocess.Popen(CLI + args, cwd=ctx.work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYTHONPATH": ROOT, "PYTHONUNBUFFERED": "1"})
        log = []
        try:
            hit = trigger(ctx, output, process, log)
        finally:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
            process.wait()
        if not hit:
            return Result(1, note=f"the moment never came (exit {process.returncode})", ok=False)
        problems = _check_run_files(output) if id != "export" else []
        again = run_cli(args, ctx)
        after = _check_run_files(output) if id != "export" else []
        finished = again.rc == 0 and (os.path.exists(os.path.join(output, "model.keras")) if id != "export"
                                      else os.path.exists(os.path.join(output, "saved_model.pb")))
        left = _temporaries(*[d(ctx, output) for d in check_dirs])
        again.lost = bool(problems or after or not finished or left)
        again.note = ("killed " + moment + "; the re-run finished, every artifact loads, no temporary left"
                      if not again.lost else "; ".join(problems + after + [f"left: {left}"] +
                                                        ([f"re-run exit {again.rc}"] if not finished else [])))
        return again


def _train_fault_args(name, *extra):
    def args(ctx):
        output = ctx.fresh(f"runs/kill-{name}")
        return train_args(ctx, output, "--epochs", "3", "--checkpoint-every", "3", *extra), output

    return args


def _stdout_trigger(text):
    def trigger(ctx, output, process, log):
        for line in process.stdout:
            log.append(line)
            if text.encode() in line:
                return True
        return False

    return trigger


def _file_trigger(folder_fn, predicate, timeout=300):
    def trigger(ctx, output, process, log):
        def seen():
            folder = folder_fn(ctx, output)
            return os.path.isdir(folder) and any(predicate(n) for n in os.listdir(folder))

        # stdout is drained in a thread so that the child never blocks on a full pipe.
        import threading

        threading.Thread(target=lambda: [log.append(line) for line in process.stdout], daemon=True).start()
        return _wait_for(lambda: seen() or process.poll() is not None, timeout) and seen()

    return trigger


_run_dir = lambda ctx, output: output  # noqa: E731
_checkpoint_dir = lambda ctx, output: os.path.join(output, "checkpoint")  # noqa: E731

_fault_case("tokenizers", "while the tokenizers are learned", _train_fault_args("tokenizers"),
            _stdout_trigger("Learning a WordPiece vocabulary"), [_run_dir])
_fault_case("mid-epoch", "mid-epoch (after a mid-epoch checkpoint)", _train_fault_args("mid-epoch"),
            _file_trigger(_checkpoint_dir, lambda n: n == "checkpoint.json"), [_run_dir, _checkpoint_dir])
_fault_case("checkpoint-save", "while a checkpoint is being written", _train_fault_args("checkpoint-save"),
            _file_trigger(_checkpoint_dir, lambda n: n.startswith(".tmp-")), [_run_dir, _checkpoint_dir])
_fault_case("final-save", "while the final model.keras is being written", _train_fault_args("final-save"),
            _file_trigger(_run_dir, lambda n: n.startswith(".tmp-") and n.endswith("model.keras")), [_run_dir])


def _export_args(ctx):
    output = ctx.fresh("exports/killed")
    return ["export", ctx.run, "--saved-model", output], output


_fault_case("export", "while the SavedModel is being written", _export_args,
            _file_trigger(lambda ctx, output: os.path.dirname(output),
                          lambda n: n.startswith(".tmp-") and n.endswith("killed")),
            [lambda ctx, output: os.path.dirname(output)])


# ---------------------------------------------------------------------------------------------------------------


def _machine_neutral(text):
    """A row's detail without what belongs to the machine and the moment it ran on (a lock's host, process and
    start time), so that the table reads the same wherever it is written."""
    return re.sub(r"by process \d+ on \S+ \(since [\d-]+ [\d:]+\)", "by process PID on HOST (since TIME)", text)


def write_table(rows, path, seconds, selection):
    counts = {outcome: sum(1 for r in rows if r["outcome"] == outcome) for outcome in OUTCOMES}
    lines = [
        "# Reliability: every bad input and fault, and what it gets",
        "",
        "Written by `python tools/reliability.py` (every case through the real `keras-transformer` command, the",
        "Python API or the exported artifacts, each in a fresh process). CI runs the fast part",
        "(`tests/test_reliability.py`: the cases that need no trained model, in one interpreter with `--in-process`,",
        "and one of them through a fresh process as well). Classification: see the script's",
        "docstring; a clear error is exit status 2 with one `error:` line naming the input at fault.",
        "",
        f"Cases: **{len(rows)}**{'' if selection == 'all' else f' ({selection})'} in {seconds / 60:.1f} min: "
        f"clear errors **{counts['clear error']}**, worked **{counts['worked']}**, tracebacks "
        f"**{counts['traceback']}**, bad input accepted without a word **{counts['silent accept']}**, work lost "
        f"**{counts['work lost']}**, wrong **{counts['wrong']}**.",
        "",
        "| # | case | command | input or fault | expected | observed | what the user sees |",
        "|---|---|---|---|---|---|---|",
    ]
    for number, r in enumerate(rows, 1):
        seen = _machine_neutral(r["detail"]).replace("|", "\\|").replace("\n", " ")
        seen = re.sub(r"/tmp/[^\s:'\"]*/(?=[^/\s]*)", "", seen)[:240]
        lines.append(f"| {number} | `{r['id']}` | {r['area']} | {r['what']} | "
                     f"{'clear error' if r['expect'] == 'error' else 'works'} | {r['outcome']} | {seen} |")
    lines += ["", "Documented behaviour these rows rely on:", "",
              "* Text is UTF-8. Invalid UTF-8 (including an encoded lone surrogate) in a corpus, an evaluation file "
              "or stdin is an error naming the file (or `<stdin>`), the line and the byte. The exported SavedModel "
              "and TFLite model take any bytes: words that are not valid UTF-8 become `[UNK]`.",
              "* A UTF-8 byte-order mark at the start of a file and the `\\r` of CRLF line ends are removed; lines are "
              "split on `\\n` only (a form feed or U+2028 inside a line stays inside it).",
              "* Control characters (NUL and the other Unicode `Cc` that are not whitespace) never enter the "
              "vocabulary: a word holding one is `[UNK]`, in training and translation alike.",
              "* Pairs with a blank side are skipped and counted (training), or skipped with a note (evaluate); "
              "on stdin a blank line gives an empty translation line.",
              "* Long lines: a word over 100 bytes is `[UNK]`. In training a pair whose source or target does not "
              "fit `--max-length` tokens is skipped, not cut, and counted (in the log and in `config.json`'s "
              "`data`); so is a pair with a line over 1 MiB, which is read in bounded pieces, never whole. "
              "Translation cuts a long input at the model's `max_length`.",
              ""] + HARDENING
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    return counts


HARDENING = [
    "## Hardening: the server, imports, artifacts and resumed runs, before and after",
    "",
    "Each case with what it did before and what it does now, and the test that checks it (`python -m pytest "
    "-q TEST`). The server's case as a whole, an adversarial client beside well-behaved ones, is measured by "
    "`python benchmarks/adversary.py RUN` (docs/benchmarks.md); resumed runs as a whole, killed at random moments and "
    "compared with uninterrupted ones, by `python tools/kill_resume.py`.",
    "",
    "| case | before | after | checked by |",
    "|---|---|---|---|",
    "| `n_best` 64 on 32 instances | one batch of 2,048 beam rows with caches at the full `max_length`: enough "
    "memory to kill the process | `n_best` over `--max-n-best` (4) is a 400 before queueing; every `n_best` "
    "request decodes at one beam width, at most `--max-decode-rows` (128) rows per compiled call; a request costing "
    "more than `--max-request-tokens` (source plus output tokens times the beam width) is a 413 | "
    "`tests/serving/test_server.py` (`n-best-over-max-n-best`, `test_what_can_be_refused_before_queueing_never_"
    "reaches_the_batcher`) |",
    "| prefixes of width 1, 2, 3, ... | a decoding loop compiled per width, every cache kept | every prefix "
    "padded to the output's `max_length - 1` (one shape); every batch padded to a fixed shape, all compiled at "
    "warm-up for every signature served; compiled decoders kept least recently used (32 settings per model, 4 "
    "engines per translator) | `tests/serving/test_server.py::test_after_warm_up_no_request_compiles_anything`, "
    "`tests/decoding/test_compiled_defaults.py::test_compiled_decoders_keep_only_the_most_recently_used_settings` |",
    "| a large request ahead of one-sentence ones (continuous batching) | its sentences took every free slot first "
    "| free slots go to the waiting requests in turn, one sentence each | `tests/serving/test_continuous.py::test_"
    "free_slots_take_one_sentence_of_each_waiting_request_in_turn` |",
    "| a large request beside small ones, once every one has a slot | it took every slot that freed | none holds more "
    "than its share of the slots while others are open | `tests/serving/test_continuous.py::test_while_several_"
    "requests_are_active_none_takes_more_than_its_share_of_the_slots` |",
    "| large `n_best` or prefix requests beside the engine's small ones | decoded in a second thread at the same "
    "time, taking half of every core | the two workers take turns in proportion to the requests each holds, 4 "
    "sentences a turn | `tests/serving/test_fair_share.py` |",
    "| a request that cannot end within the timeout at the share it would get | accepted, then 504 | 429 at once "
    "(from the measured seconds a sentence holds a slot) | `tests/serving/test_continuous.py::test_a_request_that_"
    "could_not_end_within_the_timeout_is_refused_at_once_not_timed_out` |",
    "| a 1 MiB body of long texts, refused for its cost | the refusal itself tokenized the whole body | bounded by "
    "characters and words first; tokenized only between the bounds, 16 texts at a time until over the limit | "
    "`tests/serving/test_server.py::test_the_cost_check_decides_as_tokenizing_would_and_tokenizes_only_between_its_"
    "bounds` |",
    "| a `Host` that is not the server's (DNS rebinding) | answered | 403 unless `--allow-host` names it | "
    "`tests/serving/test_server.py::test_a_host_that_is_not_the_servers_is_a_403_unless_allowed` |",
    "| a browser's form or `text/plain` body | answered | 415 | `tests/serving/test_server.py` (`browser-*`) |",
    "| a client that sends refused requests in a loop (hundreds a second: wrong `Host`, malformed, oversized) | "
    "each answered at once, its reading and checking taking the cores from the accepted requests | each address's "
    "refusals past `--refusals-per-s` (5, after a burst of 20) held up to `--refusal-delay-s` (2 s); accepted "
    "requests never held | `tests/serving/test_server.py::test_a_client_refused_in_a_loop_has_its_refusals_held_"
    "while_accepted_requests_are_answered_at_once`, `tests/serving/test_pacing.py` |",
    "| more connections than the server should hold; a body that never comes | every one held | a 503 JSON error "
    "past `--max-connections` (the connection then closed); 408 after `--body-timeout-s` | "
    "`tests/serving/test_server.py::test_connections_past_max_"
    "connections_get_503_and_a_slow_body_gets_408` |",
    "| an internal error | a 500 (and, in a stream, its last line) carried the exception's text | a 500 names only "
    "a request id, which the `X-Request-Id` header and the log line with the traceback carry | `tests/serving/"
    "test_server.py::test_an_error_in_the_model_is_a_500_that_names_only_a_request_id_and_the_server_goes_on` |",
    "| a batch that fails for no request's input (out of memory) | run again request by request | fails its "
    "requests at once; only a refused input runs its batch again request by request | `tests/serving/test_"
    "batching.py`, `tests/serving/test_server.py::test_a_request_the_translator_refuses_fails_no_other_request_"
    "of_its_batch` |",
    "| a checkpoint asking `num_beams` 64 or `max_length` 100,000 | imported as it asks | a one-line error naming "
    "`generation_config.json` (beams at most 16, lengths within the model's positions) | `tests/importers/"
    "test_marian.py::test_bad_checkpoints_are_refused_in_one_line` |",
    "| a keras-hub preset whose `task.json` asks for `num_beams` 64 or sequence lengths of 100,000 | loaded as it "
    "asks | a one-line `PresetError` naming `task.json`, from our API, keras-hub's and the command line | "
    "`tests/tasks/test_presets.py::test_a_preset_asking_for_more_than_decoding_should_spend_is_refused_in_one_line` |",
    "| tensors the model has no place for | dropped without a word | a note naming them (past the format's known "
    "extras) | `tests/importers/test_marian.py::test_tensors_the_model_has_no_place_for_are_named_in_a_note` |",
    "| a Hub repository with `model.safetensors` and `pytorch_model.bin` | both downloaded; `imported.json` named "
    "the revision asked for | the pickle only where no safetensors weights exist, from the same commit; the commit "
    "downloaded is recorded | `tests/importers/test_marian.py::test_a_hub_import_never_fetches_the_pickle_beside_"
    "safetensors_and_records_the_commit` |",
    "| an atomic write and a power loss; hosts sharing a volume | a directory's files and the rename were not "
    "flushed; temporaries named by process id alone | the written tree is flushed before the rename and its "
    "directory after; temporaries named by process id, host and a random part | `tests/test_atomic.py` |",
    "| `export --overwrite` onto a path that holds something else (a data folder, a run) | replaced | refused in "
    "one line: a SavedModel, TFLite file, CTranslate2 model or preset is replaced only by its own kind | "
    "`tests/export/test_cli.py::test_overwrite_replaces_only_what_an_export_of_the_same_kind_wrote`, "
    "`tests/tasks/test_presets.py` |",
    "| `--distribute multi-host` without JAX; the importer's install hint | a traceback; a hint naming another "
    "project's distribution | one line naming `keras-transformer-mt[EXTRA]` | `tests/training/test_distribution.py"
    "::test_multi_host_without_jax_names_the_extra_in_one_line`, `tests/test_house.py` |",
    "| `kill -9` mid-epoch, resumed (dropout on) | an epoch loss 1.3e-3 away from an uninterrupted run's (other "
    "dropout masks): the dropout generators restarted | bit-exact: the checkpoint keeps their state | "
    "`tests/training/test_resume.py::test_an_"
    "epoch_interrupted_mid_way_resumes_exactly`, `python tools/kill_resume.py` |",
    "| `steps_per_epoch` with `--checkpoint-every`, killed and resumed | the resume position counted Keras epochs, "
    "not data passes, and the interrupted epoch ran a full `steps_per_epoch` more: other batches, other weights | "
    "epochs read an endless stream of passes; the position is the global batch counted in passes; the interrupted "
    "epoch runs only its remaining batches | `tests/training/test_resume.py::test_fixed_length_epochs_with_early_"
    "stopping_and_averaging_resume_exactly`, `python tools/kill_resume.py` |",
    "| `--patience` with `--average-last` | the average overwrote early stopping's best weights; both forgot "
    "their state on a resume | the run ends with the average of the epochs up to the best one; the best value, "
    "the epochs since and the epochs' weights are read back from `history.json` and `checkpoint/epochs/` | the same "
    "test, `python tools/kill_resume.py --case patience` |",
    "| `kill -9` during the validation after an epoch's last batch, with `--checkpoint-every` dividing the epoch "
    "| the resumed epoch trained zero batches and its record had no loss (with `steps_per_epoch`: it never ended) "
    "| no mid-epoch checkpoint after an epoch's last batch: the resume repeats the batches since the one before | "
    "the same test |",
    "| a training pair longer than `--max-length` | cut: a target without its end, a source that no longer says "
    "what its target says | skipped and counted, in the log and in `config.json`'s `data` | "
    "`tests/data/test_pipeline.py::test_pairs_that_do_not_fit_max_length_are_skipped_not_cut`, "
    "`tests/test_cli.py::test_train_writes_a_complete_run_directory` |",
    "| a corpus line of megabytes, or a file with no newline | read whole (the whole file, for the Python API's "
    "reader) | read in 1 MiB pieces and its pair skipped and counted; training then streams the shards in bounded "
    "pieces too | `tests/data/test_corpus.py::test_a_line_of_megabytes_is_skipped_and_counted_and_never_read_whole`, "
    "`tests/data/test_streaming.py::test_lines_of_megabytes_are_skipped_counted_and_streamed_in_bounded_pieces` |",
    "",
]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="only the cases that need no trained model")
    parser.add_argument("--only", help="only the cases whose id contains this")
    parser.add_argument("--output", default=os.path.join(ROOT, "docs", "reliability.md"),
                        help="the Markdown table to write (default docs/reliability.md; none with --only)")
    parser.add_argument("--json", help="also write the rows as JSON here")
    parser.add_argument("--in-process", action="store_true",
                        help="run each case in this interpreter (the CLI's main(), the API cases' code) instead of a "
                             "fresh one: the same code paths without a TensorFlow start-up per case (CI's fast part "
                             "runs so); what only a fresh process shows, its start-up and exit, is left out")
    args = parser.parse_args(argv)
    global IN_PROCESS
    IN_PROCESS = args.in_process
    cases = [c for c in CASES if (not args.fast or c.fast) and (not args.only or args.only in c.id)]
    rows = []
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="kt-reliability-") as work:
        ctx = Context(work)
        for number, c in enumerate(cases, 1):
            began = time.time()
            try:
                result = c.run(ctx)
                outcome, detail = classify(c, result)
            except Exception as error:  # noqa: BLE001 - the harness itself failed: a wrong row, not a crash
                outcome, detail = "wrong", f"harness: {type(error).__name__}: {str(error)[:300]}"
            rows.append({"id": c.id, "area": c.area, "what": c.what, "expect": c.expect, "outcome": outcome,
                         "detail": detail, "seconds": round(time.time() - began, 1)})
            print(f"[{number}/{len(cases)}] {c.id:28} {outcome:14} {time.time() - began:5.1f}s  {detail[:110]}",
                  flush=True)
    seconds = time.time() - start
    selection = "all" if not (args.fast or args.only) else ("fast part" if args.fast else f"only {args.only}")
    counts = {outcome: sum(1 for r in rows if r["outcome"] == outcome) for outcome in OUTCOMES}
    if not args.only:
        write_table(rows, args.output, seconds, selection)
        print(f"wrote {args.output}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    print(f"{len(rows)} cases: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    bad = counts["traceback"] + counts["silent accept"] + counts["work lost"] + counts["wrong"]
    return 1 if bad else 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
