"""A client that disconnects cancels the work behind it: the edge model's generation, or
the core's engine request.

vLLM 0.32 does not count client aborts in ``vllm:request_success_total{finished_reason=
"abort"}``, so the proof is its own gauges: the request stops running, and it never
finishes with ``stop`` or ``length`` (which a 400-token answer would after a few seconds).
"""

from __future__ import annotations

import time

import httpx
import pytest

from tests.conftest import Keys, eventually, metric

pytestmark = pytest.mark.slow

LONG = {
    "temperature": 0.7,  # not cacheable: every request really generates
    "max_tokens": 400,
    "messages": [{"role": "user", "content": "Write a long story about a lighthouse keeper."}],
}


def finished(engine_url: str) -> float:
    return metric(engine_url, "vllm:request_success_total", 'finished_reason="stop"') + metric(
        engine_url, "vllm:request_success_total", 'finished_reason="length"'
    )


def assert_aborted(engine_url: str, finished_before: float) -> None:
    assert eventually(lambda: metric(engine_url, "vllm:num_requests_running") == 0)
    time.sleep(1.0)
    assert finished(engine_url) == finished_before  # it stopped; it did not run to the end


def read_first_event_then_leave(edge_url: str, model: str, headers: dict[str, str]) -> None:
    with httpx.stream(
        "POST",
        edge_url + "/v1/chat/completions",
        json={"model": model, "stream": True, **LONG},
        headers=headers,
        timeout=60,
    ) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and '"content":"' in line:
                break
    # leaving the block closes the connection mid-stream


def test_stream_disconnect_aborts_the_engine_request(
    keys: Keys, edge_url: str, core_url: str, engine_url: str
) -> None:
    before = finished(engine_url)
    before_core = metric(core_url, "edgecore_core_client_disconnects_total")
    read_first_event_then_leave(edge_url, "smollm2-135m-instruct", keys.auth())
    assert_aborted(engine_url, before)
    assert metric(core_url, "edgecore_core_client_disconnects_total") > before_core
    assert eventually(lambda: metric(core_url, "edgecore_core_in_flight") == 0)


def test_non_stream_disconnect_aborts_the_engine_request(
    keys: Keys, edge_url: str, engine_url: str
) -> None:
    before = finished(engine_url)
    body = {"model": "smollm2-135m-instruct", **LONG}
    with pytest.raises(httpx.ReadTimeout):  # the client gives up before the answer
        httpx.post(
            edge_url + "/v1/chat/completions",
            json=body,
            headers=keys.auth(),
            timeout=httpx.Timeout(5, read=1.0),
        )
    assert_aborted(engine_url, before)


def test_stream_disconnect_stops_the_edge_model(keys: Keys, edge_url: str) -> None:
    before = metric(edge_url, "edgecore_edge_client_disconnects_total", 'tier="edge"')
    cancelled = metric(edge_url, "edgecore_edge_model_cancelled_total")
    read_first_event_then_leave(edge_url, "edge-smollm2-135m", keys.auth())
    assert eventually(
        lambda: metric(edge_url, "edgecore_edge_client_disconnects_total", 'tier="edge"') > before
    )
    # The generation thread stopped early instead of writing 400 tokens to nobody.
    assert eventually(lambda: metric(edge_url, "edgecore_edge_model_cancelled_total") > cancelled)
    assert eventually(lambda: metric(edge_url, "edgecore_edge_model_running") == 0)
