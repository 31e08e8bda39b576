"""Which OpenAI request parameters each tier honours; the rest are refused, never dropped.

Pure: given a request body, say which parameter (if any) a tier cannot honour and why. The
edge uses it to route ("auto" sends such a request to the core), to refuse with a 400 that
names the parameter when the client pinned a tier that cannot serve it, and to publish the
table in docs/openai-compatibility.md. A parameter that no tier supports is refused for all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Tier = Literal["edge", "core"]


@dataclass(frozen=True)
class Refusal:
    """A parameter a tier cannot honour: the 400's ``param`` and message."""

    param: str
    reason: str

    def message(self, core_model: str | None = None) -> str:
        hint = f"; use model={core_model}" if core_model else ""
        return f"{self.param} {self.reason}{hint}"


# Honoured by both tiers (the edge model: onnxruntime-genai search options; the core: vLLM).
BOTH = frozenset(
    {
        "model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens",
        "temperature", "top_p", "stop", "seed", "user", "n",
        # Accepted everywhere: they tag or prioritise a request, they never change the answer.
        "metadata", "service_tier", "store", "parallel_tool_calls", "modalities",
    }
)  # fmt: skip

# vLLM's sampling extensions the edge model honours too (onnxruntime-genai search options).
EDGE_EXTENSIONS = frozenset({"repetition_penalty", "top_k"})

# Honoured by the core (vLLM's OpenAI server) only.
CORE_ONLY = {
    "logprobs": "is not supported by the edge model (no log probabilities)",
    "top_logprobs": "is not supported by the edge model (no log probabilities)",
    "tools": "is not supported by the edge model (no tool calling)",
    "tool_choice": "is not supported by the edge model (no tool calling)",
    "response_format": "is not supported by the edge model (no structured output)",
    "logit_bias": "is not supported by the edge model",
    "presence_penalty": "is not supported by the edge model",
    "frequency_penalty": "is not supported by the edge model",
}

# Refused by every tier: OpenAI features no served model has.
NOWHERE = {
    "prediction": "is not supported: no tier serves predicted outputs",
    "audio": "is not supported: the served models are text-only",
    "reasoning_effort": "is not supported: the served models have no reasoning mode",
    "web_search_options": "is not supported: edgecore has no web search",
    "functions": "is deprecated by OpenAI and not supported; use tools",
    "function_call": "is deprecated by OpenAI and not supported; use tool_choice",
}

_SERVICE_TIERS = ("auto", "default", "flex")
_NON_TEXT_PARTS = ("image_url", "input_audio", "file")


def _set(value: Any) -> bool:
    """Whether a client really asked for something (``null``/``false``/empty ask nothing)."""
    return value is not None and value is not False and value != [] and value != {}


def refusals(body: Mapping[str, Any], *, core_multimodal: bool = False) -> dict[Tier, Refusal]:
    """For each tier, the first parameter of ``body`` it cannot honour (absent: it can)."""
    out: dict[Tier, Refusal] = {}
    everywhere = _everywhere(body, core_multimodal=core_multimodal)
    if everywhere is not None:
        return {"edge": everywhere, "core": everywhere}
    edge = _edge(body)
    if edge is not None:
        out["edge"] = edge
    return out


def _everywhere(body: Mapping[str, Any], *, core_multimodal: bool) -> Refusal | None:
    for name, reason in NOWHERE.items():
        if _set(body.get(name)):
            return Refusal(name, reason)
    modalities = body.get("modalities")
    if isinstance(modalities, list) and any(m != "text" for m in modalities):
        return Refusal("modalities", "is not supported beyond ['text']: the models are text-only")
    if body.get("store") is True:
        return Refusal("store", "is not supported: edgecore does not keep completions")
    tier = body.get("service_tier")
    if tier is not None and tier not in _SERVICE_TIERS:
        return Refusal("service_tier", f"must be one of {', '.join(_SERVICE_TIERS)}")
    part = non_text_part(body)
    if part is not None and not core_multimodal:
        return Refusal(
            f"messages[].content[].{part}",
            "is not supported: the served models are text-only",
        )
    return None


def _bad_extension(body: Mapping[str, Any]) -> Refusal | None:
    """A value of an extension the edge honours that it cannot take."""
    penalty, top_k = body.get("repetition_penalty"), body.get("top_k")
    if penalty is not None and (
        isinstance(penalty, bool) or not isinstance(penalty, int | float) or not 0 < penalty <= 10
    ):
        return Refusal("repetition_penalty", "must be a number in (0, 10] for the edge model")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < -1):
        return Refusal("top_k", "must be an integer >= -1 for the edge model")
    return None


def _edge(body: Mapping[str, Any]) -> Refusal | None:
    bad = _bad_extension(body)
    if bad is not None:
        return bad
    part = non_text_part(body)
    if part is not None:
        return Refusal(f"messages[].content[].{part}", "is not supported by the edge model")
    for name, reason in CORE_ONLY.items():
        value = body.get(name)
        if name in ("presence_penalty", "frequency_penalty") and value == 0:
            continue  # the neutral value asks nothing
        if name == "response_format" and isinstance(value, dict) and value.get("type") == "text":
            continue
        if _set(value):
            return Refusal(name, reason)
    for name, value in body.items():
        if name not in BOTH | EDGE_EXTENSIONS and name not in CORE_ONLY and _set(value):
            # vLLM's own extensions (top_k, min_p, guided_json, ...): the core's, not ours.
            return Refusal(name, "is not an OpenAI parameter the edge model takes")
    return None


def non_text_part(body: Mapping[str, Any]) -> str | None:
    """The type of the first image/audio/file content part of any message, if any."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            for part in content:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind in _NON_TEXT_PARTS:
                    return str(kind)
    return None


# /v1/completions: what the edge model takes besides BOTH's sampling parameters.
_COMPLETION_BOTH = (
    frozenset({"prompt", "echo", "logprobs", "best_of", "suffix"}) | BOTH | EDGE_EXTENSIONS
)
_COMPLETION_CORE_ONLY = {
    "echo": "is not supported by the edge model",
    "logprobs": "is not supported by the edge model (no log probabilities)",
    "logit_bias": CORE_ONLY["logit_bias"],
    "presence_penalty": CORE_ONLY["presence_penalty"],
    "frequency_penalty": CORE_ONLY["frequency_penalty"],
}


def completion_refusals(body: Mapping[str, Any]) -> dict[Tier, Refusal]:
    """``refusals`` for a ``/v1/completions`` body."""
    if _set(body.get("suffix")):
        no = Refusal("suffix", "is not supported: vLLM does not serve insertions")
        return {"edge": no, "core": no}
    best_of = body.get("best_of")
    if isinstance(best_of, int) and best_of > 1:
        no = Refusal("best_of", "is not supported: vLLM's V1 engine has no best_of")
        return {"edge": no, "core": no}
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt:
        return {"edge": Refusal("prompt", "must be one non-empty string for the edge model")}
    bad = _bad_extension(body)
    if bad is not None:
        return {"edge": bad}
    for name, reason in _COMPLETION_CORE_ONLY.items():
        value = body.get(name)
        if name in ("presence_penalty", "frequency_penalty") and value == 0:
            continue
        if _set(value):
            return {"edge": Refusal(name, reason)}
    for name, value in body.items():
        if name not in _COMPLETION_BOTH and _set(value):
            return {"edge": Refusal(name, "is not an OpenAI parameter the edge model takes")}
    return {}


def table() -> list[tuple[str, str, str]]:
    """(parameter, edge model, core) rows: the published audit (docs and tests)."""
    rows = [(p, "honoured", "honoured") for p in sorted(BOTH - {"model", "messages"})]
    rows += [(p, "honoured", "honoured (vLLM extension)") for p in sorted(EDGE_EXTENSIONS)]
    rows += [(p, "refused: " + r, "honoured (vLLM)") for p, r in CORE_ONLY.items()]
    rows += [(p, "refused", "refused: " + r) for p, r in NOWHERE.items()]
    return rows
