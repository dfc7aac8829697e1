"""Batch shapes: what a compiled decoder is handed, however many sentences of whatever length come in."""

import numpy as np
import pytest

from keras_transformer.decoding.batch_shapes import BatchShapes
from keras_transformer.decoding.batch_shapes import pad_batch


def test_a_batch_is_padded_to_the_smallest_fixed_shape_that_holds_it():
    shapes = BatchShapes(rows=(1, 4, 16), widths=(16, 32), max_length=30)
    seen = set()
    for count in range(1, 17):
        for width in (8, 16, 24, 32):
            ids = np.arange(1, count * width + 1, dtype="int32").reshape(count, width)
            padded = pad_batch(ids, shapes)
            seen.add(padded.shape)
            np.testing.assert_array_equal(padded[:count, :width], ids)  # the sentences, unchanged
            assert not padded[:, width:].any()  # padding columns hold the padding id
            np.testing.assert_array_equal(padded[count:, :width], np.repeat(ids[:1], len(padded) - count, 0))
    assert seen == {(r, w) for r in (1, 4, 16) for w in (16, 32)}
    assert pad_batch(np.ones((5, 8), "int32")).shape == (8, 8)  # no fixed shapes: 1, 2, 4, 8, multiples of 8


def test_fixed_widths_must_hold_the_longest_source():
    with pytest.raises(ValueError, match="source widths up to at least 32"):
        BatchShapes(rows=(1,), widths=(16, 24), max_length=30)
