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
    with pytest.raises(ValueError, match="needs `d_model`"):
        make_optimizer(warmup_steps=100)
    with pytest.raises(ValueError, match="needs total_steps"):
        make_schedule(256, warmup_steps=100, decay="cosine", total_steps=100)


def test_cosine_matches_keras_cosine_decay_and_its_horizon_moves():
    from keras_transformer.training import WarmupCosineDecay

    ours = WarmupCosineDecay(2e-3, warmup_steps=100, total_steps=1000)
    reference = keras.optimizers.schedules.CosineDecay(0.0, 900, alpha=0.0, warmup_target=2e-3, warmup_steps=100)
    for step in (0, 1, 50, 99, 100, 101, 400, 999, 1000, 1500):
        assert float(ours(step)) == pytest.approx(float(reference(step)), rel=1e-5, abs=1e-12)
    ours.set_total_steps(1900)
    longer = keras.optimizers.schedules.CosineDecay(0.0, 1800, alpha=0.0, warmup_target=2e-3, warmup_steps=100)
    assert ours.total_steps == 1900
    assert float(ours(1000)) == pytest.approx(float(longer(1000)), rel=1e-5)
    assert ours.get_config()["total_steps"] == 1900  # a checkpoint records the moved horizon
    with pytest.raises(ValueError, match="greater than warmup_steps"):
        ours.set_total_steps(100)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_a_compiled_train_step_reads_the_moved_horizon(jit_compile):
    """Moving the horizon behind the current step makes the learning rate 0: the weights must stop changing."""
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    schedule = make_schedule(8, warmup_steps=2, decay="cosine", total_steps=1000)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=make_optimizer(schedule=schedule), loss="mse", jit_compile=jit_compile)
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)  # 4 steps: traces the train step with horizon 1000
    before = model.get_weights()
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert not np.allclose(before[0], model.get_weights()[0])  # still learning
    schedule.set_total_steps(3)  # now every later step is past the horizon
    before = model.get_weights()
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    for old, new in zip(before, model.get_weights()):
        np.testing.assert_array_equal(old, new)


def test_moving_the_horizon_mid_decay_keeps_the_rate_continuous():
    from keras_transformer.training import WarmupCosineDecay

    schedule = WarmupCosineDecay(1e-3, warmup_steps=100, total_steps=1000)
    for new_end in (700, 1500):  # sooner, later
        schedule.set_total_steps(1000)
        before = float(schedule(400))
        schedule.set_total_steps(new_end, step=400)
        assert float(schedule(400)) == pytest.approx(before, rel=1e-6)  # no jump
        values = [float(schedule(step)) for step in range(400, new_end + 1, 50)]
        assert all(a > b for a, b in zip(values, values[1:]))
        assert values[-1] == 0.0 and float(schedule(new_end + 100)) == 0.0
        half = float(schedule(400 + (new_end - 400) // 2))
        assert half == pytest.approx(before / 2, rel=1e-3)  # a cosine half-period from `before` to zero
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    for step in (50, 400, 900, 1500):
        assert float(restored(step)) == pytest.approx(float(schedule(step)), rel=1e-6)
    schedule.set_total_steps(300, step=400)  # behind the current step: zero from here on
    assert float(schedule(400)) == 0.0
    schedule.set_total_steps(900, step=400, learning_rate=2e-4)  # a resumed run's logged rate
    assert float(schedule(400)) == pytest.approx(2e-4)
