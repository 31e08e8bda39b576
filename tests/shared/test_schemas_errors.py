import pytest
from pydantic import ValidationError

from shared.errors import ApiError, error_body, from_validation_error
from shared.http import json_object
from shared.schemas import ChatCompletionRequest


def invalid(body: dict[str, object]) -> ApiError:
    with pytest.raises(ValidationError) as info:
        ChatCompletionRequest.model_validate(body)
    return from_validation_error(info.value)


def test_validation_errors_name_the_field() -> None:
    err = invalid({"model": "auto", "messages": []})
    assert err.status == 400 and err.param == "messages"
    err = invalid({"model": "auto", "messages": [{"role": "wizard", "content": "x"}]})
    assert err.param is not None and err.param.startswith("messages.0.role")
    err = invalid({"model": 3, "messages": [{"role": "user", "content": "x"}]})
    assert err.param == "model"
    err = invalid({"model": "auto", "messages": [{"role": "user", "content": "x"}], "n": 2})
    assert err.param == "n"
    err = invalid(
        {"model": "auto", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}
    )
    assert err.param == "max_tokens"


def test_error_body_shape() -> None:
    body = error_body(404, "nope", code="model_not_found", param="model")
    assert body == {
        "error": {
            "message": "nope",
            "type": "not_found_error",
            "param": "model",
            "code": "model_not_found",
        }
    }


@pytest.mark.parametrize("raw", [b"", b"{", b"[1]", b"\xff\xfe", b'"str"'])
def test_json_object_rejects(raw: bytes) -> None:
    with pytest.raises(ApiError) as info:
        json_object(raw)
    assert info.value.status == 400


def test_multipart_content_text() -> None:
    r = ChatCompletionRequest.model_validate(
        {
            "model": "a",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "a"},
                        {"type": "image_url", "image_url": {"url": "x"}},
                        {"type": "text", "text": "b"},
                    ],
                }
            ],
        }
    )
    assert r.messages[0].text() == "a\nb"
    assert r.model_extra == {}
