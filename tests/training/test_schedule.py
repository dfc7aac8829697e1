import keras
import numpy as np
import pytest

from keras_transformer.training import TransformerSchedule
from keras_transformer.training import make_optimizer
from keras_transformer.training import make_schedule


@pytest.mark.parametrize("iteration", [0, 1, 99, 3999, 4000, 9999, 99999])
def test_values_match_the_formula(iteration):
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000, scale=2.0)
    step = iteration + 1
    expected = 2.0 * 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
    np.testing.assert_allclose(float(schedule(iteration)), expected, rtol=1e-6)


def test_known_values():
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    assert float(schedule(3999)) == pytest.approx(6.9877e-4, rel=1e-4)  # the peak, (512 * 4000) ** -0.5
    assert float(schedule(0)) == pytest.approx(512**-0.5 * 4000**-1.5, rel=1e-5)
    assert float(schedule(15999)) == pytest.approx(0.5 * float(schedule(3999)), rel=1e-5)


def test_serialization_round_trip():
    schedule = TransformerSchedule(d_model=256, warmup_steps=100, scale=0.5)
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert isinstance(restored, TransformerSchedule)
    assert restored.get_config() == {"d_model": 256, "warmup_steps": 100, "scale": 0.5}


def test_make_optimizer_uses_the_paper_settings():
    optimizer = make_optimizer(d_model=128, warmup_steps=50, clipnorm=1.0)
    assert isinstance(optimizer, keras.optimizers.Adam)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon, optimizer.clipnorm) == (0.9, 0.98, 1e-9, 1.0)
    assert isinstance(optimizer._learning_rate, TransformerSchedule)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(restored._learning_rate, TransformerSchedule)


def test_cosine_warms_up_to_the_papers_peak_then_decays_to_zero():
    cosine = make_schedule(256, warmup_steps=100, scale=0.7, decay="cosine", total_steps=1000)
    paper = TransformerSchedule(d_model=256, warmup_steps=100, scale=0.7)
    peak = 0.7 * (256 * 100) ** -0.5
    assert float(cosine(100)) == pytest.approx(peak, rel=1e-5)
    assert float(paper(99)) == pytest.approx(peak, rel=1e-5)
    assert float(cosine(50)) == pytest.approx(peak / 2, rel=1e-5)
    assert float(cosine(550)) == pytest.approx(peak / 2, rel=1e-4)  # half-way through the decay
    values = [float(cosine(step)) for step in range(100, 1001, 50)]
    assert all(a > b for a, b in zip(values, values[1:-1]))  # strictly decreasing
    assert float(cosine(1000)) == 0.0 and float(cosine(1200)) == 0.0
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(cosine))
    assert float(restored(700)) == pytest.approx(float(cosine(700)))


def test_bad_decay_settings_are_clear_errors():
    with pytest.raises(ValueError, match="Unknown learning-rate decay 'linear'"):
        make_schedule(256, decay="linear")
    with pytest.raises(ValueError, match="needs total_steps"):
        make_optimizer(256, warmup_steps=100, decay="cosine")
    with pytest.raises(ValueError, match="needs total_steps"):
        make_schedule(256, warmup_steps=100, decay="cosine", total_steps=100)
