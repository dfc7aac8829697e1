"""The Transformer learning-rate schedules (warm-up, then inverse-square-root or cosine decay) and the paper's Adam."""

import math

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


@keras.saving.register_keras_serializable(package="keras_transformer")
class WarmupCosineDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to `peak`, then a cosine decay to zero at `total_steps`, a horizon that can move.

    Until the horizon moves, the same curve as `keras.optimizers.schedules.CosineDecay(0.0, total_steps -
    warmup_steps, alpha=0.0, warmup_target=peak, warmup_steps=warmup_steps)`. `set_total_steps(n, step)` moves the
    horizon while training (the compiled train step reads it: it is a variable) without a jump in the learning
    rate: from `step` on, a new cosine half-period takes the rate from its value at `step` to zero at `n`. This
    lets `FitCosineToBudget` end the decay where a wall-clock budget ends. (On the JAX backend a jitted train step
    sees the values it was traced with; `keras_transformer.training.train` runs on TensorFlow.)

    Args:
        peak: the learning rate at the end of the warm-up.
        warmup_steps: steps of linear warm-up.
        total_steps: the step where the learning rate reaches zero (greater than `warmup_steps`).
        anchor_step: the step where the current cosine segment starts (default: `warmup_steps`).
        anchor_learning_rate: the learning rate there (default: `peak`).

    Example:

    >>> schedule = WarmupCosineDecay(1e-3, warmup_steps=100, total_steps=1100)
    >>> round(float(schedule(600)), 8), float(schedule(1100))  # half-way, the end
    (0.0005, 0.0)
    >>> schedule.set_total_steps(1600, step=600)  # a later end, no jump: from 0.0005 at 600 to zero at 1600
    >>> round(float(schedule(600)), 8), round(float(schedule(1100)), 8)
    (0.0005, 0.00025)
    """

    def __init__(self, peak, warmup_steps, total_steps, anchor_step=None, anchor_learning_rate=None):
        if peak <= 0 or warmup_steps <= 0:
            raise ValueError(f"peak and warmup_steps must be positive, got {peak} and {warmup_steps}")
        self.peak = float(peak)
        self.warmup_steps = int(warmup_steps)
        self._check(total_steps)

        def variable(value, name):
            return keras.Variable(float(value), dtype="float32", trainable=False, name=name)

        self._total_steps = variable(total_steps, "cosine_total_steps")
        self._anchor_step = variable(self.warmup_steps if anchor_step is None else anchor_step, "cosine_anchor_step")
        self._anchor_rate = variable(self.peak if anchor_learning_rate is None else anchor_learning_rate,
                                     "cosine_anchor_learning_rate")

    def _check(self, total_steps):
        if not total_steps or int(total_steps) <= self.warmup_steps:
            raise ValueError(
                f"decay='cosine' needs total_steps greater than warmup_steps ({self.warmup_steps}), got {total_steps}."
            )

    @staticmethod
    def _read(variable):
        return float(ops.convert_to_numpy(variable))

    @property
    def total_steps(self):
        """The current horizon (the step where the learning rate reaches zero)."""
        return int(round(self._read(self._total_steps)))

    def set_total_steps(self, total_steps, step=None, learning_rate=None):
        """Moves the horizon to `total_steps`; given the current `step`, the rate goes on from its value there.

        Without `step` the whole decay is re-timed, as if it had been sized for `total_steps` from the start;
        with the horizon at or before `step`, the rate is zero from there on. `learning_rate` overrides the rate
        at `step` (a resumed run passes the one it had logged, since the schedule's own history is not saved).
        """
        self._check(total_steps)
        if step is not None and self.warmup_steps <= int(step) < int(total_steps):
            rate = self._read(self(step)) if learning_rate is None else float(learning_rate)
            self._anchor_step.assign(float(step))
            self._anchor_rate.assign(rate)
        elif step is None:
            self._anchor_step.assign(float(self.warmup_steps))
            self._anchor_rate.assign(self.peak)
        self._total_steps.assign(float(total_steps))

    def __call__(self, step):
        step = ops.cast(step, "float32")
        warming = self.peak * step / float(self.warmup_steps)
        span = ops.maximum(self._total_steps - self._anchor_step, 1.0)
        progress = ops.clip((step - self._anchor_step) / span, 0.0, 1.0)
        decaying = 0.5 * self._anchor_rate * (1.0 + ops.cos(math.pi * progress))
        decaying = ops.where(step >= self._total_steps, 0.0, decaying)
        return ops.where(step < float(self.warmup_steps), warming, decaying)

    def get_config(self):
        return {
            "peak": self.peak,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
            "anchor_step": self._read(self._anchor_step),
            "anchor_learning_rate": self._read(self._anchor_rate),
        }


SCHEDULES = ("inverse_sqrt", "cosine")


def make_schedule(d_model, warmup_steps=4000, scale=1.0, decay="inverse_sqrt", total_steps=None):
    """The learning-rate schedule: linear warm-up to the paper's peak, then `decay`.

    Args:
        d_model: model width (sets the peak, `scale * (d_model * warmup_steps)**-0.5`).
        warmup_steps: steps of linear warm-up.
        scale: multiplies the learning rate.
        decay: `"inverse_sqrt"` (the paper's `TransformerSchedule`, which never reaches zero) or `"cosine"`
            (`WarmupCosineDecay` from the same peak to zero at `total_steps`: for a fixed training budget,
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
    return WarmupCosineDecay(peak, warmup_steps=int(warmup_steps), total_steps=int(total_steps))


def make_optimizer(d_model=None, warmup_steps=4000, scale=1.0, clipnorm=None, beta_1=0.9, beta_2=0.98, epsilon=1e-9,
                   decay="inverse_sqrt", total_steps=None, schedule=None):
    """Adam with the paper's settings (`beta_1=0.9`, `beta_2=0.98`, `epsilon=1e-9`) and a warm-up schedule.

    Args:
        d_model: model width (sets the schedule's scale); not needed with `schedule`.
        warmup_steps: warm-up steps of the schedule.
        scale: multiplies the learning rate.
        clipnorm: clip each gradient to this norm; `None` does not clip.
        beta_1: Adam's first-moment decay.
        beta_2: Adam's second-moment decay.
        epsilon: Adam's epsilon.
        decay: after the warm-up, `"inverse_sqrt"` (the paper's `TransformerSchedule`) or `"cosine"` to
            zero at `total_steps` (see `make_schedule`).
        total_steps: the last training step (for `"cosine"`).
        schedule: a learning-rate schedule (e.g. from `make_schedule`) to use instead of building one from
            `d_model`, `warmup_steps`, `scale`, `decay` and `total_steps`.

    Returns:
        A `keras.optimizers.Adam`.

    Example:

    >>> optimizer = make_optimizer(d_model=256, warmup_steps=4000)
    """
    if schedule is None and d_model is None:
        raise ValueError("make_optimizer needs `d_model` (to build the warm-up schedule) or a `schedule`.")
    return keras.optimizers.Adam(
        learning_rate=schedule or make_schedule(d_model, warmup_steps, scale, decay=decay, total_steps=total_steps),
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        clipnorm=clipnorm,
    )
