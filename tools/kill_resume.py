"""Kill -9 a training command at random moments, re-run it each time, and compare the end with an uninterrupted run.

    python tools/kill_resume.py                    # 20 kills of a steps_per_epoch run, 10 of a patience run
    python tools/kill_resume.py --kills 5 --case steps_per_epoch

Each case trains a small model (dropout on, no XLA) on a synthetic corpus with the `keras-transformer train`
command line, first without interruption, then killed with SIGKILL and re-run with the same command, again and
again: one attempt in five at a random moment of its start-up, the others at a random moment within `--window` of
the training time after they have trained a little (in a batch, a checkpoint write, a validation pass); finally
it runs to its end. The table
gives the largest difference between the two runs' final weights and whether every epoch's record (loss and
validation loss) is present and equal.
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

MODEL = ["--num-layers", "1", "--d-model", "32", "--num-heads", "2", "--d-ff", "64", "--max-length", "32",
         "--vocab-size", "200", "--batch-size", "32", "--warmup-steps", "20", "--seed", "5", "--no-jit-compile"]
CASES = {
    "steps_per_epoch": dict(flags=["--epochs", "10", "--checkpoint-every", "5"], config={"steps_per_epoch": 17},
                            what="--config {steps_per_epoch: 17} --checkpoint-every 5, 10 epochs"),
    "patience": dict(flags=["--epochs", "8", "--patience", "1", "--average-last", "3", "--checkpoint-every", "4",
                            "--lr-scale", "3"], config={}, what="--patience 1 --average-last 3 --checkpoint-every 4"),
}


def _write_corpus(directory):
    from keras_transformer.data.synthetic import make_synthetic_splits

    train, val = make_synthetic_splits(600, 60, seed=2)
    paths = {}
    for name, lines in (("src", train.sources), ("tgt", train.targets), ("val_src", val.sources),
                        ("val_tgt", val.targets)):
        paths[name] = os.path.join(directory, f"{name}.txt")
        with open(paths[name], "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return paths


def _command(paths, output, case):
    config = os.path.join(os.path.dirname(output), f"{os.path.basename(output)}.json")
    with open(config, "w", encoding="utf-8") as f:
        json.dump(case["config"], f)
    return [sys.executable, "-m", "keras_transformer.cli", "train", "--src", paths["src"], "--tgt", paths["tgt"],
            "--val-src", paths["val_src"], "--val-tgt", paths["val_tgt"], "--output", output, "--config", config,
            *MODEL, *case["flags"]]


def _env():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow")
    return env


def _checkpoint(output):
    try:
        with open(os.path.join(output, "checkpoint", "checkpoint.json"), encoding="utf-8") as f:
            state = json.load(f)
        return state["epoch"], state["batch"]
    except (OSError, ValueError, KeyError):
        return None


def _killed_run(command, output, kills, start_up, window, rng):
    """Runs `command` to its end, killed with SIGKILL `kills` times; returns where each kill left the checkpoint
    (None: before the first one). Every fifth attempt is killed during its start-up (a moment in the first
    `start_up` seconds); the others once they have trained (their checkpoint moved on), a moment in the next
    `window` seconds: in a batch, a checkpoint write, a validation pass."""
    moments = []
    while len(moments) < kills:
        before = _checkpoint(output)
        process = subprocess.Popen(command, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if len(moments) % 5 == 4:
            delay = rng.uniform(0, start_up)
        else:
            while process.poll() is None and _checkpoint(output) == before:
                time.sleep(0.02)
            delay = rng.uniform(0, window)
        try:
            process.wait(timeout=delay)
            break  # finished before its kill: the run is done
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait()
            moments.append(_checkpoint(output))
            print(f"  kill {len(moments)}: checkpoint at {moments[-1]}", flush=True)
    else:
        if os.path.exists(os.path.join(output, "model.keras")) and _checkpoint(output) is None:
            return moments  # the last kill came after the final model was saved: the run is finished
        result = subprocess.run(command, env=_env(), capture_output=True, text=True)
        if result.returncode:
            raise SystemExit(f"the last resume failed:\n{result.stderr[-3000:]}")
    return moments


def _final(output):
    from keras_transformer.runs.run import load_run

    with open(os.path.join(output, "history.json"), encoding="utf-8") as f:
        records = json.load(f)["epochs"]
    return load_run(output).model.get_weights(), records


def run_case(name, paths, work, kills, window_fraction, rng):
    case = CASES[name]
    reference_dir, killed_dir = os.path.join(work, f"{name}-reference"), os.path.join(work, f"{name}-killed")
    start, first_checkpoint = time.time(), None
    process = subprocess.Popen(_command(paths, reference_dir, case), env=_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    while process.poll() is None:
        if first_checkpoint is None and _checkpoint(reference_dir) is not None:
            first_checkpoint = time.time() - start
        time.sleep(0.05)
    if process.returncode:
        raise SystemExit(f"the uninterrupted run failed:\n{process.stderr.read()[-3000:]}")
    seconds = time.time() - start
    first_checkpoint = first_checkpoint or 0.0
    window = window_fraction * (seconds - first_checkpoint)
    print(f"{name}: uninterrupted run {seconds:.0f} s (first checkpoint after {first_checkpoint:.0f} s); kills in "
          f"the start-up or up to {window:.1f} s after an attempt's first checkpoint", flush=True)
    moments = _killed_run(_command(paths, killed_dir, case), killed_dir, kills, first_checkpoint, window, rng)
    (weights, records), (expected, expected_records) = _final(killed_dir), _final(reference_dir)
    difference = max(float(np.max(np.abs(a - b))) for a, b in zip(weights, expected))
    same_records = [(r["epoch"], r.get("loss"), r.get("val_loss")) for r in records] == [
        (r["epoch"], r.get("loss"), r.get("val_loss")) for r in expected_records]
    mid_epoch = sum(1 for m in moments if m is not None and m[1] > 0)
    return dict(case=case["what"], kills=len(moments), mid_epoch=mid_epoch, epochs=len(records),
                difference=difference, same_records=same_records)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=sorted(CASES), action="append", help="a case to run (default: both)")
    parser.add_argument("--kills", type=int, default=None, help="kills per case (default: 20, and 10 for patience)")
    parser.add_argument("--window", type=float, default=0.08,
                        help="kill moments fall within this fraction of the training time after an attempt's first "
                             "checkpoint")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    rows = []
    with tempfile.TemporaryDirectory(prefix="kill-resume-") as work:
        paths = _write_corpus(work)
        for name in args.case or ["steps_per_epoch", "patience"]:
            kills = args.kills if args.kills is not None else (20 if name == "steps_per_epoch" else 10)
            rows.append(run_case(name, paths, work, kills, args.window, rng))
    print("\n| run | kills (mid-epoch) | epochs recorded | max weight difference | records equal |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['case']} | {row['kills']} ({row['mid_epoch']}) | {row['epochs']} | {row['difference']:.1e} | "
              f"{'yes' if row['same_records'] else 'NO'} |")
    ok = all(row["difference"] <= 1e-6 and row["same_records"] for row in rows)
    print("resumed runs equal uninterrupted ones (within 1e-6):", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
