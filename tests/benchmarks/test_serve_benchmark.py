"""benchmarks/serve.py runs `keras-transformer serve` end to end for each engine and client count, reports every row
and the goals, and leaves no server behind (a tiny random run, one-second rows; no timing is asserted)."""

import json
import math
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENGINES = ("ours", "ours-unbatched", "ct2", "saved_model")
CLIENTS = (1, 2)


@pytest.mark.slow
def test_serve_benchmark_measures_each_engine_over_http_and_states_the_goals(tmp_path):
    for module in ("ctranslate2", "httpx", "fastapi", "uvicorn"):
        pytest.importorskip(module)
    from tests.export.helpers import SENTENCES
    from tests.export.helpers import write_tiny_run

    run_dir = write_tiny_run(tmp_path / "tiny")
    src = tmp_path / "src.txt"
    src.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    out_json = tmp_path / "serve.json"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow", TMPDIR=str(scratch))
    result = subprocess.run(
        [sys.executable, "-W", "ignore", os.path.join(ROOT, "benchmarks", "serve.py"), run_dir, "--engines", *ENGINES,
         "--clients", *map(str, CLIENTS), "--seconds", "1", "--warmup-seconds", "0.5", "--src", str(src),
         "--max-batch-size", "4", "--json", str(out_json)],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT,
    )
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]

    data = json.loads(out_json.read_text())
    rows = {(r["engine"], r["clients"]): r for r in data["rows"]}
    assert set(rows) == {(e, c) for e in ENGINES for c in CLIENTS}, sorted(rows)
    for key, row in rows.items():
        assert row["requests"] > 0 and row["errors"] == 0 and row["error_kinds"] == {}, (key, row)
        assert math.isfinite(row["p50_ms"]) and math.isfinite(row["p99_ms"]), (key, row)
        assert 0 < row["p50_ms"] <= row["p99_ms"], (key, row)
        assert row["requests_per_s"] > 0 and row["peak_rss_mb"] > 0 and row["rss_mb"] > 0, (key, row)
        assert row["peak_rss_mb"] >= row["rss_mb"], (key, row)
        assert not os.path.exists(f"/proc/{row['server_pid']}"), f"the {key[0]} server is still running"
    assert [r["clients"] for r in data["ratios"]] == list(CLIENTS)
    assert all(r["x_unbatched"] > 0 and r["x_ct2"] > 0 for r in data["ratios"]), data["ratios"]
    assert set(data["goals"]) == {"batching", "ct2", "no_errors"} and data["goals"]["no_errors"] is True

    for engine, clients in rows:
        number = r"\s+\|\s+[\d.]+"
        assert re.search(rf"^{re.escape(engine)}\s+\|\s+{clients}{number * 3}\s+\|\s+0\s+\|", out, flags=re.M), \
            (engine, clients, out)
    for clients in CLIENTS:
        assert re.search(rf"^{clients}\s+\|\s+[\d.]+\s+\|\s+[\d.]+\s+\|\s+[\d.]+", out, flags=re.M), out
    assert re.search(r"^goal at 16 clients \(measured at 2, the most run\): ours >= 4x ours-unbatched requests/s: "
                     r"[\d.]+x \((met|NOT met)\)$", out, flags=re.M), out
    assert re.search(r"^goal at 16 clients \(measured at 2, the most run\): ours within 1.5x of ct2 "
                     r"\(ct2/ours <= 1.5\): ct2/ours = [\d.]+ \((met|NOT met)\)$", out, flags=re.M), out
    assert "goal: no errors: 0 in all rows (met)" in out
    assert not list(scratch.iterdir()), "the CTranslate2 export or the server logs were left in TMPDIR"
