"""`search_decoding`: the grid is measured in order, the best BLEU wins, and the choice round-trips as JSON."""

import json

import pytest

from keras_transformer.decoding.tuning import DecodingSettings
from keras_transformer.decoding.tuning import search_decoding

REFERENCES = ["a dog runs on the grass .", "two men sit on a bench ."]


def _translate_with_length(calls):
    """A stand-in translator: a larger alpha appends more words (as a length penalty lengthens beam outputs)."""

    def translate(sources, beam_size, length_penalty):
        calls.append((beam_size, length_penalty))
        extra = int(round(length_penalty * 2))
        return [" ".join(ref.split()[: 3 + extra]) for ref in REFERENCES[: len(sources)]]

    return translate


def test_the_best_bleu_wins_and_every_grid_point_is_measured_in_order():
    calls = []
    search = search_decoding(_translate_with_length(calls), ["x", "y"], REFERENCES, beam_sizes=[1, 4],
                             length_penalties=[0.0, 1.0, 2.0, 3.0], tuned_on="held-out")
    # Greedy once (no length penalty there), then every alpha with beam 4.
    assert calls == [(1, 0.0), (4, 0.0), (4, 1.0), (4, 2.0), (4, 3.0)]
    assert [row["beam_size"] for row in search.rows] == [1, 4, 4, 4, 4]
    bleus = [row["bleu"] for row in search.rows]
    assert search.best.bleu == pytest.approx(max(bleus))
    # Outputs reach the full references (7 words) from alpha 2 on: alpha 2 is the first of the equal best.
    assert search.best.length_penalty == 2.0 and search.best.beam_size == 4
    assert search.best.bleu == pytest.approx(100.0)
    assert search.rows[1]["bleu"] < search.rows[2]["bleu"] < search.rows[3]["bleu"]
    assert all(0 <= row["chrf"] <= 100 for row in search.rows)
    assert search.best.sentences == 2 and search.best.tuned_on == "held-out"
    assert "<- chosen" in search.table().splitlines()[4]


def test_settings_round_trip_through_json():
    search = search_decoding(_translate_with_length([]), ["x", "y"], REFERENCES, beam_sizes=[2],
                             length_penalties=[0.5, 1.5])
    text = json.dumps(search.best.to_dict())
    again = DecodingSettings.from_dict(json.loads(text))
    assert again == search.best
    assert len(again.grid) == 2 and again.grid[1]["length_penalty"] == 1.5


@pytest.mark.parametrize("kwargs, message", [
    ({"sources": [], "references": []}, "at least one held-out pair"),
    ({"sources": ["x"], "references": REFERENCES}, "1 sources but 2 references"),
    ({"beam_sizes": [0]}, "beam size must be an integer >= 1"),
    ({"length_penalties": [-0.1]}, "length penalty must be a number in [0, 10]"),
    ({"length_penalties": [float("nan")]}, "length penalty must be a number in [0, 10]"),
    ({"length_penalties": []}, "at least one beam size and one length penalty"),
])
def test_bad_grids_and_data_are_clear_errors(kwargs, message):
    arguments = {"sources": ["x", "y"], "references": REFERENCES, **kwargs}
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        search_decoding(_translate_with_length([]), arguments.pop("sources"), arguments.pop("references"),
                        **arguments)


def test_damaged_settings_are_refused():
    with pytest.raises(ValueError, match="unknown decoding settings"):
        DecodingSettings.from_dict({"beam_size": 4, "length_penalty": 0.6, "alpha": 1})
    with pytest.raises(ValueError, match="beam size"):
        DecodingSettings.from_dict({"beam_size": "4", "length_penalty": 0.6})
