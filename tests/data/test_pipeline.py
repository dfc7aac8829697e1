import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.data import make_dataset
from keras_transformer.data import make_synthetic_corpus
from keras_transformer.data import measure_throughput
from keras_transformer.data import padding_fraction
from keras_transformer.data import train_tokenizers
from keras_transformer.data.lengths import count_too_long
from keras_transformer.data.pipeline import with_batch_count


@pytest.fixture(scope="module")
def corpus():
    return make_synthetic_corpus(600, seed=0, task="mixed")


@pytest.fixture(scope="module")
def tokenizers(corpus):
    return train_tokenizers(corpus, vocab_size=300, verbose=0)


def batches(dataset):
    return [
        (inputs["encoder_inputs"].numpy(), inputs["decoder_inputs"].numpy(), labels.numpy())
        for inputs, labels in dataset
    ]


def test_batch_structure_shapes_and_dtypes(corpus, tokenizers):
    dataset = make_dataset(corpus, *tokenizers, batch_size=32, max_length=32)
    inputs_spec, labels_spec = dataset.element_spec
    assert set(inputs_spec) == {"encoder_inputs", "decoder_inputs"}
    assert inputs_spec["encoder_inputs"].dtype == tf.int32 and labels_spec.dtype == tf.int32
    all_batches = batches(dataset)
    assert sum(len(labels) for _, _, labels in all_batches) == len(corpus)
    for encoder, decoder, labels in all_batches:
        assert encoder.shape[0] == decoder.shape[0] == labels.shape[0] <= 32
        assert decoder.shape == labels.shape
        assert encoder.shape[1] % 8 == 0 and decoder.shape[1] % 8 == 0


def test_start_and_end_placement(corpus, tokenizers):
    src, tgt = tokenizers
    dataset = make_dataset(corpus, src, tgt, batch_size=64, max_length=32, shuffle=False, bucket=False)
    encoder, decoder, labels = batches(dataset)[0]
    for row in range(len(labels)):
        source = encoder[row][encoder[row] != 0]
        assert source[0] == src.start_id and source[-1] == src.end_id
        assert not np.isin(source[1:-1], [0, 2, 3]).any()
        n = np.count_nonzero(labels[row])
        assert np.count_nonzero(decoder[row]) == n
        assert decoder[row][0] == tgt.start_id and labels[row][n - 1] == tgt.end_id
        np.testing.assert_array_equal(decoder[row][1:n], labels[row][: n - 1])  # shifted by one
        assert not labels[row][n:].any() and not decoder[row][n:].any()
    # Unshuffled and unbucketed, the first row is the first pair of the corpus.
    n = np.count_nonzero(labels[0])
    expected = tgt.tokenize([corpus.targets[0]]).to_list()[0]
    assert labels[0][: n - 1].tolist() == expected
    assert tgt.detokenize(decoder[:1]).numpy()[0].decode() == corpus.targets[0]


def test_pairs_that_do_not_fit_max_length_are_skipped_not_cut(tokenizers):
    src, tgt = tokenizers
    assert src.tokenize(["one"]).to_list() == [[src.tokenize(["one"]).to_list()[0][0]]]  # one token a word
    assert len(tgt.tokenize(["1"]).to_list()[0]) == 1
    # max_length 10: a source holds 8 tokens ([START] ... [END]), a target 9 ([START] ... and ... [END]).
    sources = ["one " * 8, "one " * 9, "one", "one"]
    targets = ["1", "1", "1 " * 9, "1 " * 10]
    dataset = make_dataset((sources, targets), src, tgt, batch_size=4, max_length=10, shuffle=False, bucket=False,
                           pad_to_multiple=1)
    (encoder, decoder, labels), = batches(dataset)
    assert encoder.shape[0] == 2  # the pairs at the limit; those one token over are gone, not cut
    assert np.count_nonzero(encoder[0]) == 10 and encoder[0][-1] == src.end_id
    assert np.count_nonzero(labels[1]) == 10 and labels[1][-1] == tgt.end_id and decoder[1][0] == tgt.start_id
    assert count_too_long(tf.data.Dataset.from_tensor_slices((sources, targets)), src, tgt, max_length=10) == 2


def test_bucketing_keeps_padding_small(tokenizers):
    # Lengths spread evenly over 1..28 words, targets about as long as sources, as in real translation data.
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 29, size=800)
    sources = [" ".join(["one"] * n) for n in lengths]
    targets = [" ".join(["1"] * max(1, n + rng.integers(-2, 3))) for n in lengths]
    pairs = (sources, targets)

    def fractions(bucket):
        dataset = make_dataset(
            pairs, *tokenizers, batch_size=32, max_length=32, bucket=bucket, pad_to_multiple=1, seed=1
        )
        return padding_fraction(dataset)

    bucketed, unbucketed = fractions(True), fractions(False)
    assert bucketed[0] < 0.5 * unbucketed[0] and bucketed[1] < 0.5 * unbucketed[1]
    assert max(bucketed) < 0.25


def test_token_budget_scales_batch_size_by_length(corpus, tokenizers):
    dataset = make_dataset(corpus, *tokenizers, batch_size=128, max_length=32, token_budget=512, pad_to_multiple=8)
    for encoder, _, _ in batches(dataset):
        assert encoder.shape[0] <= max(8, 512 // (encoder.shape[1] - 7))


def test_dataset_input_is_streamed_and_blank_pairs_filtered(tokenizers):
    pairs = tf.data.Dataset.from_tensor_slices((["one", "  ", "two", "three"], ["1", "x", "", "3"]))
    dataset = make_dataset(pairs, *tokenizers, batch_size=8, max_length=16, shuffle=False)
    (_, _, labels), = batches(dataset)
    assert labels.shape[0] == 2


def test_shuffle_changes_order_between_epochs_but_keeps_pairs(corpus, tokenizers):
    dataset = make_dataset(corpus, *tokenizers, batch_size=600, max_length=32, bucket=False, seed=3)
    first = batches(dataset)[0][2]
    second = batches(dataset)[0][2]
    assert not np.array_equal(first, second)
    assert sorted(map(tuple, first)) == sorted(map(tuple, second))


@pytest.mark.parametrize("drop_remainder", [False, True])
def test_batch_count_holds_for_every_reshuffled_epoch(corpus, tokenizers, drop_remainder):
    dataset = make_dataset(corpus, *tokenizers, batch_size=24, max_length=32, token_budget=400, seed=5,
                           drop_remainder=drop_remainder)
    counted, count = with_batch_count(dataset)
    assert int(counted.cardinality()) == count
    epochs = [batches(counted) for _ in range(3)]  # assert_cardinality raises if an epoch had another length
    assert all(len(epoch) == count for epoch in epochs)
    assert sum(labels.shape[0] for _, _, labels in epochs[0]) == (600 if not drop_remainder else
                                                                  sum(labels.shape[0] for _, _, labels in epochs[1]))
    assert [e.shape for e, _, _ in epochs[0]] != [e.shape for e, _, _ in epochs[1]]  # really reshuffled


def test_measure_throughput_counts_target_tokens(corpus, tokenizers):
    dataset = make_dataset(corpus, *tokenizers, batch_size=32, max_length=32)
    assert measure_throughput(dataset, steps=5) > 0


def test_rejects_too_small_max_length(corpus, tokenizers):
    with pytest.raises(ValueError, match="max_length"):
        make_dataset(corpus, *tokenizers, max_length=2)


def test_same_length_gives_one_shape_per_bucket(corpus, tokenizers):
    """For XLA: full batches only, and encoder/decoder padded to one length, so few distinct shapes."""
    free = {(e.shape, d.shape) for e, d, _ in batches(make_dataset(corpus, *tokenizers, batch_size=16, max_length=32))}
    dataset = make_dataset(corpus, *tokenizers, batch_size=16, max_length=32, same_length=True, drop_remainder=True)
    shapes = set()
    for encoder, decoder, labels in batches(dataset):
        assert encoder.shape == decoder.shape == labels.shape and encoder.shape[0] == 16
        assert encoder.shape[1] % 8 == 0
        shapes.add(encoder.shape)
    assert len(shapes) <= len({s[1] for s in shapes}) <= 4
    assert len(shapes) <= len(free)


def test_duplicate_rows_stacks_each_batch_on_itself(corpus, tokenizers):
    from keras_transformer.data.pipeline import duplicate_rows

    dataset = make_dataset((corpus.sources[:40], corpus.targets[:40]), tokenizers[0], tokenizers[1], batch_size=8,
                           shuffle=False)
    for (enc, dec, lab), (enc2, dec2, lab2) in zip(batches(dataset), batches(duplicate_rows(dataset))):
        for single, double in ((enc, enc2), (dec, dec2), (lab, lab2)):
            assert double.shape == (2 * single.shape[0], single.shape[1])
            np.testing.assert_array_equal(double[: len(single)], single)
            np.testing.assert_array_equal(double[len(single):], single)
