import pytest

from keras_transformer.quickstart import exact_match
from keras_transformer.quickstart import run_quickstart


def test_exact_match_counts_identical_strings():
    assert exact_match(["2020-01-02", "x"], ["2020-01-02", "y"]) == 0.5


@pytest.mark.slow
def test_quickstart_learns_the_date_task(tmp_path, capsys):
    """README's main job, with its default settings: >= 95% exact match on held-out pairs."""
    run, score = run_quickstart(output_dir=str(tmp_path / "quickstart"), verbose=2)
    out = capsys.readouterr().out
    assert "Held-out exact match" in out
    assert score >= 0.95, score
    assert (tmp_path / "quickstart" / "model.keras").exists()
