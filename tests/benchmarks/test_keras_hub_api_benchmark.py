"""benchmarks/keras_hub_api.py times the anchor `Translator` and keras-hub's `generate()` with each sampler, splits
`generate()` into its stages and compares int8 with float32, on a tiny random run with one timed pass (no timing is
asserted, only that every row is there with sane numbers)."""

import importlib.util
import json
import math
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCHES = (2,)  # one batch size: every row is the same code at any size
ENGINES = {
    "greedy": ("anchor: Translator.translate", "generate(): ours GreedySampler (default)",
               "generate(): keras-hub \"greedy\""),
    "beam 2": ("anchor: translate(beam_size=2)", "generate(): ours BeamSampler(2)",
               "generate(): keras-hub BeamSampler(2)"),
}


def load_benchmark():
    spec = importlib.util.spec_from_file_location("keras_hub_api_benchmark",
                                                  os.path.join(ROOT, "benchmarks", "keras_hub_api.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def positive(value):
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def test_keras_hub_api_benchmark_reports_every_engine_stage_and_int8(tmp_path, capsys):
    from tests.export.helpers import SENTENCES
    from tests.export.helpers import write_tiny_run

    run_dir = write_tiny_run(tmp_path / "tiny")
    src = tmp_path / "src.txt"
    src.write_text("\n".join(SENTENCES[:4]) + "\n", encoding="utf-8")
    out_json = tmp_path / "keras_hub_api.json"
    result = load_benchmark().main([
        run_dir, "--src", str(src), "--sentences", "2", "--batch-sizes", *map(str, BATCHES), "--beam-size", "2",
        "--repeats", "1", "--agreement-sentences", "3", "--int8-batch", "2", "--json", str(out_json)])
    out = capsys.readouterr().out

    data = json.loads(out_json.read_text())
    assert data["goals"] == result["goals"] and set(data["goals"]) == {"generate_vs_anchor", "int8_half_bytes"}
    rows = {(r["decoding"], r["engine"], r["batch"]): r for r in data["rows"]}
    assert set(rows) == {(d, e, b) for d, names in ENGINES.items() for e in names for b in BATCHES}, sorted(rows)
    for key, row in rows.items():
        assert positive(row["seconds"]) and positive(row["sentences_per_s"]) and positive(row["x_anchor"]), (key, row)
        assert row["tokens"] == 0 or positive(row["ms_per_token"]), (key, row)
        assert 0 <= row["agreement"] <= 1, (key, row)
        if key[1].startswith("anchor"):
            assert row["x_anchor"] == 1 and row["agreement"] == 1, (key, row)
        number = r"\s+\|\s+[\d.-]+"
        assert re.search(rf"^{re.escape(key[0])}\s+\|\s+{re.escape(key[1])}\s+\|\s+{key[2]}{number * 5}", out,
                         flags=re.M), (key, out)
    assert [s["batch"] for s in data["stages"]] == list(BATCHES)
    assert all(positive(s[f"{name}_ms"]) for s in data["stages"]
               for name in ("preprocess", "generate_function", "postprocess")), data["stages"]

    int8 = data["int8"]
    assert 0 < int8["bytes_int8"] < int8["bytes_float32"] and 0 < int8["h5_bytes_int8"] < int8["h5_bytes_float32"]
    assert int8["bytes_by_dtype_int8"].get("int8", 0) > 0 and "int8" not in int8["bytes_by_dtype_float32"]
    assert all(positive(int8["timing"][name]["seconds"]) for name in ("float32", "int8")), int8["timing"]
    assert 0 <= int8["agreement"] <= 1 and int8["agreement_sentences"] == 3, int8
    assert re.search(r"^int8 greedy output = float32's: \d/3 \([\d.]+\)$", out, flags=re.M), out
    assert re.search(r"^goal: generate\(\) with the package's samplers no slower than the anchor .* \((met|NOT met)\)$",
                     out, flags=re.M), out
    assert re.search(r"^goal: int8 weights at most 0.5 of float32's: [\d.]+ in memory, [\d.]+ in model.weights.h5 "
                     r"\((met|NOT met)\)$", out, flags=re.M), out
