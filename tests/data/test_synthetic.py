import datetime
import re

import pytest

from keras_transformer.data import make_synthetic_corpus
from keras_transformer.data import make_synthetic_splits
from keras_transformer.data import train_tokenizers
from keras_transformer.data.synthetic import number_to_words
from keras_transformer.data.synthetic import ordinal_suffix
from keras_transformer.data.synthetic import ordinal_to_words


@pytest.mark.parametrize(
    "number, words",
    [
        (0, "zero"),
        (13, "thirteen"),
        (40, "forty"),
        (342, "three hundred and forty-two"),
        (1005, "one thousand and five"),
        (2026, "two thousand and twenty-six"),
        (9999, "nine thousand nine hundred and ninety-nine"),
    ],
)
def test_number_to_words(number, words):
    assert number_to_words(number) == words


def test_ordinals():
    assert [ordinal_to_words(n) for n in (1, 2, 3, 12, 20, 23, 30, 31)] == [
        "first", "second", "third", "twelfth", "twentieth", "twenty-third", "thirtieth", "thirty-first"
    ]
    assert [ordinal_suffix(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd"
    ]


def test_corpus_is_deterministic_for_a_seed():
    assert make_synthetic_corpus(50, seed=7).sources == make_synthetic_corpus(50, seed=7).sources
    assert make_synthetic_corpus(50, seed=7).sources != make_synthetic_corpus(50, seed=8).sources


def test_date_targets_are_valid_iso_dates_and_sources_vary():
    corpus = make_synthetic_corpus(400, seed=0, task="dates")
    for source, target in corpus:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", target)
        datetime.date.fromisoformat(target)
        assert source != target
    # Several surface forms, spelled-out words among them.
    assert any("thousand" in s for s in corpus.sources)
    assert any(re.search(r"\d+(st|nd|rd|th)\b", s) for s in corpus.sources)
    assert any(re.fullmatch(r"\d+\.\d+\.\d+", s) for s in corpus.sources)


def test_numbers_task():
    corpus = make_synthetic_corpus(200, seed=0, task="numbers")
    for source, target in corpus:
        assert target.isdigit() and not any(c.isdigit() for c in source)


def test_splits_are_disjoint_and_sized():
    train, heldout = make_synthetic_splits(300, 50, seed=1, task="mixed")
    assert len(train) == 300 and len(heldout) == 50
    assert set(train.sources).isdisjoint(heldout.sources)


def test_sentences_are_short_in_subword_tokens():
    corpus = make_synthetic_corpus(2000, seed=0, task="mixed")
    source_tokenizer, target_tokenizer = train_tokenizers(corpus, vocab_size=500, verbose=0)
    assert source_tokenizer.vocab_size < 500
    assert max(len(ids) for ids in source_tokenizer.tokenize(corpus.sources).to_list()) <= 16
    assert max(len(ids) for ids in target_tokenizer.tokenize(corpus.targets).to_list()) <= 8
    decoded = target_tokenizer.detokenize(target_tokenizer.tokenize(corpus.targets)).numpy()
    assert [d.decode() for d in decoded] == corpus.targets


def test_unknown_task_is_rejected():
    with pytest.raises(ValueError, match="task"):
        make_synthetic_corpus(5, task="poetry")
