"""`RefusalPacing` on a clock the test moves: each address's refusals past its budget are held, longer the more it
sends, never past the cap; a quiet spell restores the budget; addresses are paced apart."""

import pytest

from keras_transformer.serving.pacing import RefusalPacing


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_refusals_past_the_burst_are_held_longer_up_to_the_cap_and_a_quiet_spell_restores_the_budget():
    clock = Clock()
    pacing = RefusalPacing(app=None, rate=2.0, max_delay_s=1.5, clock=clock)
    assert pacing.burst == 8
    assert [pacing.delay("a") for _ in range(8)] == [0.0] * 8  # the burst: at once
    held = [pacing.delay("a") for _ in range(5)]
    assert held == [0.5, 1.0, 1.5, 1.5, 1.5]  # one more refusal a second's half each, up to the cap
    assert pacing.delay("b") == 0.0  # another address has its own budget
    clock.now += 1.0  # two refusals' worth refilled, against a debt of three (bounded at the cap)
    assert pacing.delay("a") == 1.0
    clock.now += 10.0  # a quiet spell: the whole burst again, no more
    assert [pacing.delay("a") for _ in range(9)] == [0.0] * 8 + [0.5]


def test_a_rate_of_zero_paces_nothing_and_negative_settings_are_refused():
    assert RefusalPacing(app=None, rate=0.0).rate == 0.0
    with pytest.raises(ValueError, match="rate and max_delay_s"):
        RefusalPacing(app=None, rate=-1.0)
