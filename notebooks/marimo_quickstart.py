import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    # nito_nb in marimo

    The quickstart's main steps in a marimo notebook: a stream shown live as a cell's output, reasoning
    and tool calls, a failure halfway, model text kept inert, a chat element that streams through
    nito_nb, and a run of many requests with its progress. marimo runs no IPython magic, so the Python
    API does what `%%nito` does in Jupyter (docs/MARIMO.md).

    **Simulator or Nito?** Without `NITO_API_KEY` every cell runs on the embedded simulator (models
    named `sim/...`, no key, no network). With `NITO_API_KEY` set where marimo started, the same cells
    talk to Nito (`NITO_MODEL` picks the model, default `z-ai/glm-5.2`). The cells that show failures
    always use the simulator.
    """)
    return


@app.cell
def _():
    import os

    import marimo as mo

    import nito_nb

    ON_NITO = bool(os.environ.get("NITO_API_KEY"))
    if ON_NITO:
        MODEL = os.environ.get("NITO_MODEL", "z-ai/glm-5.2")
        REASONING_MODEL = TOOLS_MODEL = MODEL
    else:
        MODEL, REASONING_MODEL, TOOLS_MODEL = "sim/chat", "sim/reasoning", "sim/tools"
    _where = "Nito (NITO_API_KEY is set)" if ON_NITO else "the embedded simulator (NITO_API_KEY is unset)"
    print(f"nito_nb {nito_nb.__version__} on {_where}")
    print(f"model: {MODEL}; reasoning: {REASONING_MODEL}; tools: {TOOLS_MODEL}")
    return MODEL, REASONING_MODEL, TOOLS_MODEL, mo, nito_nb


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## Stream an answer

    A Stream as the cell's output grows while it arrives, rendered as Markdown (escaped: model text
    never becomes live markup), with the status line: time to first token, speed, chunks, finish
    reason, usage and cost. Its final state is the rendering a Jupyter cell shows. marimo's Stop
    (interrupt) closes it and keeps what arrived.
    """)
    return


@app.cell
def _(MODEL, nito_nb):
    answer = nito_nb.stream("How does a streaming chat completion work?", model=MODEL)
    answer
    return (answer,)


@app.cell
def _(answer):
    print(answer)
    print("status:", answer.status, "| finish:", answer.finish_reason, "| ttft:", round(answer.ttft, 3), "s")
    print("usage:", answer.usage)
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## Reasoning and tool calls

    Reasoning shows in its own collapsed section; tool calls show as cards with their arguments.
    `tools=` takes JSON schemas; `nito_nb.tools.tool_schemas` makes them from Python functions.
    """)
    return


@app.cell
def _(REASONING_MODEL, nito_nb):
    thinking = nito_nb.stream("Give me three tips for answering questions well.", model=REASONING_MODEL)
    thinking
    return


@app.cell
def _():
    from typing import Literal

    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
        "Current weather in a city."
        return f"18 degrees {unit} and sunny in {city}"

    return (get_weather,)


@app.cell
def _(TOOLS_MODEL, get_weather, nito_nb):
    from nito_nb.tools import tool_schemas

    weather = nito_nb.stream(
        "What is the weather in Paris?", model=TOOLS_MODEL, tools=tool_schemas([get_weather])
    )
    weather
    return (weather,)


@app.cell
def _(weather):
    for _call in weather.tool_calls:
        print(_call.name, _call.arguments, "->", _call.parsed, "| valid JSON:", _call.valid_json)
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## A mid-stream error, and model text as data

    When the gateway reports an error halfway, the partial answer stays with a banner under it.
    `sim/echo` answers with the prompt: this one tries a script, an image's `onerror` and a
    `javascript:` link, and all three stay inert text.
    """)
    return


@app.cell
def _(nito_nb):
    broken = nito_nb.stream("Explain server-sent events.", model="sim/error-midstream", raise_errors=False)
    broken
    return


@app.cell
def _(nito_nb):
    echo = nito_nb.stream(
        "<img src=x onerror=\"alert('nito-xss')\"> <script>console.log('nito-xss')</script> "
        "[click me](javascript:alert('nito-xss'))",
        model="sim/echo",
    )
    echo
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## Chat

    `nito_nb.marimo_chat` is a model for marimo's chat element: each answer streams through nito_nb
    (reasoning, text, tool calls), with the system prompt and the conversation marimo keeps. Every
    turn's Stream is in `.streams`; the model as a cell's output shows their status lines (timings,
    usage, cost), which the chat element does not.
    """)
    return


@app.cell
def _(MODEL, get_weather, mo, nito_nb):
    chat_model = nito_nb.marimo_chat(MODEL, system="You answer briefly.", tools=[get_weather])
    chat = mo.ui.chat(chat_model, prompts=["How does a streaming chat completion work?"])
    chat
    return chat, chat_model


@app.cell
def _(chat, chat_model):
    chat.value  # this cell runs again after each answer
    chat_model
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## Many requests

    `nito_nb.run` sends many requests (a DuckDB store, resume, load: docs/RUNS.md). The Run as a
    cell's output shows its progress table until it ends (Stop stops it); it is the same Run as in
    Jupyter.
    """)
    return


@app.cell
def _(MODEL, nito_nb):
    questions = ["What is SSE?", "What is a token?", "What is TTFT?", "What is a chunk?"]
    run = nito_nb.run(questions, model=MODEL, concurrency=2)
    run
    return (run,)


@app.cell
def _(run):
    run.results()[["key", "status", "ttft", "content"]]
    return


@app.cell
def _(answer, nito_nb):
    nito_nb.frame(answer).nito.metrics()[["model", "status", "ttft", "e2e", "output_tps"]]
    return


if __name__ == "__main__":
    app.run()
