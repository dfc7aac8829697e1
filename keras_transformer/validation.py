"""The rules settings are checked against, and the error that names a refused one (no TensorFlow import).

Each settings dataclass (`TransformerConfig`, `TrainingConfig`) declares every field with `setting(default, rule)`
and checks its values when it is built; CLI flags and config files go through the same dataclasses
(`keras_transformer.runs.config.check_settings`), so every entry point gets the same message: the setting's name,
its flag, the value and what is allowed. Nothing is changed behind the user's back: a value is either accepted as
given or refused.

Example:

>>> check_value("num_layers", -1, {"num_layers": int_rule(1, 1000)})
Traceback (most recent call last):
...
keras_transformer.validation.SettingError: num_layers (--num-layers) = -1: must be an integer >= 1 and <= 1000
"""

import dataclasses
import math
import numbers


class SettingError(ValueError):
    """A setting with a value that is not allowed; the message names the setting, the value and the rule.

    Example:

    >>> try:
    ...     check_value("dropout", 1.5, {"dropout": rate_rule()})
    ... except SettingError as error:
    ...     print(error)
    dropout (--dropout) = 1.5: must be a number >= 0 and < 1
    """


class _Rule:
    def __init__(self, kind, minimum=None, maximum=None, below=None, optional=False, choices=None, text=None,
                 above=None):
        self.kind = kind  # "int", "float", "bool", "str", "choice"
        self.minimum = minimum
        self.above = above  # exclusive lower bound (floats)
        self.maximum = maximum
        self.below = below  # exclusive upper bound (floats)
        self.optional = optional
        self.choices = choices
        self.text = text

    def describe(self):
        if self.text:
            return self.text
        if self.kind == "bool":
            return "must be true or false"
        if self.kind == "choice":
            return f"must be one of {', '.join(repr(c) for c in self.choices)}"
        if self.kind == "str":
            return "must be a non-empty string"
        noun = "an integer" if self.kind == "int" else "a number"
        bounds = []
        if self.minimum is not None:
            bounds.append(f">= {self.minimum}")
        if self.above is not None:
            bounds.append(f"> {self.above}")
        if self.maximum is not None:
            bounds.append(f"<= {self.maximum}")
        if self.below is not None:
            bounds.append(f"< {self.below}")
        text = f"must be {noun}" + (" " + " and ".join(bounds) if bounds else "")
        return text + (" (or unset)" if self.optional else "")

    def accepts(self, value):
        if value is None:
            return self.optional
        if self.kind == "bool":
            return isinstance(value, bool)
        if self.kind == "choice":
            return isinstance(value, str) and value in self.choices
        if self.kind == "str":
            return isinstance(value, str) and bool(value.strip())
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        if self.kind == "int" and not isinstance(value, numbers.Integral):
            return False
        if not math.isfinite(value):
            return False
        if self.minimum is not None and value < self.minimum:
            return False
        if self.above is not None and value <= self.above:
            return False
        if self.maximum is not None and value > self.maximum:
            return False
        if self.below is not None and value >= self.below:
            return False
        return True


def int_rule(minimum=1, maximum=None, optional=False, text=None):
    """An integer in [minimum, maximum]; `text` replaces the generated description in error messages."""
    return _Rule("int", minimum=minimum, maximum=maximum, optional=optional, text=text)


def rate_rule(optional=False):
    """A number in [0, 1)."""
    return _Rule("float", minimum=0, below=1, optional=optional)


def number_rule(above=None, below=None, minimum=None, maximum=None, optional=False):
    return _Rule("float", above=above, below=below, minimum=minimum, maximum=maximum, optional=optional)


def choice_rule(choices):
    return _Rule("choice", choices=tuple(choices))


def flag_rule():
    return _Rule("bool")


def text_rule(optional=False):
    return _Rule("str", optional=optional)


def setting(default=dataclasses.MISSING, rule=None, flag=None):
    """A settings dataclass field that carries its rule and, where the command line has a flag for it, the flag's
    help text (`dataclasses.field` metadata `rule` and `flag`)."""
    return dataclasses.field(default=default, metadata={"rule": rule, "flag": flag})


# The settings whose flag is not `--` + the name with dashes.
_FLAG_NAMES = {"source_language": "--source-lang", "target_language": "--target-lang"}


def rules_of(config_class):
    """`{field: rule}` of a settings dataclass whose fields are declared with `setting`."""
    return {field.name: field.metadata["rule"] for field in dataclasses.fields(config_class)}


def check_known(values, rules):
    """Checks each of `values` that `rules` names (the others are someone else's to check)."""
    for name, value in values.items():
        if name in rules:
            check_value(name, value, rules)


def flag_of(name):
    """The command-line flag of a setting (`num_layers` -> `--num-layers`); messages name both."""
    return _FLAG_NAMES.get(name, "--" + name.replace("_", "-"))


def label(name):
    return f"{name} ({flag_of(name)})"


def _fail(name, value, rule_text):
    return SettingError(f"{label(name)} = {value!r}: {rule_text}")


def check_value(name, value, rules):
    """Checks one setting against `rules[name]`; raises `SettingError` naming it."""
    rule = rules[name]
    if not rule.accepts(value):
        raise _fail(name, value, rule.describe())
