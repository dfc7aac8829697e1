"""Ensemble decoding (`EnsembleParts`): the members' log-probabilities averaged at every step (or their
probabilities, with `combine="prob"`)."""

import numpy as np
import pytest

from keras_transformer.models import EnsembleParts
from tests.backend_helpers import backend
from tests.decoding.helpers import END
from tests.decoding.helpers import START
from tests.decoding.helpers import check_padding_after_end
from tests.decoding.helpers import eager_beam_search as beam_search
from tests.decoding.helpers import eager_greedy_decode as greedy_decode
from tests.decoding.helpers import penalized
from tests.decoding.helpers import sources
from tests.decoding.helpers import tiny_model
from tests.decoding.helpers import to_numpy


def _log_softmax(logits):
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def ensemble_log_probs(models, encoder_row, tokens, combine="log_prob"):
    """Per position, the ensemble's next-token log-probabilities `[T, V]` given `tokens` (teacher-forced), float64,
    as the decoders score them: the mean of the members' log-softmax (or the log of the mean of their softmax),
    padding and the start token removed, normalized again."""
    decoder_inputs = np.array([[START] + list(tokens[:-1])], "int32")
    members = [_log_softmax(to_numpy(m({"encoder_inputs": encoder_row[None], "decoder_inputs": decoder_inputs})
                                     )[0].astype("float64")) for m in models]
    mean = np.mean(members, axis=0) if combine == "log_prob" else np.log(np.mean(np.exp(members), axis=0))
    mean[:, [0, START]] = -np.inf  # padding and the start token are never generated
    return _log_softmax(mean)


def _members():
    # Different seeds, and different depth and width: members only share the vocabulary and the positions.
    return [tiny_model(seed=0), tiny_model(seed=1, num_layers=1, d_model=16, num_heads=2, d_ff=32)]


def test_an_ensemble_of_one_model_twice_decodes_like_the_model():
    model = tiny_model(seed=0)
    src = sources()
    twice = EnsembleParts([model, model])
    np.testing.assert_array_equal(to_numpy(greedy_decode(twice, src, 10, START, END)),
                                  to_numpy(greedy_decode(model, src, 10, START, END)))
    tokens, scores = beam_search(model, src, 10, START, END, beam_size=4, return_scores=True)
    ens_tokens, ens_scores = beam_search(twice, src, 10, START, END, beam_size=4, return_scores=True)
    np.testing.assert_array_equal(to_numpy(ens_tokens), to_numpy(tokens))
    np.testing.assert_allclose(to_numpy(ens_scores), to_numpy(scores), atol=1e-4)


def test_greedy_ensemble_takes_the_argmax_of_the_mean_log_probabilities():
    members = _members()
    src = sources(batch=3)
    tokens = to_numpy(greedy_decode(EnsembleParts(members), src, 9, START, END))
    check_padding_after_end(tokens, 9)
    for row in range(len(src)):
        out = [int(t) for t in tokens[row] if t != 0]
        log_probs = ensemble_log_probs(members, src[row], out)
        assert [int(i) for i in log_probs.argmax(-1)] == out
    # ...and it is not simply one member's output.
    alone = [to_numpy(greedy_decode(m, src, 9, START, END)) for m in members]
    assert not all(np.array_equal(tokens, a[:, : tokens.shape[1]]) and a.shape == tokens.shape for a in alone)


@pytest.mark.parametrize("alpha, combine", [(0.0, "log_prob"), (1.0, "log_prob"), (1.0, "prob")])
def test_beam_ensemble_scores_are_the_mean_log_probabilities_penalized(alpha, combine):
    members = _members()
    src = sources(batch=3)
    tokens, scores = beam_search(EnsembleParts(members, combine=combine), src, 9, START, END, beam_size=3,
                                 length_penalty=alpha, return_scores=True)
    tokens, scores = to_numpy(tokens), to_numpy(scores)
    check_padding_after_end(tokens, 9)
    for row in range(len(src)):
        out = [int(t) for t in tokens[row] if t != 0]
        log_probs = ensemble_log_probs(members, src[row], out, combine)
        other = ensemble_log_probs(members, src[row], out, "prob" if combine == "log_prob" else "log_prob")
        assert np.abs(log_probs - other)[np.isfinite(log_probs)].max() > 1e-3  # the two rules really differ here
        total = float(sum(log_probs[i, t] for i, t in enumerate(out)))
        assert scores[row] == pytest.approx(penalized(total, len(out), alpha), abs=1e-4)


# Not on PyTorch: torch.compile unrolls the decoding loop (minutes per shape on CPU), PyTorch decodes eagerly by
# default, and test_beam_search keeps one compiled check there. The ensemble's decoding is checked eagerly above.
@pytest.mark.skipif(backend() == "torch", reason="PyTorch decodes eagerly by default; one compiled check elsewhere")
@pytest.mark.parametrize("combine", ["log_prob", "prob"])
def test_compiled_ensemble_decoding_matches_eager(combine):
    ensemble = EnsembleParts(_members(), combine=combine)
    src = sources()
    eager = beam_search(ensemble, src, 9, START, END, beam_size=2, length_penalty=0.6)
    compiled = beam_search(ensemble, src, 9, START, END, beam_size=2, length_penalty=0.6, jit_compile=True)
    np.testing.assert_array_equal(to_numpy(compiled), to_numpy(eager))


def test_members_must_share_the_vocabulary_and_positions():
    with pytest.raises(ValueError, match="share one target vocabulary"):
        EnsembleParts([tiny_model(vocab=40), tiny_model(vocab=41)])
    with pytest.raises(ValueError, match="same `max_length`"):
        EnsembleParts([tiny_model(), tiny_model(max_length=16)])
    with pytest.raises(ValueError, match="at least one"):
        EnsembleParts([])
    with pytest.raises(TypeError, match="member 1 must be a keras.Model"):
        EnsembleParts([tiny_model(), "run_dir"])
    with pytest.raises(ValueError, match="combine='mean': expected one of 'log_prob', 'prob'"):
        EnsembleParts([tiny_model()], combine="mean")


def test_the_docstring_example_runs():
    import doctest

    import keras_transformer.models.ensemble as module

    results = doctest.testmod(module)
    assert results.attempted > 0 and results.failed == 0
