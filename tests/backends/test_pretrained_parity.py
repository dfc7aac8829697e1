"""An imported Marian (OPUS-MT) checkpoint computes what `transformers` computes, on every Keras backend: logits
within 1e-4 and the same greedy tokens on 100 random sentences (float32, the same random weights)."""

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")
pytest.importorskip("tensorflow")  # the tokenizers (tensorflow-text) build the import, whatever the Keras backend

from keras import ops  # noqa: E402

from tests.importers.marian_files import WORDS  # noqa: E402
from tests.importers.marian_files import make_marian_checkpoint  # noqa: E402
from tests.importers.marian_files import positions_are_marians  # noqa: E402
from tests.importers.marian_files import sentences  # noqa: E402

MAX_NEW_TOKENS = 24


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    from transformers import MarianTokenizer

    from keras_transformer.importers import import_marian
    from keras_transformer.runs.run import load_run

    root = tmp_path_factory.mktemp("marian")
    model, config = make_marian_checkpoint(str(root / "checkpoint"))
    assert positions_are_marians(model)  # the reference's own sinusoidal table is right
    import_marian(str(root / "checkpoint"), str(root / "run"), verbose=0)
    tokenizer = MarianTokenizer.from_pretrained(str(root / "checkpoint"))
    return model, tokenizer, load_run(str(root / "run"))


def _ours(run, marian_ids, marian_mask):
    """Marian's padded ids `[B, S]` (and mask) -> our encoder ids: mapped through the vocabulary, 0-padded."""
    ids = run.source_tokenizer.ids_from_original[marian_ids]
    return np.where(marian_mask.astype(bool), ids, 0).astype("int32")


def test_logits_match_transformers(imported):
    import torch

    model, tokenizer, run = imported
    texts = sentences(WORDS, 8, seed=3)
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    rng = np.random.default_rng(0)
    target = rng.integers(2, model.config.vocab_size - 1, (len(texts), 9))
    decoder = np.concatenate([np.full((len(texts), 1), model.config.decoder_start_token_id), target], axis=1)
    with torch.no_grad():
        expected = model(**batch, decoder_input_ids=torch.tensor(decoder)).logits.numpy()
    decoder_ours = run.target_tokenizer.ids_from_original[decoder]
    decoder_ours[:, 0] = run.target_tokenizer.start_id
    logits = ops.convert_to_numpy(run.model({"encoder_inputs": _ours(run, batch["input_ids"].numpy(),
                                                                       batch["attention_mask"].numpy()),
                                             "decoder_inputs": decoder_ours}))
    ours = logits[..., run.target_tokenizer.ids_from_original]  # Marian's vocabulary order
    assert np.abs(ours - expected).max() <= 1e-4
    assert np.abs(expected).max() > 1.0  # logits that differ clearly between tokens


def test_greedy_tokens_match_transformers_on_100_sentences(imported):
    import torch

    from keras_transformer.decoding import greedy_decode

    model, tokenizer, run = imported
    texts = sentences(WORDS, 100, seed=7)
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        # The same work on both sides: at most MAX_NEW_TOKENS tokens, no </s> forced at the last one.
        expected = model.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=MAX_NEW_TOKENS,
                                  forced_eos_token_id=None).numpy()[:, 1:]
    target = run.target_tokenizer
    tokens = ops.convert_to_numpy(greedy_decode(
        run.model, _ours(run, batch["input_ids"].numpy(), batch["attention_mask"].numpy()), MAX_NEW_TOKENS,
        target.start_id, target.end_id))
    pad = model.config.pad_token_id
    for row, (ours, theirs) in enumerate(zip(tokens, expected)):
        theirs = [int(t) for t in theirs if t != pad]
        ours = [int(t) for t in target.original_ids[ours[ours != 0]]]
        assert ours == theirs, (row, texts[row])
    assert len({tuple(row) for row in expected}) > 25  # the random model does not say one thing for all inputs


def test_beam_4_tokens_match_transformers_with_its_rule(imported):
    """transformers' `generate(num_beams=4)` as Marian checkpoints configure it (length penalty 1.0, its early-stop
    heuristic, pad banned, </s> forced at the last position), against `beam_search(length_penalty_rule=
    "transformers", force_end=True)`."""
    import torch

    from keras_transformer.decoding import beam_search

    model, tokenizer, run = imported
    texts = sentences(WORDS, 100, seed=9)
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        expected = model.generate(**batch, num_beams=4, do_sample=False, max_new_tokens=MAX_NEW_TOKENS,
                                  length_penalty=1.0, early_stopping=False).numpy()[:, 1:]
    target = run.target_tokenizer
    tokens = ops.convert_to_numpy(beam_search(
        run.model, _ours(run, batch["input_ids"].numpy(), batch["attention_mask"].numpy()), MAX_NEW_TOKENS,
        target.start_id, target.end_id, beam_size=4, length_penalty=1.0, length_penalty_rule="transformers",
        force_end=True))
    pad = model.config.pad_token_id
    for row, (ours, theirs) in enumerate(zip(tokens, expected)):
        theirs = [int(t) for t in theirs if t != pad]
        ours = [int(t) for t in target.original_ids[ours[ours != 0]]]
        assert ours == theirs, (row, texts[row])
