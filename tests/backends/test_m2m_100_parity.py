"""An imported M2M-100 / NLLB checkpoint computes what `transformers` computes, on every Keras backend: logits within
1e-4, and greedy and beam-4 translations of 100 sentences into three target languages (mixed in each batch) equal
to `generate(forced_bos_token_id=...)` (float32, the same random weights)."""

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")
pytest.importorskip("tensorflow")  # the tokenizers (tensorflow-text) build the import, whatever the Keras backend

from keras import ops  # noqa: E402

from tests.importers.m2m_100_checkpoint import LANGUAGES  # noqa: E402
from tests.importers.m2m_100_checkpoint import MAX_NEW  # noqa: E402
from tests.importers.m2m_100_checkpoint import make_m2m_100_checkpoint  # noqa: E402
from tests.importers.m2m_100_checkpoint import reference_translations  # noqa: E402
from tests.importers.m2m_100_checkpoint import sentences  # noqa: E402


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    from keras_transformer import import_checkpoint

    root = tmp_path_factory.mktemp("nllb")
    model, tokenizer = make_m2m_100_checkpoint(str(root / "checkpoint"))
    import_checkpoint(str(root / "checkpoint"), str(root / "run"), verbose=0)
    return model, tokenizer, str(root / "run")


def _load(run_dir):
    """The run, loaded in the test: the BPE tokenizer's SentencePiece kernel lives in TensorFlow's resource cache,
    which the Keras state reset between tests empties."""
    from keras_transformer import load_run

    return load_run(run_dir)


def test_logits_match_transformers(imported):
    import torch

    model, tokenizer, run_dir = imported
    run = _load(run_dir)
    tokenizer.src_lang = "deu_Latn"
    batch = tokenizer(sentences(8, seed=1), return_tensors="pt", padding=True)
    labels = tokenizer(text_target=sentences(8, seed=2), return_tensors="pt", padding=True)["input_ids"].numpy()
    decoder = np.concatenate([np.full((8, 1), 2), labels[:, :-1]], axis=1)  # </s> first, as generate starts
    decoder[:, 1] = tokenizer.convert_tokens_to_ids("fra_Latn")
    with torch.no_grad():
        theirs = model(**batch, decoder_input_ids=torch.tensor(decoder)).logits.numpy()
    ours_ids = run.source_tokenizer.from_original_ids
    decoder_ours = ours_ids(decoder)
    decoder_ours[:, 0] = run.target_tokenizer.start_id
    logits = ops.convert_to_numpy(run.model({"encoder_inputs": ours_ids(batch["input_ids"].numpy()),
                                             "decoder_inputs": decoder_ours}))
    expected = theirs[..., run.target_tokenizer.original_ids]
    expected[..., run.target_tokenizer.start_id] = theirs[..., 1]  # [START]'s logit is the padding logit
    real = decoder != 1  # the rows' real positions (labels are padded with 1)
    assert np.abs(logits - expected)[real].max() <= 1e-4
    assert np.abs(expected).max() > 1.0  # logits that differ clearly between tokens


@pytest.mark.parametrize("beam_size", [1, 4])
def test_translations_into_three_languages_equal_transformers_generate(imported, beam_size):
    from keras_transformer.decoding import languages
    from keras_transformer.decoding.translator import Translator

    model, tokenizer, run_dir = imported
    run = _load(run_dir)
    texts = sentences(100, seed=3)
    targets = [LANGUAGES[1 + i % 3] for i in range(len(texts))]  # three target languages, mixed in each batch
    source, target = run.source_tokenizer, run.target_tokenizer
    translator = Translator(run.model, source, target, decoding=run.decoding)
    # The tokens: each row's generated ids, as the checkpoint's ids, against generate()'s.
    rows = source.tokenize(texts).to_list()
    sources = languages.pack_with_languages(rows, languages.language_ids(source, "eng_Latn", 100, None, "source"),
                                            source.end_id, run.model.encoder_embedding.max_length)
    first = languages.language_ids(target, targets, 100, None, "target")
    tokens, _ = translator._search(sources, translator.decoding_sampler(beam_size), MAX_NEW, first_token=first)
    ours = [[int(target.original_ids[t]) for t in row if t != 0] for row in tokens]
    theirs = reference_translations(model, tokenizer, texts, "eng_Latn", targets, beam_size, ids=True)
    assert ours == theirs
    lengths = [len(row) for row in theirs]
    assert min(lengths) < MAX_NEW and lengths.count(MAX_NEW) > 5  # some ended early, some ran to the limit
    # The text: what translate() gives, as batch_decode(skip_special_tokens=True).
    text = translator.translate(texts, beam_size=beam_size, source_language="eng_Latn", target_language=targets,
                                batch_size=64, max_length=MAX_NEW)
    assert text == reference_translations(model, tokenizer, texts, "eng_Latn", targets, beam_size)
