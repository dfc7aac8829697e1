"""The translator's outputs beyond one best string, on a run directory: n-best lists, scores of given translations,
target prefixes, word alignments and streaming, each checked against the decoders they must agree with."""

import numpy as np
import pytest

from keras_transformer.decoding import beam_search
from keras_transformer.decoding.translator import encode_sources
from keras_transformer.translators import load_translator
from tests.export.helpers import SENTENCES
from tests.export.helpers import write_tiny_run

TEXTS = SENTENCES[:4] + [""]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return write_tiny_run(tmp_path_factory.mktemp("outputs") / "tiny")


@pytest.fixture(scope="module")
def translator(run_dir):
    return load_translator(run_dir)


def test_n_best_first_hypothesis_is_beam_searchs_best(translator):
    lists = translator.translate_n_best(TEXTS, 3, beam_size=4)
    assert [hyps[0][0] for hyps in lists] == translator.translate(TEXTS, beam_size=4)
    for text, hyps in zip(TEXTS, lists):
        if not text:
            assert hyps == [("", 0.0)]
            continue
        assert len(hyps) == 3  # as many as asked for: the beam of 4 ends at least 3 hypotheses within max_length
        scores = [s for _, s in hyps]
        assert scores == sorted(scores, reverse=True) and all(np.isfinite(scores))
    # One hypothesis of a greedy default is the greedy translation, scored.
    single = translator.translate_n_best(TEXTS, 1)
    assert [h[0][0] for h in single] == translator.translate(TEXTS, beam_size=1)
    assert all(len(h) == 1 for h in single)
    # The beam widens to n_best: 4 hypotheses from a greedy default decode with a beam of 4.
    assert [h[0][0] for h in translator.translate_n_best(TEXTS[:2], 4)] == translator.translate(TEXTS[:2],
                                                                                              beam_size=4)


def test_score_of_the_greedy_output_is_the_greedy_decoders_own(translator):
    greedy = translator.translate(TEXTS, beam_size=1, max_length=10)  # shorter than the model's max_length
    results = translator.score(TEXTS, greedy)
    # Beam search with one beam is greedy decoding; with no length penalty its score is the summed log-probability.
    source_ids = encode_sources(translator.source_tokenizer, TEXTS, translator.parts.max_length)
    tokens, own = beam_search(translator.model, source_ids, 10, translator.target_tokenizer.start_id,
                              translator.target_tokenizer.end_id, beam_size=1, length_penalty=0.0, return_scores=True,
                              jit_compile=False)
    own, tokens = np.asarray(own), np.asarray(tokens)
    end = translator.target_tokenizer.end_id
    for row, (text, result) in enumerate(zip(TEXTS, results)):
        assert len(result["tokens"]) == len(result["token_scores"])
        assert result["score"] == pytest.approx(sum(result["token_scores"]), abs=1e-5)
        if not text:
            continue
        decoded = [int(t) for t in tokens[row] if t]
        assert result["tokens"] == translator.target_tokenizer.tokens(decoded + [end] * (decoded[-1] != end))
        # A hypothesis cut at max_length has no end token; scoring adds one (the last token score).
        ended = decoded[-1] == end
        expected = float(own[row]) + (0.0 if ended else result["token_scores"][-1])
        assert result["score"] == pytest.approx(expected, abs=1e-3)
    normalized = translator.score(TEXTS, greedy, normalize=True)
    for plain, mean in zip(results, normalized):
        assert mean["score"] == pytest.approx(plain["score"] / len(plain["tokens"]), abs=1e-6)


def test_score_prefers_the_models_choice_and_checks_its_input(translator):
    greedy = translator.translate(TEXTS[:3], beam_size=1)
    other = translator.score(TEXTS[:3], ["1970-01-01"] * 3)
    mine = translator.score(TEXTS[:3], greedy)
    # Greedy's first token is the most likely first token: no other translation's first token scores higher.
    assert all(m["token_scores"][0] >= o["token_scores"][0] - 1e-5 for m, o in zip(mine, other))
    assert any(m["tokens"] != o["tokens"] for m, o in zip(mine, other))
    with pytest.raises(ValueError, match="one translation per text"):
        translator.score(TEXTS, greedy)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_prefix_is_kept_verbatim(translator, beam_size):
    prefixes = ["1999-05-", "2026", "", "12", "1970-"]
    outputs = translator.translate_with_prefix(TEXTS, prefixes, beam_size=beam_size)
    for prefix, output in zip(prefixes, outputs):
        assert output.startswith(prefix), (prefix, output)
    # An empty prefix decodes as translate does.
    assert outputs[2] == translator.translate([TEXTS[2]], beam_size=beam_size)[0]
    with pytest.raises(ValueError, match="tokens; at most"):
        translator.translate_with_prefix(["x"], ["1 " * 100])


def test_alignments_have_one_pair_per_target_word(translator):
    results = translator.align(TEXTS)
    assert [t for t, _ in results] == translator.translate(TEXTS)
    for text, (translation, pairs) in zip(TEXTS, results):
        assert [j for _, j in pairs] == list(range(len(translation.split())))
        assert all(0 <= i < len(text.split()) for i, _ in pairs)


def test_stream_pieces_join_to_the_greedy_translation(translator):
    greedy = translator.translate(TEXTS, beam_size=1)
    for text, expected in zip(TEXTS, greedy):
        pieces = list(translator.stream(text))
        assert "".join(pieces) == expected
        assert all(pieces)
    with pytest.raises(ValueError, match="greedily or by sampling"):
        translator.stream("x", sampler="beam")


def test_ensembles_refuse_score_and_alignment_with_one_line(translator):
    from keras_transformer.decoding.translator import Translator

    ensemble = Translator([translator.model, translator.model], translator.source_tokenizer,
                          translator.target_tokenizer)
    with pytest.raises(ValueError, match="member's run directory"):
        ensemble.score(["a"], ["b"])
    with pytest.raises(ValueError, match="member's run directory"):
        ensemble.align(["a"])


def _run_cli(argv, stdin_lines, monkeypatch, capsys):
    import io
    import sys

    from keras_transformer import cli

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join(stdin_lines).encode() + b"\n")))
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_translate_command_prints_each_output_as_the_python_api(run_dir, translator, tmp_path, monkeypatch,
                                                                 capsys):
    texts = TEXTS[:3]
    code, out, _ = _run_cli(["translate", run_dir, "--n-best", "2"], texts, monkeypatch, capsys)
    assert code == 0
    expected = translator.translate_n_best(texts, 2)
    assert out == [f"{i} ||| {t} ||| {s:.6f}" for i, hyps in enumerate(expected) for t, s in hyps]
    greedy = translator.translate(texts, beam_size=1)
    (tmp_path / "greedy.txt").write_text("\n".join(greedy) + "\n")
    code, out, _ = _run_cli(["translate", run_dir, "--score", str(tmp_path / "greedy.txt")], texts, monkeypatch,
                            capsys)
    assert code == 0 and [float(line.split(" ||| ")[0]) for line in out] == pytest.approx(
        [r["score"] for r in translator.score(texts, greedy)], abs=1e-5)
    code, out, _ = _run_cli(["translate", run_dir, "--alignments"], texts, monkeypatch, capsys)
    assert code == 0 and [line.split(" ||| ")[0] for line in out] == translator.translate(texts)
    code, out, _ = _run_cli(["translate", run_dir, "--stream"], texts, monkeypatch, capsys)
    assert code == 0 and out == greedy
    (tmp_path / "short.txt").write_text("one line\n")
    code, _, err = _run_cli(["translate", run_dir, "--prefix", str(tmp_path / "short.txt")], texts, monkeypatch,
                            capsys)
    assert code == 2 and "1 lines for 3 input lines" in err
