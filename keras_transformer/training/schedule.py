"""The Transformer learning-rate schedules (warm-up, then inverse-square-root or cosine decay) and the paper's Adam."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up then inverse-square-root decay ("Noam" schedule).

    `lr(step) = scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)`, with `step` counted from 1
    (the optimizer's iteration 0 uses step 1). The peak, at `step == warmup_steps`, is
    `scale * (d_model * warmup_steps)**-0.5`.

    Args:
        d_model: model width.
        warmup_steps: steps of linear warm-up.
        scale: multiplies the whole schedule.

    Example:

    >>> schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    >>> round(float(schedule(3999)), 6)  # the peak, at step 4000
    0.000699

    References:
        Vaswani et al., 2017, "Attention Is All You Need", section 5.3 (https://arxiv.org/abs/1706.03762).
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        if d_model <= 0 or warmup_steps <= 0:
            raise ValueError(f"d_model and warmup_steps must be positive, got {d_model} and {warmup_steps}")
        self.d_model = int(d_model)
        self.warmup_steps = int(warmup_steps)
        self.scale = float(scale)

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        decay = ops.power(step, -0.5)
        warmup = step * (float(self.warmup_steps) ** -1.5)
        return self.scale * (float(self.d_model) ** -0.5) * ops.minimum(decay, warmup)

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}


SCHEDULES = ("inverse_sqrt", "cosine")


def make_schedule(d_model, warmup_steps=4000, scale=1.0, decay="inverse_sqrt", total_steps=None):
    """The learning-rate schedule: linear warm-up to the paper's peak, then `decay`.

    Args:
        d_model: model width (sets the peak, `scale * (d_model * warmup_steps)**-0.5`).
        warmup_steps: steps of linear warm-up.
        scale: multiplies the learning rate.
        decay: `"inverse_sqrt"` (the paper's `TransformerSchedule`, which never reaches zero) or `"cosine"`
            (Keras's `CosineDecay` from the same peak to zero at `total_steps`: for a fixed training budget,
            the last epochs train at a small learning rate).
        total_steps: the last training step, required by `"cosine"`.

    Returns:
        A `keras.optimizers.schedules.LearningRateSchedule`.

    Example:

    >>> schedule = make_schedule(256, warmup_steps=100, decay="cosine", total_steps=1000)
    >>> float(schedule(1000))
    0.0
    """
    if decay == "inverse_sqrt":
        return TransformerSchedule(d_model, warmup_steps, scale)
    if decay != "cosine":
        raise ValueError(f"Unknown learning-rate decay {decay!r}: expected one of {SCHEDULES}.")
    if not total_steps or total_steps <= warmup_steps:
        raise ValueError(
            f"decay='cosine' needs total_steps greater than warmup_steps ({warmup_steps}), got {total_steps}."
        )
    peak = float(scale) * (float(d_model) * float(warmup_steps)) ** -0.5
    return keras.optimizers.schedules.CosineDecay(
        0.0, decay_steps=int(total_steps) - int(warmup_steps), alpha=0.0,
        warmup_target=peak, warmup_steps=int(warmup_steps),
    )


def make_optimizer(d_model, warmup_steps=4000, scale=1.0, clipnorm=None, beta_1=0.9, beta_2=0.98, epsilon=1e-9,
                   decay="inverse_sqrt", total_steps=None):
    """Adam with the paper's settings (`beta_1=0.9`, `beta_2=0.98`, `epsilon=1e-9`) and a warm-up schedule.

    Args:
        d_model: model width (sets the schedule's scale).
        warmup_steps: warm-up steps of the schedule.
        scale: multiplies the learning rate.
        clipnorm: clip each gradient to this norm; `None` does not clip.
        beta_1: Adam's first-moment decay.
        beta_2: Adam's second-moment decay.
        epsilon: Adam's epsilon.
        decay: after the warm-up, `"inverse_sqrt"` (the paper's `TransformerSchedule`) or `"cosine"` to
            zero at `total_steps` (see `make_schedule`).
        total_steps: the last training step (for `"cosine"`).

    Returns:
        A `keras.optimizers.Adam`.

    Example:

    >>> optimizer = make_optimizer(d_model=256, warmup_steps=4000)
    """
    return keras.optimizers.Adam(
        learning_rate=make_schedule(d_model, warmup_steps, scale, decay=decay, total_steps=total_steps),
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        clipnorm=clipnorm,
    )
