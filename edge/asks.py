"""What each OpenAI endpoint asks of the pipeline: one class per endpoint.

The pipeline (``edge.pipeline``) runs every endpoint the same way: limits -> refusals ->
rules -> cache -> route -> tier -> fallback. An ``Ask`` says only what differs between
endpoints, the way an httpx request carries its method and body while ``Client.send`` does
the sending:

- ``chat``: the request as a conversation, which the rules, the router and the cache read;
- ``refusals``: the parameters each tier cannot honour;
- ``cacheable``: whether a stored answer may stand in for it;
- ``on_core`` / ``on_edge``: which verb of each tier serves it (answer a chat, continue a
  prompt, forward as is).
"""

from __future__ import annotations

from typing import Any, ClassVar

from starlette.requests import Request
from starlette.responses import Response

from edge.context import RequestContext
from edge.settings import LimitSettings
from edge.tenancy.keys import Tenant
from edge.tiers.core import CoreTier
from edge.tiers.local import LocalTier
from shared.errors import ApiError
from shared.parameters import Refusal, Tier, completion_refusals, refusals
from shared.schemas import ChatCompletionRequest, CompletionRequest, Message, ResponsesRequest


class Ask:
    """One request to an OpenAI endpoint, as the pipeline runs it."""

    cacheable: ClassVar[bool] = False
    prompt_param: ClassVar[str] = "messages"  # the parameter a too-long prompt is blamed on
    output_param: ClassVar[str] = "max_tokens"

    def __init__(self, data: dict[str, Any], chat: ChatCompletionRequest) -> None:
        self.data = data  # the JSON body as the client sent it
        self.chat = chat  # what the rules, the router and the cache read

    def prompt_chars(self) -> int:
        return len(self.chat.prompt_text())

    def refusals(self, *, core_multimodal: bool) -> dict[Tier, Refusal]:
        return refusals(self.data, core_multimodal=core_multimodal)

    def check(self, limits: LimitSettings) -> None:
        """The edge's request limits, the same for every endpoint."""
        if len(self.chat.messages) > limits.max_messages:
            raise ApiError(
                400, f"too many messages: at most {limits.max_messages}", param="messages",
                code="too_many_messages",
            )  # fmt: skip
        out = self.chat.output_limit
        if out is not None and out > limits.max_output_tokens:
            raise ApiError(
                400, f"{self.output_param} may be at most {limits.max_output_tokens}",
                param=self.output_param,
                code="max_tokens_too_large",
            )  # fmt: skip
        if self.prompt_chars() > limits.max_prompt_chars:
            raise ApiError(
                400, f"prompt too long: at most {limits.max_prompt_chars} characters",
                param=self.prompt_param, code="context_length_exceeded",
            )  # fmt: skip

    async def on_core(
        self, core: CoreTier, request: Request, ctx: RequestContext, tenant: Tenant
    ) -> Response:
        raise NotImplementedError

    async def on_edge(self, local: LocalTier, request: Request, ctx: RequestContext) -> Response:
        raise NotImplementedError


class ChatAsk(Ask):
    """``POST /v1/chat/completions``: either tier answers the chat; answers are cached."""

    cacheable = True

    def __init__(self, data: dict[str, Any], req: ChatCompletionRequest) -> None:
        super().__init__(data, req)

    async def on_core(
        self, core: CoreTier, request: Request, ctx: RequestContext, tenant: Tenant
    ) -> Response:
        return await core.answer(request, self.chat, self.data, ctx, tenant)

    async def on_edge(self, local: LocalTier, request: Request, ctx: RequestContext) -> Response:
        return await local.answer(request, self.chat, ctx)


class CompletionAsk(Ask):
    """``POST /v1/completions``: the edge model continues the prompt as it is (no chat
    template), the core gets the request as it is. Never cached: a near-duplicate prompt
    continued as raw text is not the same question."""

    prompt_param = "prompt"

    def __init__(self, data: dict[str, Any], req: CompletionRequest) -> None:
        super().__init__(data, req.as_chat())
        self.req = req

    def prompt_chars(self) -> int:
        return len(str(self.req.prompt))  # token-id prompts count too

    def refusals(self, *, core_multimodal: bool) -> dict[Tier, Refusal]:
        return completion_refusals(self.data)

    async def on_core(
        self, core: CoreTier, request: Request, ctx: RequestContext, tenant: Tenant
    ) -> Response:
        payload = {**self.data, "model": core.model}
        return await core.forward(request, ctx, payload, path="/v1/completions", tenant=tenant)

    async def on_edge(self, local: LocalTier, request: Request, ctx: RequestContext) -> Response:
        return await local.complete(request, self.req, ctx)


def responses_not_served() -> ApiError:
    return ApiError(
        501,
        "the Responses API is not served here; use /v1/chat/completions",
        code="not_implemented",
    )


class ResponsesAsk(Ask):
    """``POST /v1/responses``: the core only (vLLM serves it). A response may carry tools,
    state and reasoning items that the edge model or a stored answer cannot honour, so the
    edge refuses it: "auto" goes to the core, the edge model's name gets a 400."""

    prompt_param = "input"
    output_param = "max_output_tokens"

    def __init__(self, data: dict[str, Any], req: ResponsesRequest) -> None:
        # The rules read the model and the output limit; the prompt is the core's to read.
        chat = ChatCompletionRequest(
            model=req.model,
            messages=[Message(role="user", content="")],
            max_tokens=req.max_output_tokens,
        )
        super().__init__(data, chat)

    def prompt_chars(self) -> int:
        return len(str(self.data.get("input", ""))) + len(str(self.data.get("instructions", "")))

    def refusals(self, *, core_multimodal: bool) -> dict[Tier, Refusal]:
        no = Refusal("model", f"'{self.chat.model}' does not serve the Responses API")
        return {"edge": no}

    async def on_core(
        self, core: CoreTier, request: Request, ctx: RequestContext, tenant: Tenant
    ) -> Response:
        payload = {**self.data, "model": core.model}
        try:
            return await core.forward(request, ctx, payload, path="/v1/responses", tenant=tenant)
        except ApiError as exc:
            if exc.status in (404, 405):  # engines without the endpoint
                raise responses_not_served() from None
            raise
