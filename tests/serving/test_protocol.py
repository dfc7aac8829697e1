"""`serving.protocol`: request parsing, option checking and response shaping, without HTTP or a model."""

import json
import math

import pytest

from keras_transformer.serving.protocol import SIGNATURES
from keras_transformer.serving.protocol import RequestError
from keras_transformer.serving.protocol import decode_json
from keras_transformer.serving.protocol import json_safe
from keras_transformer.serving.protocol import parse_predict
from keras_transformer.serving.protocol import shape_response

ALL = list(SIGNATURES)
DEFAULT_ONLY = ["serving_default"]


def parse(payload, supported=ALL, max_instances=8):
    return parse_predict(payload, supported, max_instances)


def refused(payload, supported=ALL, max_instances=8):
    """The `RequestError` `parse_predict` raises for `payload`."""
    with pytest.raises(RequestError) as info:
        parse(payload, supported, max_instances)
    assert str(info.value)
    return info.value


# decode_json


def test_decode_json_returns_the_object():
    assert decode_json('{"instances": ["é"]}'.encode("utf-8")) == {"instances": ["é"]}


@pytest.mark.parametrize("body, words", [
    (b'{"instances": ["\xff"]}', "UTF-8"),
    (b'{"instances": [', "malformed JSON"),
    (b"", "malformed JSON"),
    (b'["a"]', "list"),
    (b"3", "int"),
    (b"null", "NoneType"),
    (b'"text"', "str"),
], ids=["invalid-utf8", "truncated", "empty", "array", "number", "null", "string"])
def test_decode_json_refuses_what_is_not_a_json_object(body, words):
    with pytest.raises(RequestError) as info:
        decode_json(body)
    assert info.value.status == 400
    assert words in str(info.value)


def test_decode_json_refuses_deeply_nested_json_as_a_request_error():
    with pytest.raises(RequestError):
        decode_json(b"[" * 100_000 + b"]" * 100_000)


def test_request_error_is_a_400_unless_told():
    assert RequestError("x").status == 400
    assert RequestError("x", 413).status == 413


# parse_predict: formats


def test_row_strings_and_row_objects_parse_to_the_same_rows():
    strings = parse({"instances": ["a", "b"]})
    objects = parse({"instances": [{"text": "a"}, {"text": "b"}]})
    assert strings.rows == objects.rows == (("a",), ("b",))
    assert strings.signature is SIGNATURES["serving_default"]
    assert not strings.columnar and not objects.columnar
    assert strings.options == ()
    assert strings.batch_key == ("serving_default", ())


@pytest.mark.parametrize("inputs", [["a", "b"], {"text": ["a", "b"]}], ids=["list", "object"])
def test_columnar_list_and_object_parse_to_rows(inputs):
    parsed = parse({"inputs": inputs})
    assert parsed.rows == (("a",), ("b",))
    assert parsed.columnar


def test_columnar_string_is_one_sentence():
    assert parse({"inputs": {"text": "a"}}).rows == (("a",),)


def test_explicit_default_signature_is_the_default():
    assert parse({"signature_name": "serving_default", "instances": ["a"]}) == parse({"instances": ["a"]})


def test_empty_instances_and_inputs_parse_to_no_rows():
    assert parse({"instances": []}).rows == ()
    assert parse({"inputs": []}).rows == ()


def test_two_input_signature_reads_both_inputs_in_order():
    row = parse({"signature_name": "score", "instances": [{"translation": "x", "text": "a"}]})
    assert row.rows == (("a", "x"),)
    columnar = parse({"signature_name": "score", "inputs": {"text": ["a", "b"], "translation": ["x", "y"]}})
    assert columnar.rows == (("a", "x"), ("b", "y"))


# parse_predict: refusals


@pytest.mark.parametrize("payload", [
    {"instance": ["a"]},
    {"instances": ["a"], "inputs": ["a"]},
    {},
    {"signature_name": "serving_default"},
    {"instances": "a"},
    {"instances": {"text": "a"}},
    {"instances": [3]},
    {"instances": [None]},
    {"instances": [["a"]]},
    {"instances": [True]},
    {"instances": [{"txt": "a"}]},
    {"instances": [{"text": "a", "extra": "b"}]},
    {"instances": [{"text": 3}]},
    {"inputs": 3},
    {"inputs": None},
    {"inputs": {"text": 3}},
    {"inputs": {"text": ["a", None]}},
    {"inputs": {"text": ["a"], "extra": ["b"]}},
    {"inputs": {}},
    {"signature_name": "nope", "instances": ["a"]},
    {"signature_name": 1, "instances": ["a"]},
    {"signature_name": None, "instances": ["a"]},
], ids=lambda p: json.dumps(p))
def test_bad_requests_are_400s(payload):
    assert refused(payload).status == 400


def test_a_signature_the_model_does_not_serve_is_refused():
    error = refused({"signature_name": "n_best", "instances": ["a"]}, supported=DEFAULT_ONLY)
    assert error.status == 400 and "n_best" in str(error) and "serving_default" in str(error)


def test_a_two_input_signature_takes_no_bare_strings():
    assert refused({"signature_name": "score", "instances": ["a"]}).status == 400
    assert refused({"signature_name": "score", "inputs": ["a"]}).status == 400
    assert refused({"signature_name": "score", "instances": [{"text": "a"}]}).status == 400


def test_columnar_inputs_must_have_equal_lengths():
    error = refused({"signature_name": "score", "inputs": {"text": ["a", "b"], "translation": ["x"]}})
    assert error.status == 400 and "different lengths" in str(error)


@pytest.mark.parametrize("payload", [
    {"instances": ["a"] * 9},
    {"instances": [{"text": "a"}] * 9},
    {"inputs": ["a"] * 9},
    {"inputs": {"text": ["a"] * 9}},
], ids=["rows", "row-objects", "columnar-list", "columnar-object"])
def test_more_instances_than_max_instances_is_a_413(payload):
    assert refused(payload, max_instances=8).status == 413


def test_exactly_max_instances_is_accepted():
    assert len(parse({"instances": ["a"] * 8}, max_instances=8).rows) == 8
    assert len(parse({"inputs": ["a"] * 8}, max_instances=8).rows) == 8


# parse_predict: options


def test_n_best_defaults_to_4():
    assert parse({"signature_name": "n_best", "instances": ["a"]}).options == (("n_best", 4),)
    assert parse({"signature_name": "n_best", "inputs": ["a"]}).options == (("n_best", 4),)
    assert parse({"signature_name": "n_best", "instances": []}).options == (("n_best", 4),)


@pytest.mark.parametrize("value", [1, 3, 64])
def test_n_best_from_1_to_64_is_taken_in_both_formats(value):
    row = parse({"signature_name": "n_best", "instances": [{"text": "a", "n_best": value}]})
    columnar = parse({"signature_name": "n_best", "inputs": {"text": ["a"], "n_best": value}})
    assert row.options == columnar.options == (("n_best", value),)


@pytest.mark.parametrize("value", [0, -1, 65, True, False, "3", 3.0, None, [3]], ids=repr)
def test_n_best_outside_1_to_64_or_not_an_integer_is_refused(value):
    for payload in ({"signature_name": "n_best", "instances": [{"text": "a", "n_best": value}]},
                    {"signature_name": "n_best", "inputs": {"text": ["a"], "n_best": value}}):
        error = refused(payload)
        assert error.status == 400 and "n_best" in str(error)


def test_normalize_defaults_to_false_and_takes_booleans():
    base = {"text": "a", "translation": "x"}
    assert parse({"signature_name": "score", "instances": [base]}).options == (("normalize", False),)
    assert parse({"signature_name": "score", "instances": [{**base, "normalize": True}]}).options == (
        ("normalize", True),)


@pytest.mark.parametrize("value", [1, 0, "true", None, [True]], ids=repr)
def test_normalize_must_be_a_boolean(value):
    error = refused({"signature_name": "score", "instances": [{"text": "a", "translation": "x", "normalize": value}]})
    assert error.status == 400 and "normalize" in str(error)


def test_options_must_be_equal_across_instances():
    error = refused({"signature_name": "n_best", "instances": [{"text": "a", "n_best": 2}, {"text": "b", "n_best": 3}]})
    assert error.status == 400 and "instances[1]" in str(error)
    assert refused({"signature_name": "n_best", "instances": ["a", {"text": "b", "n_best": 2}]}).status == 400
    same = parse({"signature_name": "n_best", "instances": [{"text": "a", "n_best": 2}, {"text": "b", "n_best": 2}]})
    assert same.options == (("n_best", 2),)
    defaults = parse({"signature_name": "n_best", "instances": ["a", {"text": "b", "n_best": 4}]})
    assert defaults.options == (("n_best", 4),)


def test_requests_batch_together_only_with_equal_signature_and_options():
    two = parse({"signature_name": "n_best", "instances": [{"text": "a", "n_best": 2}]})
    also_two = parse({"signature_name": "n_best", "inputs": {"text": ["b", "c"], "n_best": 2}})
    three = parse({"signature_name": "n_best", "instances": [{"text": "a", "n_best": 3}]})
    default = parse({"instances": ["a"]})
    assert two.batch_key == also_two.batch_key
    assert len({two.batch_key, three.batch_key, default.batch_key}) == 3


# shape_response


def test_one_output_signature_gives_its_values_directly():
    results = [{"translation": "A"}, {"translation": "B"}]
    assert shape_response(parse({"instances": ["a", "b"]}), results) == {"predictions": ["A", "B"]}
    assert shape_response(parse({"inputs": ["a", "b"]}), results) == {"outputs": ["A", "B"]}


def test_multi_output_signature_gives_objects_in_rows_and_an_object_of_lists_in_columns():
    results = [{"translations": ["A", "A2"], "scores": [-0.5, -1.0]}, {"translations": ["B"], "scores": [-0.25]}]
    rows = shape_response(parse({"signature_name": "n_best", "instances": ["a", "b"]}), results)
    assert rows == {"predictions": [{"translations": ["A", "A2"], "scores": [-0.5, -1.0]},
                                    {"translations": ["B"], "scores": [-0.25]}]}
    columns = shape_response(parse({"signature_name": "n_best", "inputs": ["a", "b"]}), results)
    assert columns == {"outputs": {"translations": [["A", "A2"], ["B"]], "scores": [[-0.5, -1.0], [-0.25]]}}


def test_score_response_has_its_three_outputs_and_nothing_else():
    results = [{"score": -1.5, "token_scores": [-1.0, -0.5], "tokens": ["x", "</s>"], "extra": 1}]
    payload = {"text": ["a"], "translation": ["x"]}
    rows = shape_response(parse({"signature_name": "score", "instances": [{"text": "a", "translation": "x"}]}),
                          results)
    assert rows == {"predictions": [{"score": -1.5, "token_scores": [-1.0, -0.5], "tokens": ["x", "</s>"]}]}
    columns = shape_response(parse({"signature_name": "score", "inputs": payload}), results)
    assert columns == {"outputs": {"score": [-1.5], "token_scores": [[-1.0, -0.5]], "tokens": [["x", "</s>"]]}}


def test_no_results_shape_to_empty_lists():
    assert shape_response(parse({"instances": []}), []) == {"predictions": []}
    assert shape_response(parse({"inputs": []}), []) == {"outputs": []}
    assert shape_response(parse({"signature_name": "n_best", "inputs": []}), []) == {
        "outputs": {"translations": [], "scores": []}}


# json_safe


def test_json_safe_turns_non_finite_floats_into_none_at_any_depth():
    value = {"score": math.nan, "scores": [1.5, math.inf, -math.inf], "nested": ({"x": [math.nan]},), "text": "nan"}
    safe = json_safe(value)
    assert safe == {"score": None, "scores": [1.5, None, None], "nested": [{"x": [None]}], "text": "nan"}
    assert json.loads(json.dumps(safe, allow_nan=False)) == safe


def test_json_safe_keeps_finite_values():
    value = {"a": [0.0, -2.5, 3, True, None, "x"]}
    assert json_safe(value) == value
