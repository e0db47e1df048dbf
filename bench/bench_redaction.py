"""What taking the key out of a stream costs: the same bodies fed with and without a key.

    .venv/bin/python bench/bench_redaction.py [--chunks 50000] [--repeats 9]

Every real call carries a key of 8 characters or more, so its stream is protected: each read is
searched for the key's bytes, and the chunks whose decoded text could hold or start the key are
read by ``_core/redaction.py``. Three bodies of the same English-like words (many end in ``s``,
the first character of an ``sk-...`` key) are fed to a ``StreamState`` in 64 KB reads, without a
key and with a 73-character one, interleaved, CPU time of this process (the machine is shared):
plain content chunks (the path most chunks take), plain ``reasoning`` chunks, tool-call argument
fragments of words and of JSON (``shapes.ARGUMENT_PIECES``: escaped quotes in most of them), and
content chunks that carry their token's ``logprobs`` with three alternatives (the token sequence
is a channel too, and such chunks are never plain content). Prints the medians, their ratio and
the spread of the per-round ratios.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time

from shapes import ARGUMENT_PIECES, WORDS  # the same pieces as the other benches' bodies

from nito_nb._core.state import StreamState

KEY = "sk-or-v1-" + "0123456789abcdef" * 4


def body(kind: str, n: int) -> list[bytes]:
    lines = []
    for i in range(n):
        word = WORDS[i % len(WORDS)]
        if kind in ("content", "logprobs"):
            delta: dict[str, object] = {"content": word}
        elif kind == "reasoning":
            delta = {"reasoning": word}
        else:
            if kind == "tool json":
                word = ARGUMENT_PIECES[i % len(ARGUMENT_PIECES)]
            delta = {"tool_calls": [{"index": 0, "function": {"arguments": word}}]}
        choice: dict[str, object] = {"index": 0, "delta": delta, "finish_reason": None}
        if kind == "logprobs":  # one token per chunk, and its three likeliest alternatives
            choice["logprobs"] = {
                "content": [
                    {
                        "token": word,
                        "logprob": -0.1,
                        "bytes": list(word.encode()),
                        "top_logprobs": [
                            {"token": t, "logprob": -1.0, "bytes": list(t.encode())}
                            for t in (word, word.upper(), " the")
                        ],
                    }
                ]
            }
        chunk = {
            "id": "gen-bench",
            "object": "chat.completion.chunk",
            "created": 1751299200,
            "model": "bench/model",
            "choices": [choice],
        }
        lines.append(
            b"data: "
            + json.dumps(chunk, ensure_ascii=False, separators=(",", ":")).encode()
            + b"\n\n"
        )
    data = b"".join(lines) + b"data: [DONE]\n\n"
    return [data[i : i + 65536] for i in range(0, len(data), 65536)]


def feed(reads: list[bytes], key: str | None) -> float:
    state = StreamState()
    state.protect(key)
    gc.collect()
    start = time.process_time()
    for read in reads:
        state.feed(read, 1)
    state.end(2)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    for kind in ("content", "reasoning", "tool", "tool json", "logprobs"):
        reads = body(kind, args.chunks)
        times: dict[str, list[float]] = {"no key": [], "key": []}
        for _ in range(args.repeats):
            times["no key"].append(feed(reads, None))
            times["key"].append(feed(reads, KEY))
        plain, keyed = statistics.median(times["no key"]), statistics.median(times["key"])
        ratios = [k / p for p, k in zip(times["no key"], times["key"], strict=True)]
        print(
            f"{kind:9s} no key {plain * 1e3:7.1f} ms   key {keyed * 1e3:7.1f} ms   "
            f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})   "
            f"({args.chunks / keyed:,.0f} chunks/s with the key; medians of {args.repeats})"
        )


if __name__ == "__main__":
    main()
