"""guidellm's achieved request rate beside nito_nb.run's, against the same simulator (docs/LOAD.md).

    .venv/bin/python bench/bench_guidellm.py                  # the rates, their ratios, the medians
    .venv/bin/python bench/bench_guidellm.py --guidellm PATH --requests 1000 --rounds 2

guidellm is not a dependency of nito_nb (it pulls torch): it lives in a venv of its own, and this
script runs its command line (``guidellm run``) and reads the JSON report it writes. The command is
``--guidellm``, else ``$NITO_GUIDELLM``, else ``.venv-guidellm/bin/guidellm`` in the project; when it is missing the
script says how to make it and exits 0 (``make guidellm-venv`` does the same).

The settings are those of bench_load.py's throughput part: ``--requests`` requests of ``sim/chat``
at ``tps 0`` (``"sim": {"tps": 0, "ttft_ms": 0}`` in every body), at most ``--concurrency`` (64)
in flight, sent as fast as possible, against one simulator in its own process
(``python -m nito_nb.sim``, started as bench_magic.py starts it):

- guidellm: ``--profile kind=concurrent,streams=64`` with ``--constraint kind=max_requests``, its
  ``openai_http`` backend on ``/v1/chat/completions``, the prompts from a JSON Lines file. No
  tokenizer is loaded: guidellm takes the token counts from the stream's ``usage`` (the simulator
  reports it), and in ``guidellm run`` only its synthetic and trace data sources call the
  tokenizer, which this run does not use. ``HF_HUB_OFFLINE=1`` makes sure nothing reaches for the
  hub (a version that did would fail at once instead of waiting on the network).
  ``validate_backend=false``: its check asks ``/health``, which the simulator does not serve.
- nito_nb: ``nito_nb.run(..., rate=1e9, max_requests=N, concurrency=64)`` as bench_load.py calls
  it, with the asyncio engine and with ``engine="processes", workers=2``.

guidellm starts its own worker processes (10 at 64 streams, its ``max_worker_processes``): on a
shared machine they get a larger share of the cores than one Python process does, so read its
rate with the load average printed beside it (``--guidellm-workers 2`` caps them). Each round
reverses the previous one's order.

Achieved rate, one definition for both: requests / (last end − first start), from each tool's
own per-request times (guidellm's ``request_start`` / ``request_end``; ours ``sent_at`` / ``sent_at
+ e2e``). guidellm's own ``requests_per_second`` (the mean of its rate distribution over its
measured window) is printed beside it. TTFT and ITL medians are printed as each tool defines them
(docs/METRICS.md, "Other tools"): guidellm stamps ``time.time()`` on each SSE line as its parser
reads it, so at ``tps 0`` its ITL is its own parsing time per line; ours stamp the read of the
bytes, and at ``tps 0`` most answers arrive in one or a few reads (ITL near 0).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_magic import start_simulator  # noqa: E402

import nito_nb  # noqa: E402

CONCURRENCY = 64
KEY = (
    "sk-bench-not-a-secret"  # an explicit base URL sends a key; the standalone simulator takes any
)
FAST = {"tps": 0, "ttft_ms": 0}
DEFAULT_GUIDELLM = str(ROOT / ".venv-guidellm" / "bin" / "guidellm")
HOW_TO_INSTALL = """\
guidellm: not installed (looked for {path})
It needs a venv of its own (it pulls torch); install torch's CPU build first, else pip takes
several GB of CUDA wheels:
    python3 -m venv .venv-guidellm
    .venv-guidellm/bin/pip install torch==2.13.0      # a local CPU wheel; else: torch --index-url https://download.pytorch.org/whl/cpu
    .venv-guidellm/bin/pip install guidellm
(`make guidellm-venv` runs the same), then pass --guidellm PATH or set NITO_GUIDELLM if it lives elsewhere."""


# -- guidellm --------------------------------------------------------------------------------------


def guidellm_run(
    command: str, base_url: str, n: int, concurrency: int, workdir: Path, workers: int | None = None
) -> dict[str, Any]:
    """Run ``guidellm run`` once against ``base_url`` and return its one benchmark's JSON."""
    prompts = workdir / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"guidellm {i}"}) + "\n" for i in range(n)))
    report = workdir / "guidellm.json"
    report.unlink(missing_ok=True)
    backend = {
        "kind": "openai_http",
        "target": base_url.removesuffix("/v1"),  # its routes already start with v1/
        "model": "sim/chat",
        "request_format": "/v1/chat/completions",
        "http2": False,  # the simulator speaks HTTP/1.1, as nito_nb's client does
        "validate_backend": False,  # its check asks /health, which the simulator does not serve
        "extras": {"body": {"sim": FAST}},
    }
    argv = [
        command,
        "run",
        "--backend",
        json.dumps(backend),
        "--profile",
        json.dumps({"kind": "concurrent", "streams": concurrency}),
        "--constraint",
        json.dumps({"kind": "max_requests", "count": n}),
        "--data",
        json.dumps({"kind": "json_file", "path": str(prompts)}),
        "--output",
        json.dumps({"kind": "json", "path": str(report)}),
        "--disable-console",
    ]
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_DATASETS_CACHE": str(workdir / "datasets"),
    }  # its json loader's cache stays in workdir
    env.pop("NITO_API_KEY", None)  # no key for guidellm: the simulator takes requests without one
    # its setting max_worker_processes (default 10), read from the environment
    if workers is not None:
        env["GUIDELLM__MAX_WORKER_PROCESSES"] = str(workers)
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    if done.returncode != 0 or not report.exists():
        tail = (done.stderr or done.stdout)[-3000:]
        raise RuntimeError(f"guidellm exited with {done.returncode} and no report:\n{tail}")
    benchmarks = json.loads(report.read_text())["benchmarks"]
    if len(benchmarks) != 1:
        raise RuntimeError(f"guidellm wrote {len(benchmarks)} benchmarks, expected 1")
    return {"benchmark": benchmarks[0], "wall": wall}


def guidellm_figures(benchmark: dict[str, Any]) -> dict[str, Any]:
    """Rate (our definition and guidellm's own), TTFT / ITL medians (its own) from its report."""
    requests = benchmark["requests"]
    ok = requests["successful"]
    if not ok:
        raise RuntimeError("guidellm: no successful request")
    body = json.loads(ok[0]["request_args"])["body"]  # what it sent: the same workload as ours?
    if body.get("model") != "sim/chat" or body.get("sim") != FAST or not body.get("stream"):
        raise RuntimeError(f"guidellm did not send the expected body: {body}")
    timings = [r["info"]["timings"] for r in ok]
    first = min(t["request_start"] for t in timings)
    last = max(t["request_end"] for t in timings)
    metrics = benchmark["metrics"]
    return {
        "n": len(ok),
        "n_not_ok": len(requests["errored"]) + len(requests["incomplete"]),
        "rate": len(ok) / (last - first),
        "own_rate": metrics["requests_per_second"]["successful"]["mean"],
        "ttft_p50": metrics["time_to_first_token_ms"]["successful"]["median"] / 1e3,
        "itl_p50": metrics["inter_token_latency_ms"]["successful"]["median"] / 1e3,
        "output_tokens_p50": metrics["output_token_count"]["successful"]["median"],
        "processes": benchmark["scheduler_state"]["num_processes"],
    }


# -- nito_nb.run (as bench_load.py calls it) -------------------------------------------------------

ENGINES = {
    "nito_nb.run (asyncio)": {},
    "nito_nb.run processes=2": {"engine": "processes", "workers": 2},
}


def ours_run(base_url: str, n: int, concurrency: int, **options: Any) -> dict[str, Any]:
    run = nito_nb.run(
        [f"ours {i}" for i in range(n)],
        model="sim/chat",
        base_url=base_url,
        api_key=KEY,
        progress=False,
        sim=FAST,
        rate=1e9,
        max_requests=n,
        concurrency=concurrency,
        **options,
    )
    run.wait()
    if run.error is not None:
        raise RuntimeError(f"the run failed: {run.error}")
    r = run.results()
    done = r[r["status"] == "done"]
    if done.empty:
        raise RuntimeError("nito_nb.run: no request ended done")
    ends = (done["sent_at"] + done["e2e"]).max()
    return {
        "n": len(done),
        "n_not_ok": len(r) - len(done),
        "rate": len(done) / (ends - done["sent_at"].min()),
        "ttft_p50": statistics.median(done["ttft"].dropna()),
        "itl_p50": statistics.median(done["itl"].dropna()),
        "tpot_p50": statistics.median(done["tpot"].dropna()),
        "output_tokens_p50": statistics.median(done["completion_tokens"].dropna()),
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.3f} ms"


def print_round(results: dict[str, dict[str, Any]], concurrency: int) -> None:
    g = results["guidellm"]
    print(
        f"  {'guidellm (concurrent, streams=' + str(concurrency) + ')':32s} {g['rate']:8.1f} requests/s  "
        f"(its own requests_per_second {g['own_rate']:.1f}; {g['processes']} worker "
        f"process{'es' if g['processes'] != 1 else ''}; "
        f"{g['wall']:.0f} s with its start-up)"
    )
    for name in ENGINES:
        print(
            f"  {name:32s} {results[name]['rate']:8.1f} requests/s  "
            f"ratio to guidellm {results[name]['rate'] / g['rate']:.2f}"
        )
    for name, r in results.items():
        if r["n_not_ok"]:
            print(f"  {name}: {r['n_not_ok']} of {r['n'] + r['n_not_ok']} requests did not succeed")
    print(f"  {'medians':32s} {'ttft':>12s} {'itl':>12s} {'tpot':>12s}  output tokens")
    print(
        f"  {'guidellm':32s} {_ms(g['ttft_p50'])} {_ms(g['itl_p50'])} {'':>12s}  {g['output_tokens_p50']:g}"
        "  (time_to_first_token_ms, inter_token_latency_ms)"
    )
    for name in ENGINES:
        o = results[name]
        print(
            f"  {name:32s} {_ms(o['ttft_p50'])} {_ms(o['itl_p50'])} {_ms(o['tpot_p50'])}  "
            f"{o['output_tokens_p50']:g}  (ttft, itl per chunk, tpot per token)"
        )


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--guidellm",
        default=os.environ.get("NITO_GUIDELLM") or DEFAULT_GUIDELLM,
        help="the guidellm command of its own venv (default: $NITO_GUIDELLM, else %(default)s)",
    )
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=CONCURRENCY)
    ap.add_argument(
        "--guidellm-workers",
        type=int,
        default=None,
        help="guidellm's worker processes at most (its max_worker_processes; default: its own, 10)",
    )
    ap.add_argument(
        "--rounds", type=int, default=1, help="rounds; each one reverses the previous one's order"
    )
    args = ap.parse_args()
    if min(args.requests, args.concurrency, args.rounds, args.guidellm_workers or 1) < 1:
        print(
            "--requests, --concurrency, --rounds and --guidellm-workers must be at least 1",
            file=sys.stderr,
        )
        return 2

    command = Path(args.guidellm).expanduser()
    if not (command.is_file() and os.access(command, os.X_OK)):
        print(HOW_TO_INSTALL.format(path=command))
        return 0
    version = subprocess.run(
        [str(command), "--version"], capture_output=True, text=True, timeout=300
    )
    said = (version.stdout.strip() or version.stderr.strip()).splitlines()
    print(f"{said[0] if said else 'guidellm, version unknown'} ({command})")

    proc, base_url = start_simulator()
    os.environ["NITO_API_KEY"] = KEY
    n, c = args.requests, args.concurrency
    print(
        f"throughput: {n} requests of sim/chat at tps 0, {c} in flight, sent at once, simulator in its own "
        "process; rate = requests / (last end - first start)"
    )
    try:
        with tempfile.TemporaryDirectory(prefix="bench-guidellm-") as tmp:
            names = ["guidellm", *ENGINES]
            for round_ in range(args.rounds):
                order = names if round_ % 2 == 0 else names[::-1]
                results: dict[str, dict[str, Any]] = {}
                load = os.getloadavg()
                for name in order:
                    if name == "guidellm":
                        out = guidellm_run(
                            str(command), base_url, n, c, Path(tmp), args.guidellm_workers
                        )
                        results[name] = {**guidellm_figures(out["benchmark"]), "wall": out["wall"]}
                    else:
                        results[name] = ours_run(base_url, n, c, **ENGINES[name])
                load_end = os.getloadavg()
                print(
                    f"\nround {round_ + 1} ({', '.join(order)}); load average (1, 5, 15 min) "
                    f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} before, "
                    f"{load_end[0]:.1f} {load_end[1]:.1f} {load_end[2]:.1f} after, on {os.cpu_count()} cores:"
                )
                print_round(results, c)
    except (
        RuntimeError,
        subprocess.TimeoutExpired,
    ) as exc:  # a tool that failed: what it said, no traceback
        print(f"bench_guidellm: {exc}", file=sys.stderr)
        return 1
    finally:
        proc.terminate()
        proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
