from hypothesis import example, given, settings
from hypothesis import strategies as st

from shared import sse
from shared.completions import StreamAccumulator

_LINES = st.lists(
    st.sampled_from(["data: a", "data:b", "data", "data:  c", ": note", "event: x", "id: 1",
                     "datax: no", ""]),
    max_size=12,
)  # fmt: skip


def _spec(lines: list[str]) -> list[str]:
    """The events of ``lines`` as the SSE spec reads them (the reference)."""
    events: list[str] = []
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                events.append("\n".join(data))
            data = []
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            if field == "data":
                data.append(value[1:] if value.startswith(" ") else value)
    return events


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


@settings(max_examples=500)
@given(_LINES, st.sampled_from(["\n", "\r\n", "\r"]), st.lists(st.integers(0, 200), max_size=4))
@example(["data: a"], "\r\n", [8, 8])  # an empty read between CR and LF (a clean clone found it)
def test_any_line_ending_and_any_split_reads_as_the_spec_does(
    lines: list[str], end: str, cuts: list[int]
) -> None:
    raw = "".join(line + end for line in lines).encode()
    d = sse.SSEDecoder()
    events: list[str] = []
    at = 0
    for cut in sorted(c % (len(raw) + 1) for c in cuts):
        events += d.feed(raw[at:cut])
        at = cut
    events += d.feed(raw[at:])
    assert events == _spec(lines)
