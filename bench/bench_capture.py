"""What the capturing transport costs the openai SDK, over loopback, in one run.

    .venv/bin/python bench/bench_capture.py [--chunks 50000] [--repeats 7]

The same 50,000-chunk body as bench_stream.py (pre-built, in 64 KB writes, so the server costs the
same for everyone) is read by the openai SDK's ``chat.completions.create(stream=True)``, iterating
its chunk objects, twice per round, interleaved: with a plain ``httpx.Client`` and with
``nito_nb.httpx_client()``, which also records the Stream (decode, accumulate, timed log). It prints
the best and median time of each and their ratio: the project promises at most 1.10x.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import httpx
import openai
from bench_stream import build_body, interleaved, print_rates, serve

import nito_nb
from nito_nb import _capture


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    body = build_body(args.chunks)
    expected = nito_nb.read_sse(body).content
    base, server, thread = serve(body)
    messages = [{"role": "user", "content": "bench"}]
    key = "sk-bench-" + "0123456789abcdef" * 3  # as long as a real key: the capture redacts it from every read
    plain = openai.OpenAI(api_key=key, base_url=base, http_client=httpx.Client(timeout=60), max_retries=0)
    captured = openai.OpenAI(api_key=key, base_url=base, http_client=nito_nb.httpx_client(timeout=60),
                             max_retries=0)

    def reader(client: openai.OpenAI) -> Callable[[], str]:
        def run() -> str:
            parts = []
            for chunk in client.chat.completions.create(model="bench/model", messages=messages, stream=True):  # type: ignore[arg-type]
                for choice in chunk.choices:
                    parts.append(choice.delta.content or "")
            return "".join(parts)

        return run

    contenders = {"openai": reader(plain), "openai+capture": reader(captured)}
    for name, run in contenders.items():  # warm up, and check both read the same answer
        assert run() == expected, name
    last = nito_nb.last()
    assert last is not None and last.content == expected and last.status == "done", last
    # each run starts with the same heap
    times = interleaved(contenders, args.repeats, before=_capture.REGISTRY.clear)
    best = print_rates(times, args.chunks + 2, len(body))
    ratio = best["openai+capture"] / best["openai"]
    median_ratio = statistics.median(times["openai+capture"]) / statistics.median(times["openai"])
    print(f"  capture / plain = {ratio:.3f}x best, {median_ratio:.3f}x median  (required <= 1.10x)  "
          f"{'ok' if ratio <= 1.10 else 'ABOVE'}")
    server.should_exit = True
    thread.join(timeout=10)


if __name__ == "__main__":
    main()
