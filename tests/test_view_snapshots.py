"""Live views read snapshots only: under a thread switch every microsecond, with many readers
(live views' refresh threads and bare snapshot takers) and one writer feeding the Stream, no
reader ever sees text that later disappears, and no fragment the writer appended is lost."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import nito_nb
from nito_nb._display import LiveDisplay, snapshot

N_FRAGMENTS = 600


def _chunk(delta: dict[str, Any]) -> bytes:
    body = {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


def _fragments() -> Iterator[tuple[str, bytes]]:
    """Numbered fragments of reasoning, content and one tool call's arguments, interleaved."""
    for i in range(N_FRAGMENTS):
        kind = ("reasoning", "content", "tool")[i % 3]
        text = f"<{i}>"
        if kind == "tool":
            call: dict[str, Any] = {"index": 0, "function": {"arguments": text}}
            if i == 2:
                call.update(id="call_1", type="function", function={"name": "f", "arguments": text})
            yield kind, _chunk({"tool_calls": [call]})
        else:
            yield kind, _chunk({kind: text})


class _Page:
    """A display function whose outputs record every bundle they are sent."""

    def __init__(self) -> None:
        self.handles: list[_Handle] = []

    def __call__(self, bundle: dict[str, str], **_: Any) -> _Handle:
        self.handles.append(_Handle(bundle))
        return self.handles[-1]


class _Handle:
    def __init__(self, bundle: dict[str, str]) -> None:
        self.history = [bundle]

    def update(self, bundle: dict[str, str], **_: Any) -> None:
        self.history.append(bundle)


def test_no_reader_loses_or_unsees_a_fragment(switch_every_microsecond: None) -> None:
    source = nito_nb.StreamSource({"model": "m"}, raise_errors=False)
    stream = source.stream
    expected = {"reasoning": "", "content": "", "tool": ""}
    feeds = []
    for kind, data in _fragments():
        expected[kind] += f"<{len(feeds)}>"
        feeds.append(data)
    stop = threading.Event()
    problems: list[str] = []

    def take_snapshots() -> None:
        seen = {"reasoning": "", "content": "", "tool": ""}
        while not stop.is_set():
            snap = snapshot(stream)
            now = {
                "reasoning": snap.reasoning,
                "content": snap.content,
                "tool": snap.tool_calls[0].arguments if snap.tool_calls else "",
            }
            # One moment: the fragments seen, all kinds together, are the first m that were sent.
            numbers = sorted(int(n) for n in re.findall(r"<(\d+)>", "".join(now.values())))
            if numbers != list(range(len(numbers))) or snap.n_chunks != len(numbers):
                problems.append(f"torn: {len(numbers)} fragments, {snap.n_chunks} chunks")
            for kind, text in now.items():
                # What a reader saw stays (a prefix of everything later) and is what was sent.
                if not (text.startswith(seen[kind]) and expected[kind].startswith(text)):
                    problems.append(f"{kind}: {seen[kind][-20:]!r} then {text[-20:]!r}")
            seen = now

    pages = [_Page() for _ in range(3)]
    displays = [LiveDisplay(stream, format="text", max_rate=1000, display=page) for page in pages]
    readers = [threading.Thread(target=take_snapshots) for _ in range(5)]
    for reader in readers:
        reader.start()
    for display in displays:
        display.start()  # each with its refresh thread, rendering from snapshots

    def write() -> None:
        for t_ns, data in enumerate(feeds, 1):
            source.feed(data, t_ns)
            if t_ns % 7 == 0:
                for display in displays:
                    display.update()  # the feeding thread renders too, as the magic's does

    writer = threading.Thread(target=write)
    writer.start()
    writer.join()
    source.feed(b"data: [DONE]\n\n", len(feeds) + 1)
    source.end(len(feeds) + 2)
    stop.set()
    for reader in readers:
        reader.join()
    for display in displays:
        display.finish()

    assert not problems, problems[:5]
    final = stream.snapshot()
    assert final.reasoning == expected["reasoning"] and final.content == expected["content"]
    assert [c.arguments for c in final.tool_calls] == [expected["tool"]]
    for page in pages:
        shown = "".join(handle.history[-1]["text/plain"] for handle in page.handles)
        assert expected["content"] in shown and expected["tool"] in shown
        assert "<599>" in shown and shown.index("Reasoning") < shown.index("<1>")
