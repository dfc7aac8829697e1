"""TF Serving's REST protocol for translators: the signatures, request parsing and response shaping.

A request is `{"signature_name"?, "instances": [...]}` (row format: each instance a string, or an object whose
`text` is the source and whose other keys are the signature's other inputs) or `{"signature_name"?, "inputs": ...}`
(columnar format: a list of strings, or an object of named inputs whose lists run over the sentences and whose
scalars apply to all). A row request is answered `{"predictions": [...]}`, a columnar one `{"outputs": ...}`, as TF
Serving answers them: a signature with one output gives its values directly, one with several gives objects (row)
or an object of lists (columnar). Nothing here knows about HTTP or the model.
"""

import dataclasses
import json
import math

DEFAULT_SIGNATURE = "serving_default"


class RequestError(Exception):
    """A request the server refuses: `status` is the HTTP code (4xx), `str(error)` the `{"error": ...}` text."""

    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


@dataclasses.dataclass(frozen=True)
class Tensor:
    """One named input or output of a signature, as TF Serving's metadata describes it."""

    name: str
    dtype: str  # "DT_STRING", "DT_INT32", "DT_FLOAT", "DT_BOOL"
    rank: int  # 0 scalar per request, 1 one value per sentence, 2 a list per sentence

    def metadata(self, signature):
        dims = [{"size": "-1", "name": ""}] * self.rank
        return {"dtype": self.dtype, "tensor_shape": {"dim": dims, "unknown_rank": False},
                "name": f"{signature}_{self.name}:0"}


@dataclasses.dataclass(frozen=True)
class Signature:
    """What one `signature_name` takes and returns.

    `inputs` are per-sentence strings (the first is the source text), `options` are request-wide settings (one value
    for every sentence of a request, with the default given), `outputs` the values returned per sentence.
    `translator_method` is the `BaseTranslator` method that answers it. `optional_inputs` are per-sentence strings a
    request may leave out (a multilingual model's `source_language` and `target_language`, see `with_languages`):
    a row holds `None` for each one left out.
    """

    name: str
    description: str
    inputs: tuple
    options: dict
    outputs: tuple
    translator_method: str
    optional_inputs: tuple = ()

    def with_languages(self):
        """This signature taking a multilingual model's language codes per sentence (`source_language`,
        `target_language`, each optional: the server's defaults where left out)."""
        return dataclasses.replace(self, optional_inputs=LANGUAGE_INPUTS)

    @property
    def row_inputs(self):
        """The inputs of a row, in its order: the required ones, then the optional ones."""
        return self.inputs + self.optional_inputs

    def metadata(self):
        inputs = {t.name: t.metadata(self.name) for t in self.row_inputs}
        for option, (dtype, _) in self.options.items():
            inputs[option] = Tensor(option, dtype, 0).metadata(self.name)
        return {"inputs": inputs, "outputs": {t.name: t.metadata(self.name) for t in self.outputs},
                "method_name": "tensorflow/serving/predict"}


LANGUAGE_INPUTS = (Tensor("source_language", "DT_STRING", 1), Tensor("target_language", "DT_STRING", 1))

SIGNATURES = {
    s.name: s for s in (
        Signature("serving_default", "the translation of each text",
                  (Tensor("text", "DT_STRING", 1),), {}, (Tensor("translation", "DT_STRING", 1),), "translate"),
        Signature("n_best", "the n_best best translations of each text, best first, with their beam scores",
                  (Tensor("text", "DT_STRING", 1),), {"n_best": ("DT_INT32", 4)},
                  (Tensor("translations", "DT_STRING", 2), Tensor("scores", "DT_FLOAT", 2)), "translate_n_best"),
        Signature("score", "the log-probability of given translations: total, per token, and the tokens",
                  (Tensor("text", "DT_STRING", 1), Tensor("translation", "DT_STRING", 1)),
                  {"normalize": ("DT_BOOL", False)},
                  (Tensor("score", "DT_FLOAT", 1), Tensor("token_scores", "DT_FLOAT", 2),
                   Tensor("tokens", "DT_STRING", 2)), "score"),
        Signature("translate_with_prefix", "the translation of each text, continuing its given target prefix",
                  (Tensor("text", "DT_STRING", 1), Tensor("prefix", "DT_STRING", 1)), {},
                  (Tensor("translation", "DT_STRING", 1),), "translate_with_prefix"),
        Signature("align", "the translation of each text and its word alignment ('i-j': source word i, target "
                  "word j)", (Tensor("text", "DT_STRING", 1),), {},
                  (Tensor("translation", "DT_STRING", 1), Tensor("alignment", "DT_STRING", 1)), "align"),
    )
}


@dataclasses.dataclass(frozen=True)
class PredictRequest:
    """A parsed predict request: the signature, one tuple of string inputs per sentence, the options, the format."""

    signature: Signature
    rows: tuple  # one tuple per sentence, in the order of `signature.inputs`
    options: tuple  # sorted (name, value) pairs: equal options batch together
    columnar: bool

    @property
    def batch_key(self):
        return self.signature.name, self.options


def decode_json(body):
    """The JSON object of a request body (bytes); `RequestError` for invalid UTF-8, malformed JSON or no object."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RequestError(f"the request body is not valid UTF-8 (byte {error.start})") from None
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as error:
        raise RequestError(f"malformed JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    except RecursionError:
        raise RequestError("the JSON is nested too deeply") from None
    if not isinstance(payload, dict):
        raise RequestError(f"the request must be a JSON object, got {type(payload).__name__}")
    return payload


def parse_predict(payload, supported, max_instances):
    """A `PredictRequest` from a decoded request object; `RequestError` naming what is wrong.

    Args:
        payload: the request's JSON object.
        supported: the signatures this server's translator answers: their names, or a dict of name to `Signature`
            (where they differ from `SIGNATURES`', as a multilingual model's do).
        max_instances: the most sentences one request may hold (413 above it).
    """
    unknown = sorted(set(payload) - {"signature_name", "instances", "inputs"})
    if unknown:
        raise RequestError(f"unknown field {unknown[0]!r}: a predict request has 'instances' (row format) or "
                           "'inputs' (columnar format), and optionally 'signature_name'")
    name = payload.get("signature_name", DEFAULT_SIGNATURE)
    if not isinstance(name, str):
        raise RequestError("'signature_name' must be a string")
    if name not in supported:
        raise RequestError(f"unknown signature_name {name!r}: this model serves {', '.join(supported)}")
    signature = supported[name] if isinstance(supported, dict) else SIGNATURES[name]
    if ("instances" in payload) == ("inputs" in payload):
        raise RequestError("a predict request has exactly one of 'instances' (row format) and 'inputs' (columnar "
                           "format)")
    columnar = "inputs" in payload
    if columnar:
        rows, options = _columnar(payload["inputs"], signature, max_instances)
    else:
        rows, options = _rows(payload["instances"], signature, max_instances)
    return PredictRequest(signature, rows, tuple(sorted(options.items())), columnar)


def _check_count(count, max_instances):
    if count > max_instances:
        raise RequestError(f"{count} instances in one request; at most {max_instances} (split the request, or start "
                           "the server with a larger --max-instances)", status=413)


def _rows(instances, signature, max_instances):
    if not isinstance(instances, list):
        raise RequestError("'instances' must be a list (one entry per sentence)")
    _check_count(len(instances), max_instances)
    names = [t.name for t in signature.inputs]
    optional = [t.name for t in signature.optional_inputs]
    rows, options = [], None
    for index, instance in enumerate(instances):
        if isinstance(instance, str) and len(names) == 1:
            instance = {names[0]: instance}
        if not isinstance(instance, dict):
            wanted = "a string or an object" if len(names) == 1 else "an object"
            raise RequestError(f"instances[{index}] is {_kind(instance)}; signature {signature.name!r} takes "
                               f"{wanted} with {_input_words(signature)}")
        _check_keys(instance, signature, f"instances[{index}]")
        rows.append(tuple(_string(instance.get(n), f"instances[{index}].{n}") for n in names) + tuple(
            None if instance.get(n) is None else _string(instance[n], f"instances[{index}].{n}") for n in optional))
        found = _options(instance, signature, f"instances[{index}]")
        if options is not None and found != options:
            raise RequestError(f"instances[{index}] has other options than instances[0] ({found} vs {options}); the "
                               "options of one request apply to all its instances")
        options = found
    return tuple(rows), options if options is not None else _options({}, signature, "")


def _columnar(inputs, signature, max_instances):
    names = [t.name for t in signature.inputs]
    if isinstance(inputs, list) and len(names) == 1:
        inputs = {names[0]: inputs}
    if not isinstance(inputs, dict):
        either = "a list of strings or " if len(names) == 1 else ""
        raise RequestError(f"'inputs' is {_kind(inputs)}; signature {signature.name!r} takes {either}an object with "
                           f"{_input_words(signature)}")
    _check_keys(inputs, signature, "inputs")
    columns = []
    for name in names:
        column = inputs.get(name)
        if isinstance(column, str):
            column = [column]
        if not isinstance(column, list):
            raise RequestError(f"inputs.{name} must be a list of strings (one per sentence), got {_kind(column)}")
        _check_count(len(column), max_instances)
        columns.append([_string(v, f"inputs.{name}[{i}]") for i, v in enumerate(column)])
    if len({len(c) for c in columns}) > 1:
        raise RequestError(f"the inputs {', '.join(names)} have different lengths "
                           f"({', '.join(str(len(c)) for c in columns)})")
    count = len(columns[0])
    for tensor in signature.optional_inputs:  # absent: None for every sentence; a string: the same for all
        column = inputs.get(tensor.name)
        if column is None or isinstance(column, str):
            column = [column] * count
        if not isinstance(column, list) or len(column) != count:
            raise RequestError(f"inputs.{tensor.name} must be a string (for every sentence) or a list of {count} "
                               f"strings (one per sentence), got {_kind(column)}"
                               + (f" of {len(column)}" if isinstance(column, list) else ""))
        columns.append([None if v is None else _string(v, f"inputs.{tensor.name}[{i}]") for i, v in enumerate(column)])
    return tuple(zip(*columns)), _options(inputs, signature, "inputs")


def _check_keys(record, signature, where):
    known = {t.name for t in signature.row_inputs} | set(signature.options)
    unknown = sorted(set(record) - known)
    if unknown:
        raise RequestError(f"{where} has an unknown input {unknown[0]!r}; signature {signature.name!r} takes "
                           f"{_input_words(signature)}")
    missing = [t.name for t in signature.inputs if t.name not in record]
    if missing:
        raise RequestError(f"{where} lacks the input {missing[0]!r}; signature {signature.name!r} takes "
                           f"{_input_words(signature)}")


def _options(record, signature, where):
    values = {}
    for name, (dtype, default) in signature.options.items():
        value = record.get(name, default)
        if dtype == "DT_INT32":
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 64:
                raise RequestError(f"{where}.{name} must be an integer from 1 to 64, got {value!r}".lstrip("."))
        elif dtype == "DT_BOOL" and not isinstance(value, bool):
            raise RequestError(f"{where}.{name} must be true or false, got {value!r}".lstrip("."))
        values[name] = value
    return values


def _string(value, where):
    if not isinstance(value, str):
        raise RequestError(f"{where} must be a string, got {_kind(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:  # a lone surrogate escape such as "\ud800": no UTF-8 text has it
        raise RequestError(f"{where} is not valid Unicode text (a lone surrogate at character {error.start})") from None
    return value


def _kind(value):
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _input_words(signature):
    words = " and ".join(repr(t.name) for t in signature.inputs) + " (strings)"
    if signature.optional_inputs:
        words += ", optionally " + " and ".join(repr(t.name) for t in signature.optional_inputs)
    if signature.options:
        words += "; options " + ", ".join(f"{n!r} (default {d!r})" for n, (_, d) in signature.options.items())
    return words


def shape_response(request, results):
    """The response object for `results` (one dict of outputs per sentence, in order), in the request's format."""
    names = [t.name for t in request.signature.outputs]
    if request.columnar:
        if len(names) == 1:
            return {"outputs": [r[names[0]] for r in results]}
        return {"outputs": {n: [r[n] for r in results] for n in names}}
    if len(names) == 1:
        return {"predictions": [r[names[0]] for r in results]}
    return {"predictions": [{n: r[n] for n in names} for r in results]}


def json_safe(value):
    """`value` with non-finite floats as `None` (JSON has no NaN or infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
