"""The texts the scenarios stream: prose with Markdown and non-ASCII text, reasoning, answers."""

from __future__ import annotations

import random

CHAT_ANSWERS = (
    """## Streaming, in short

A **gateway** sits between your code and many model providers: one key, one endpoint, one bill. \
When you ask for `stream: true`, the answer comes back as *Server-Sent Events*, a few characters \
at a time, so you can read it while the model is still writing.

What happens on the wire:

1. The client sends one `POST /v1/chat/completions`.
2. The gateway answers `200` with `Content-Type: text/event-stream`.
3. Every event carries one JSON chunk; the last one is `data: [DONE]`.

Things worth measuring:

- **Time to first token**: how long before anything shows up.
- **Tokens per second**: how fast the rest arrives.
- **Stalls**: the longest gap between two chunks.

A minimal client in Python:

```python
import httpx

with httpx.stream("POST", url, json=body) as response:
    for line in response.iter_lines():
        if line.startswith("data: "):
            print(line[6:])
```

| metric | typical value | what it tells you |
| --- | ---: | --- |
| TTFT | 0.4 s | queueing and prompt processing |
| TPS | 80 tok/s | decoding speed |
| ITL p99 | 45 ms | jitter of the network and the model |

Non-ASCII travels fine: café, naïve, Grüße, 日本語のテキスト, Ελληνικά, emoji 🚀✨, and \
math like ∑ xᵢ ≤ ∞.

> Tip: when a stream fails halfway, keep what arrived: it is still the user's answer.
""",
    """## Three days in Lyon

Lyon rewards a slow pace: *bouchons*, traboules and two rivers. Here is a plan that keeps the \
walking reasonable and the lunches long.

**Day 1: Vieux-Lyon and Fourvière**

- Morning: the traboules of Saint-Jean, then the funicular up to the basilica.
- Afternoon: the Roman theatres, with a view over the Saône.
- Evening: a bouchon, for a *salade lyonnaise* and a quenelle.

**Day 2: Presqu'île and Croix-Rousse**

1. Place Bellecour, then north along Rue de la République.
2. The Mur des Canuts, the largest trompe-l'œil in Europe.
3. Sunset on the quays of the Rhône.

**Day 3: Halles Paul Bocuse and the Confluence**

| stop | time | cost |
| --- | ---: | ---: |
| Halles Paul Bocuse | 2 h | 25 € |
| Musée des Confluences | 3 h | 12 € |
| Boat on the Saône | 1 h | 15 € |

To keep the budget in a notebook:

```python
costs = {"halles": 25, "musée": 12, "bateau": 15}
print(sum(costs.values()), "€")
```

Useful words: *merci*, *s'il vous plaît*, *l'addition*. Bon voyage, and ありがとう for asking! 🇫🇷
""",
)

REASONING_TEXT = (
    "The user asked a question; let me work out what they need. First, restate it: they want a "
    "short, correct answer with one example. Options: explain the idea in one paragraph, or give "
    "a list. A list is easier to scan. Check the edge cases: empty input, very long input, and "
    "non-ASCII text such as “naïve” or 東京. All fine. Now draft the answer."
)
REASONING_SUMMARY = (
    "**Planning the answer**: restate the question, pick a list format, check edge cases, draft."
)
REASONING_ANSWER = """Here is the short version:

- Restate the question before answering it.
- Prefer a list when the answer has several parts.
- Check the edge cases: empty input, very long input, non-ASCII text (naïve, 東京).

That is all there is to it."""

WEB_ANSWER = (
    "According to recent sources, server-sent events remain the usual way to stream model output "
    "over HTTP [1]. The format is a plain-text protocol defined by the HTML standard [2], and "
    "OpenAI-compatible gateways add a final `data: [DONE]` event [1].\n\n"
    "Sources:\n"
    "1. [Streaming responses](https://example.com/streaming)\n"
    "2. [HTML Living Standard: server-sent events](https://html.spec.whatwg.org/multipage/server-sent-events.html)\n"
)
FREE_ANSWER = (
    "This answer was served on the Free plan: same model, same format, a daily request limit. "
    "The `free_tier` object on this stream says how many requests are left today."
)
SLOW_ANSWER = "After a long think: the answer is **42**. Thanks for waiting."

# sim/server's answer: 64 tokens exactly (`_writer.tokenize`), the length docs/SIMULATOR.md's
# capacity figures are worked out for (tests/test_sim_capacity.py checks it).
SERVER_ANSWER = (
    "A model server answers a few requests at once, one in each slot of its batch. When every slot "
    "is busy, a new request waits in the queue and its first token comes later; once the queue is "
    "full as well, the server answers 429 and says when to retry. In a fuller batch each request "
    "decodes a little slower and ends later."
)


def long_fragments(seed: int) -> list[str]:
    """A period of ~4-byte Markdown fragments: bold headings, sentences and paragraphs."""
    rng = random.Random(seed)
    words = [
        "the", "and", "api", "key", "log", "row", "sse", "tok", "run", "gap",
        "bit", "raw", "new", "old", "one", "two", "map", "sum", "add", "end",
    ]  # fmt: skip
    fragments: list[str] = []
    for paragraph in range(13):
        fragments.extend(["**Part", f" {paragraph + 1}.**", "\n\n"])
        for _ in range(rng.randint(3, 6)):
            fragments.append(" " + rng.choice(words).capitalize())
            fragments.extend(" " + rng.choice(words) for _ in range(rng.randint(4, 12)))
            fragments[-1] += "."
        fragments[-1] += "\n\n"
    return fragments
