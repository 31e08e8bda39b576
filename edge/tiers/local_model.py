"""The edge's small model on onnxruntime-genai (by default SmolLM2-135M-Instruct, INT8).

Generation runs on worker threads; tokens reach the event loop through a queue. A bounded
number of generations run at once (the edge has few cores); waiting for a slot has a
deadline, and a cancelled request stops its generator at the next token.

The model folder says what the model is: its chat template and stop tokens (read by the
runtime from ``genai_config.json`` and the tokenizer files) and its context window
(``model.context_length``, capped by ``LOCAL__CONTEXT_TOKENS``). The execution provider is
``LOCAL__PROVIDER``: one this build of onnxruntime-genai lacks fails at start, by name.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnxruntime_genai as og

from edge.tiers.slots import EdgeBusy, Slots
from shared.schemas import ChatCompletionRequest

__all__ = [
    "EdgeBusy", "Generation", "LocalModel", "PromptTooLong", "ProviderUnavailable",
    "check_provider", "context_length",
]  # fmt: skip


# The providers onnxruntime-genai can run a model on, and how to ask this build for each.
PROVIDERS: dict[str, Callable[[], bool]] = {
    "cpu": lambda: True,
    "cuda": og.is_cuda_available,
    "dml": og.is_dml_available,
    "openvino": og.is_openvino_available,
    "qnn": og.is_qnn_available,
    "webgpu": og.is_webgpu_available,
}


class ProviderUnavailable(RuntimeError):
    """The configured execution provider is unknown, or missing from this build."""


def check_provider(provider: str) -> None:
    available = PROVIDERS.get(provider)
    if available is None:
        raise ProviderUnavailable(
            f"LOCAL__PROVIDER={provider!r} is not an onnxruntime-genai execution provider; "
            f"use one of {', '.join(PROVIDERS)}"
        )
    if not available():
        raise ProviderUnavailable(
            f"LOCAL__PROVIDER={provider!r}: this onnxruntime-genai build cannot run on "
            f"{provider} (install its {provider} build, e.g. onnxruntime-genai-cuda, or use cpu)"
        )


def context_length(model_dir: Path) -> int | None:
    """The model's own context window, from its genai_config.json."""
    try:
        config = json.loads((model_dir / "genai_config.json").read_text())
        return int(config["model"]["context_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class PromptTooLong(Exception):
    def __init__(self, tokens: int, limit: int) -> None:
        super().__init__(f"prompt has {tokens} tokens; the edge model's window is {limit}")
        self.tokens = tokens
        self.limit = limit


@dataclass
class Generation:
    """Filled in while tokens stream; read after the stream ends."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"


class LocalModel:
    def __init__(
        self,
        model_dir: Path,
        *,
        threads: int,
        max_concurrency: int,
        queue_timeout_s: float,
        context_tokens: int,
        max_new_tokens: int,
        repetition_penalty: float = 1.0,
        provider: str = "cpu",
    ) -> None:
        check_provider(provider)  # before loading: a wrong provider fails by name, at once
        config = og.Config(str(model_dir))
        config.clear_providers()  # the CPU
        if provider != "cpu":
            config.append_provider(provider)
        # Threads per generation: set through the config overlay the runtime reads.
        config.overlay(
            json.dumps(
                {
                    "model": {
                        "decoder": {
                            "session_options": {
                                "intra_op_num_threads": threads,
                                "inter_op_num_threads": 1,
                            }
                        }
                    }
                }
            )
        )
        self.model = og.Model(config)
        self.tokenizer = og.Tokenizer(self.model)
        window = context_length(model_dir)
        self.context_tokens = min(context_tokens, window) if window else context_tokens
        self.max_new_tokens = max_new_tokens
        self.repetition_penalty = repetition_penalty
        self.slots = Slots(max_concurrency, queue_timeout_s)
        self._executor = ThreadPoolExecutor(max_concurrency, thread_name_prefix="edge-gen")
        self.cancelled = 0  # generations stopped early because nobody was listening

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    def _prompt_tokens(self, req: ChatCompletionRequest, raw: str | None = None) -> Any:
        if raw is not None:  # /v1/completions: the text as it is, no chat template
            return self.tokenizer.encode(raw)
        messages = [{"role": m.role, "content": m.text()} for m in req.messages]
        prompt = self.tokenizer.apply_chat_template(
            json.dumps(messages), add_generation_prompt=True
        )
        return self.tokenizer.encode(prompt)

    async def stream(
        self, req: ChatCompletionRequest, gen: Generation, raw_prompt: str | None = None
    ) -> AsyncGenerator[str, None]:
        """Yield text deltas; ``gen`` holds token counts and finish reason at the end.

        ``raw_prompt``: continue this text (``/v1/completions``) instead of the chat."""
        async with self.slots.slot():
            loop = asyncio.get_running_loop()
            queue: asyncio.Queue[str | BaseException | None] = asyncio.Queue()
            stop = threading.Event()

            def emit(item: str | BaseException | None) -> None:
                loop.call_soon_threadsafe(queue.put_nowait, item)

            tokens = await loop.run_in_executor(
                self._executor, self._prompt_tokens, req, raw_prompt
            )
            gen.prompt_tokens = len(tokens)
            if gen.prompt_tokens >= self.context_tokens:
                raise PromptTooLong(gen.prompt_tokens, self.context_tokens)
            limit = min(req.output_limit or self.max_new_tokens, self.max_new_tokens)
            limit = min(limit, self.context_tokens - gen.prompt_tokens)
            future = loop.run_in_executor(
                self._executor, self._generate, req, tokens, limit, gen, stop, emit
            )
            try:
                while True:
                    item = await queue.get()
                    if item is None:
                        break
                    if isinstance(item, BaseException):
                        raise item
                    yield item
            finally:
                stop.set()  # client gone or stream closed: free the slot at the next token
                await asyncio.shield(future)

    @property
    def waiting(self) -> int:
        return self.slots.waiting

    @property
    def running(self) -> int:
        return self.slots.running

    def _generate(
        self,
        req: ChatCompletionRequest,
        tokens: Any,
        limit: int,
        gen: Generation,
        stop: threading.Event,
        emit: Any,
    ) -> None:
        try:
            params = og.GeneratorParams(self.model)
            extra = req.model_extra or {}  # vLLM's extensions the edge honours too
            options: dict[str, Any] = {
                "max_length": gen.prompt_tokens + limit,
                "repetition_penalty": float(
                    extra.get("repetition_penalty") or self.repetition_penalty
                ),
            }
            temperature = 1.0 if req.temperature is None else req.temperature
            if temperature > 0:
                options.update(do_sample=True, temperature=temperature, top_p=req.top_p or 1.0)
                if isinstance(extra.get("top_k"), int) and extra["top_k"] > 0:
                    options["top_k"] = extra["top_k"]
            else:
                options.update(do_sample=False)
            if req.seed is not None:
                options["random_seed"] = req.seed % 2**31  # the runtime takes a 32-bit seed
            params.set_search_options(**options)
            generator = og.Generator(self.model, params)
            generator.append_tokens(tokens)
            decoder = self.tokenizer.create_stream()
            stops = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
            text = ""
            gen.finish_reason = "length"
            while not stop.is_set():
                if generator.is_done():
                    gen.finish_reason = "stop" if gen.completion_tokens < limit else "length"
                    break
                generator.generate_next_token()
                token = generator.get_next_tokens()[0]
                gen.completion_tokens += 1
                piece = decoder.decode(token)
                if not piece:
                    continue
                if stops:
                    text += piece
                    hit = min((i for s in stops if (i := text.find(s)) >= 0), default=-1)
                    if hit >= 0:
                        tail = text[:hit]
                        already = len(text) - len(piece)
                        if hit > already:
                            emit(tail[already:])
                        gen.finish_reason = "stop"
                        break
                emit(piece)
            if stop.is_set():
                self.cancelled += 1
            emit(None)
        except BaseException as exc:  # surfaced on the event loop, not lost in the thread
            emit(exc)
