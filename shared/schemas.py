"""OpenAI chat-completions request schema, as far as edgecore needs to understand it.

Unknown fields are kept (``extra="allow"``) so the core receives everything the client sent;
fields edgecore reads are validated strictly so bad input fails early with a clear message.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

Role = Literal["system", "developer", "user", "assistant", "tool"]


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Role
    content: str | list[ContentPart] | None = None
    name: str | None = None

    def text(self) -> str:
        """The message's text, with multi-part content joined (non-text parts dropped)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if p.type == "text" and p.text)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=256)
    messages: list[Message] = Field(min_length=1)
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    n: int = Field(default=1, ge=1, le=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    response_format: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    user: str | None = None

    @field_validator("stop")
    @classmethod
    def _stop_limits(cls, v: str | list[str] | None) -> str | list[str] | None:
        if isinstance(v, list) and len(v) > 4:
            raise ValueError("at most 4 stop sequences")
        return v

    @property
    def output_limit(self) -> int | None:
        """The client's cap on generated tokens (``max_completion_tokens`` wins, as in OpenAI)."""
        return self.max_completion_tokens or self.max_tokens

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def prompt_text(self) -> str:
        return "\n".join(m.text() for m in self.messages)


class EmbeddingRequest(BaseModel):
    """``POST /v1/embeddings``: a string, a list of strings, or token arrays."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=256)
    input: str | list[str] | list[int] | list[list[int]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(default=None, ge=1)
    user: str | None = None

    def inputs(self) -> list[str | list[int]]:
        """The inputs as a list: one token array is one input, as in OpenAI's API."""
        if isinstance(self.input, str):
            return [self.input]
        if self.input and all(isinstance(x, int) for x in self.input):
            return [[int(x) for x in self.input if isinstance(x, int)]]
        return [x for x in self.input if not isinstance(x, int)]


class CompletionRequest(BaseModel):
    """``POST /v1/completions`` (legacy text completions), as far as edgecore reads it."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=256)
    prompt: str | list[str] | list[int] | list[list[int]]
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(default=16, ge=1)  # OpenAI's default for this endpoint
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    n: int = Field(default=1, ge=1, le=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    user: str | None = None

    def text(self) -> str | None:
        """The prompt when it is one string (all the edge model takes), else None."""
        if isinstance(self.prompt, str):
            return self.prompt
        if len(self.prompt) == 1 and isinstance(self.prompt[0], str):
            return self.prompt[0]
        return None

    def as_chat(self) -> ChatCompletionRequest:
        """The same ask as a one-message chat request: what the router and limits read."""
        prompt = self.text()
        return ChatCompletionRequest(
            model=self.model,
            messages=[Message(role="user", content=prompt if prompt is not None else "")],
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            stop=self.stop,
            seed=self.seed,
        )


class ResponsesRequest(BaseModel):
    """``POST /v1/responses``, as far as the edge reads it; the rest goes to the core."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=256)
    stream: StrictBool = False
    max_output_tokens: int | None = Field(default=None, ge=1)
