"""``/openapi.json``: the edge's public API, generated from the same pydantic models that
validate requests, so the document cannot drift from what the code accepts."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from shared import parameters
from shared.schemas import (
    ChatCompletionRequest,
    CompletionRequest,
    EmbeddingRequest,
    ResponsesRequest,
)


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(BaseModel):
    error: ErrorDetail


class AssistantMessage(BaseModel):
    role: Literal["assistant"]
    content: str | None


class Choice(BaseModel):
    index: int
    message: AssistantMessage
    finish_reason: str | None


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[Choice]
    usage: Usage | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[ModelCard]


class Embedding(BaseModel):
    object: Literal["embedding"]
    index: int
    embedding: list[float] | str  # str: base64 of little-endian float32


class EmbeddingUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingList(BaseModel):
    object: Literal["list"]
    model: str
    data: list[Embedding]
    usage: EmbeddingUsage


class TextChoice(BaseModel):
    index: int
    text: str
    logprobs: Any = None
    finish_reason: str | None


class TextCompletion(BaseModel):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[TextChoice]
    usage: Usage | None = None


class ResponseObject(BaseModel):
    """A Responses API answer, as the core's vLLM writes it (relayed unchanged)."""

    model_config = ConfigDict(extra="allow")

    id: str
    object: Literal["response"]


MODELS: list[type[BaseModel]] = [
    ChatCompletionRequest, ChatCompletion, ErrorResponse, ModelList, EmbeddingRequest,
    EmbeddingList, CompletionRequest, TextCompletion, ResponsesRequest, ResponseObject,
]  # fmt: skip

_ERRORS = {
    "400": "Malformed JSON, invalid fields or limits exceeded",
    "401": "Missing, invalid or revoked API key",
    "403": "The key may not use this model",
    "404": "Unknown model",
    "408": "The request body did not arrive in time",
    "413": "Request body too large",
    "429": "Rate or concurrency limit reached (see Retry-After)",
    "502": "The core failed while answering",
    "503": "No tier can answer now (see Retry-After)",
}


_SSE_EVENT = {
    "type": "object",
    "properties": {"data": {"type": "string"}, "event": {"type": "string"}},
    "required": ["data"],
}


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(model: type[BaseModel]) -> dict[str, Any]:
    return {"application/json": {"schema": _ref(model)}}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": _json(ErrorResponse)}


def _post(
    operation: str,
    request: type[BaseModel],
    answer: type[BaseModel],
    *,
    stream: bool,
    more: dict[str, str] | None = None,
) -> dict[str, Any]:
    content: dict[str, Any] = dict(_json(answer))
    if stream:
        content["text/event-stream"] = {"schema": _SSE_EVENT}
    return {
        "post": {
            "operationId": operation,
            "security": [{"bearer": []}],
            "requestBody": {"required": True, "content": _json(request)},
            "responses": {
                "200": {"description": "The answer (server-sent events if stream)",
                        "content": content},
                **{code: _error(text) for code, text in {**_ERRORS, **(more or {})}.items()},
            },
        }
    }  # fmt: skip


def _audit(request: dict[str, Any]) -> None:
    """The parameter audit (shared.parameters), on each chat request property."""
    for name, edge, core in parameters.table():
        prop = request.setdefault(name, {"title": name.replace("_", " ").capitalize()})
        prop["x-edgecore-edge"] = edge
        prop["x-edgecore-core"] = core


def openapi(
    model_names: list[str], max_messages: int, embed_models: list[str] | None = None
) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for model in MODELS:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    # What the edge enforces beyond the generic OpenAI schema.
    request = schemas["ChatCompletionRequest"]["properties"]
    request["model"] = {"type": "string", "enum": model_names, "title": "Model"}
    request["messages"]["maxItems"] = max_messages
    stop = request["stop"]["anyOf"]
    for option in stop:
        if option.get("type") == "array":
            option["maxItems"] = 4
    _audit(request)
    schemas["CompletionRequest"]["properties"]["model"] = request["model"]
    if embed_models:
        embed = schemas["EmbeddingRequest"]["properties"]
        embed["model"] = {"type": "string", "enum": embed_models, "title": "Model"}
    secured: list[dict[str, list[str]]] = [{"bearer": []}]
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "edgecore edge",
            "version": "1",
            "description": "OpenAI-compatible chat completions served from the nearest edge.",
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "paths": {
            "/v1/chat/completions": {
                "post": {
                    "operationId": "createChatCompletion",
                    "security": secured,
                    "requestBody": {"required": True, "content": _json(ChatCompletionRequest)},
                    "responses": {
                        "200": {
                            "description": "The answer: JSON, or server-sent events if stream",
                            "content": {
                                **_json(ChatCompletion),
                                # One schema per event (OpenAPI 3.1): a chat.completion.chunk
                                # JSON object, or "[DONE]", in `data`.
                                "text/event-stream": {"schema": _SSE_EVENT},
                            },
                        },
                        **{code: _error(text) for code, text in _ERRORS.items()},
                    },
                }
            },
            "/v1/completions": _post(
                "createCompletion", CompletionRequest, TextCompletion, stream=True
            ),
            "/v1/embeddings": _post(
                "createEmbedding", EmbeddingRequest, EmbeddingList, stream=False
            ),
            "/v1/responses": _post(
                "createResponse",
                ResponsesRequest,
                ResponseObject,
                stream=True,
                more={"501": "The Responses API is not served by this deployment"},
            ),
            "/v1/models": {
                "get": {
                    "operationId": "listModels",
                    "security": secured,
                    "responses": {
                        "200": {
                            "description": "Models this key may use",
                            "content": _json(ModelList),
                        },
                        "401": _error(_ERRORS["401"]),
                    },
                }
            },
            "/healthz": {
                "get": {"operationId": "health", "responses": {"200": {"description": "Alive"}}}
            },
            "/readyz": {
                "get": {
                    "operationId": "ready",
                    "responses": {
                        "200": {"description": "Some tier can answer (maybe degraded)"},
                        "503": {"description": "No tier can answer"},
                    },
                }
            },
        },
    }
