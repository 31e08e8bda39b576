from shared import sse
from shared.completions import StreamAccumulator


def test_encode_roundtrip() -> None:
    d = sse.SSEDecoder()
    assert d.feed(sse.encode({"a": 1}) + sse.DONE) == ['{"a":1}', "[DONE]"]


def test_split_anywhere_and_comments() -> None:
    raw = b': keepalive\n\ndata: {"x": 1}\r\n\r\nevent: ping\ndata: line1\ndata: line2\n\n'
    for cut in range(len(raw)):
        d = sse.SSEDecoder()
        events = d.feed(raw[:cut]) + d.feed(raw[cut:])
        assert events == ['{"x": 1}', "line1\nline2"], cut


def test_cut_stream_flushes_last_event() -> None:
    d = sse.SSEDecoder()
    assert d.feed(b"data: tail") == []
    assert d.close() == ["tail"]


def test_multibyte_utf8_split_across_chunks_stays_whole() -> None:
    payload = "data: héllo 😀\n\n".encode()
    for cut in range(len(payload)):
        d = sse.SSEDecoder()
        assert d.feed(payload[:cut]) + d.feed(payload[cut:]) == ["héllo 😀"], cut


def test_accumulator() -> None:
    acc = StreamAccumulator()
    acc.add('{"choices":[{"delta":{"role":"assistant","content":""}}]}')
    acc.add('{"choices":[{"delta":{"content":"Hel"}}]}')
    acc.add('{"choices":[{"delta":{"content":"lo"},"finish_reason":"stop"}]}')
    acc.add('{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}')
    assert acc.add("[DONE]") is None
    assert acc.content == "Hello" and acc.complete and acc.done
    assert acc.usage == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


def test_accumulator_rejects_errors_and_tools() -> None:
    acc = StreamAccumulator()
    acc.add('{"error":{"message":"boom"}}')
    assert not acc.complete
    acc = StreamAccumulator()
    acc.add('{"choices":[{"delta":{"tool_calls":[{"id":"1"}]},"finish_reason":"stop"}]}')
    assert not acc.complete
