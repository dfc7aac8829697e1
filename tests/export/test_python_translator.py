"""The Python `Translator` (the reference the exported graphs are compared with) on the tiny run."""

from keras_transformer.decoding.translator import Translator
from keras_transformer.decoding.translator import encode_sources
from keras_transformer.decoding.translator import pad_source_rows
from keras_transformer.decoding.translator import tokenize_rows
from tests.export.helpers import SENTENCES


class CountingTokenizer:
    """Forwards to a tokenizer and counts `tokenize` calls and the texts they were given."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        self.calls = []

    def tokenize(self, texts):
        self.calls.append(list(texts))
        return self._tokenizer.tokenize(texts)

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)


def test_each_source_is_tokenized_once_and_the_order_is_kept(run):
    counting = CountingTokenizer(run.source_tokenizer)
    translator = Translator(run.model, counting, run.target_tokenizer, jit_compile=False)
    texts = ["", SENTENCES[2], "   ", SENTENCES[0], SENTENCES[1], SENTENCES[0]]
    together = translator.translate(texts, batch_size=2)
    assert counting.calls == [[SENTENCES[2], SENTENCES[0], SENTENCES[1], SENTENCES[0]]]  # blanks skipped
    assert together[0] == together[2] == "" and together[3] == together[5]
    alone = [translator.translate([t])[0] for t in texts]
    assert together == alone  # sorting into length batches does not change any translation
    assert len(set(together[1:])) > 1 and all(together[i] for i in (1, 3, 4))


def test_pad_source_rows_matches_encode_sources(run):
    tokenizer, max_length = run.source_tokenizer, 12
    texts = SENTENCES + [" ".join(SENTENCES * 5)]  # the last is truncated to max_length
    ids = pad_source_rows(tokenize_rows(tokenizer, texts), tokenizer, max_length)
    assert (ids == encode_sources(tokenizer, texts, max_length)).all()
    assert ids.dtype == "int32" and ids.shape[1] % 8 == 0 and ids.shape[1] <= 16
    assert (ids[:, 0] == tokenizer.start_id).all()
    assert ids[-1, max_length - 1] == tokenizer.end_id and (ids[-1, max_length:] == 0).all()
    assert tokenize_rows(tokenizer, []) == [] and pad_source_rows([], tokenizer, max_length).shape == (0, 8)


def test_none_decodes_as_the_runs_decoding_says(run):
    from keras_transformer.decoding.tuning import DecodingSettings

    tuned = DecodingSettings(beam_size=4, length_penalty=1.0)
    translator = Translator(run.model, run.source_tokenizer, run.target_tokenizer, jit_compile=False, decoding=tuned)
    plain = Translator(run.model, run.source_tokenizer, run.target_tokenizer, jit_compile=False)
    assert translator.translate(SENTENCES) == plain.translate(SENTENCES, beam_size=4, length_penalty=1.0)
    assert translator.translate(SENTENCES, beam_size=1) == plain.translate(SENTENCES)


def test_more_sentences_than_a_batch_decode_in_slots_with_the_same_translations(run):
    """Beyond one batch, greedy and beam search decode in a `SlotEngine` (a finished sentence leaves its slot):
    the translations are those of sorted batches, and the engine is kept for the next call."""
    from keras_transformer.decoding.slot_translation import uses_slots

    translator = Translator(run.model, run.source_tokenizer, run.target_tokenizer)
    texts = SENTENCES + ["", SENTENCES[0] + " " + SENTENCES[3]]
    for beam_size in (1, 3):
        assert uses_slots(translator, translator.decoding_sampler(beam_size), len(texts) - 1, 2)
        batches = [translator.translate([text], beam_size=beam_size)[0] for text in texts]  # one batch each
        assert translator.translate(texts, beam_size=beam_size, batch_size=2) == batches
    assert len(translator._slot_engines) == 2
    assert not uses_slots(translator, translator.decoding_sampler(1), 2, 2)  # one batch: the whole loop
