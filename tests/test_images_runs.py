"""Images in runs (``nito_nb.run(df, images="column")``, docs/IMAGES.md), over HTTP on the
simulator: each row's images are sent (``sim/echo`` says what it received); the key hashes their
bytes; every row is checked before anything is sent; the store keeps descriptors, never data."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import nito_nb
from nito_nb._core.errors import ConfigurationError

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
JPEG = b"\xff\xd8\xff\xe0" + b"jpeg body" * 50
PDF = b"%PDF-1.4\n" + b"%fake but well-started pdf\n" * 20


def _prefix(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def _received(data: bytes, kind: str = "image_url", media_type: str = "image/png") -> str:
    return f"{kind} {media_type} {len(data)} bytes sha256 {_prefix(data)}"


def _images(tmp_path: Path) -> dict[str, bytes]:
    images = {"a.png": PNG, "b.jpg": JPEG, "c.pdf": PDF}
    for name, data in images.items():
        (tmp_path / name).write_bytes(data)
    return images


def _store_text(store: Path) -> str:
    """Every value of every table of the store and of its events' Parquet files, as text: the
    files are compressed, so a grep of their bytes alone would not see a data URL in them."""
    import duckdb

    out = []
    with duckdb.connect(str(store / "runs.duckdb"), read_only=True) as db:
        tables = [
            t for (t,) in db.execute("SELECT table_name FROM information_schema.tables").fetchall()
        ]
        for table in tables:
            out.append(json.dumps(db.execute(f'SELECT * FROM "{table}"').fetchall(), default=str))
        for parquet in sorted((store / "events").glob("*.parquet")):
            out.append(
                json.dumps(
                    db.execute(f"SELECT * FROM read_parquet('{parquet}')").fetchall(), default=str
                )
            )
    return "\n".join(out)


@pytest.mark.spawns  # a store's events writer is a process of its own
def test_each_rows_images_are_sent_and_the_store_keeps_only_their_descriptors(
    tmp_path: Path,
) -> None:
    _images(tmp_path)
    df = pd.DataFrame(
        {
            "caption": ["one", "two", "three", "four"],
            "path": [
                str(tmp_path / "a.png"),
                [str(tmp_path / "b.jpg"), "https://example.org/cat.jpg"],
                None,  # no image: the prompt alone
                [str(tmp_path / "c.pdf")],
            ],
        }
    )
    store = tmp_path / "store"
    run = nito_nb.run(
        df,
        template="Describe {caption}",
        images="path",
        image_detail="low",
        model=["sim/echo"],
        store=str(store),
        progress=False,
    )
    run.wait(timeout=60)
    assert run.error is None
    results = run.results().set_index("row")
    assert (results["status"] == "done").all()
    assert f"[received 1: {_received(PNG)}]" in results.loc[0, "content"]
    assert (
        f"[received 2: {_received(JPEG, media_type='image/jpeg')}; image_url url "
        "https://example.org/cat.jpg]"
    ) in results.loc[1, "content"]
    assert results.loc[2, "content"] == "Describe three"
    assert f"[received 1: {_received(PDF, 'file', 'application/pdf')}]" in results.loc[3, "content"]

    # What was kept: the descriptors (their sha256 are there), never the data.
    kept = "\n".join(
        [
            _store_text(store),
            results.to_json(date_format="iso"),
            run.frame().to_json(date_format="iso"),
        ]
    )
    for data in (PNG, JPEG, PDF):
        assert hashlib.sha256(data).hexdigest() in _store_text(store)
        encoded = base64.b64encode(data).decode()
        assert encoded[:40] not in kept and encoded[-40:] not in kept
    assert "base64" not in kept
    for path in store.rglob("*"):
        if path.is_file():
            raw = path.read_bytes()
            assert b"base64," not in raw and base64.b64encode(PNG)[:40] not in raw
    with nito_nb.open_store(store) as opened:
        request = json.loads(
            opened.sql("SELECT request FROM requests WHERE content LIKE 'Describe one%'")[
                "request"
            ].iloc[0]
        )
    assert request["messages"][-1]["content"][1] == {
        "type": "attachment",
        "attachment": {
            "kind": "image",
            "media_type": "image/png",
            "size": len(PNG),
            "sha256": hashlib.sha256(PNG).hexdigest(),
            "name": "a.png",
            "detail": "low",
        },
    }


@pytest.mark.spawns  # a store's events writer is a process of its own
def test_the_key_hashes_the_bytes_not_the_path(tmp_path: Path) -> None:
    chart = tmp_path / "chart.png"
    chart.write_bytes(PNG)
    store = str(tmp_path / "store")

    def run(path: Path) -> pd.DataFrame:
        df = pd.DataFrame({"q": ["What is it?"], "image": [str(path)]})
        done = nito_nb.run(
            df, template="{q}", images="image", model="sim/echo", store=store, progress=False
        ).wait(timeout=60)
        return done.results()

    first = run(chart)
    assert not first["done_before"].any()
    # the same bytes under another name and folder: the same request, done before
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "copy.png").write_bytes(PNG)
    again = run(other / "copy.png")
    assert again["key"].tolist() == first["key"].tolist() and again["done_before"].all()
    # other bytes at the same path: a new request, sent
    chart.write_bytes(PNG[:-1] + b"\x00")
    changed = run(chart)
    assert changed["key"].tolist() != first["key"].tolist()
    assert not changed["done_before"].any()
    assert _prefix(PNG[:-1] + b"\x00") in changed["content"].iloc[0]


@pytest.mark.parametrize(
    ("cells", "said"),
    [
        (["a.png", "missing.png", "b.jpg"], "images='image', row 1: image "),
        (["a.png", "notes.png", "missing.png"], "row 1: image "),
    ],
)
def test_a_row_that_cannot_be_sent_stops_the_run_before_anything_is_sent(
    tmp_path: Path, cells: list[str], said: str
) -> None:
    _images(tmp_path)
    (tmp_path / "notes.png").write_bytes(b"just text, renamed")
    df = pd.DataFrame({"q": ["x", "y", "z"], "image": [str(tmp_path / c) for c in cells]})
    store = tmp_path / "store"
    with pytest.raises(ConfigurationError) as caught:
        nito_nb.run(df, template="{q}", images="image", model="sim/echo", store=str(store))
    message = str(caught.value)
    assert said in message and "\n" not in message and "nothing was sent" in message
    assert cells[1] in message
    if cells[2] == "missing.png":
        assert "1 other row(s) cannot be sent either: 2" in message
    assert not store.exists()  # no run began


@pytest.mark.parametrize(
    ("prompts", "images", "said"),
    [
        (["a", "b"], "path", "images= names a column of the DataFrame of prompts"),
        (pd.DataFrame({"q": ["a"]}), "path", "'path' is not one (the DataFrame has q)"),
        (pd.DataFrame({"q": ["a"], "path": [b"\x89PNG"]}), "path", "not bytes"),
        (pd.DataFrame({"q": ["a"], "path": [3]}), "path", "images[0] is a int"),
    ],
)
def test_images_mistakes_are_one_line(prompts: Any, images: str, said: str) -> None:
    template = "{q}" if isinstance(prompts, pd.DataFrame) else "{value}"
    with pytest.raises(ConfigurationError) as caught:
        nito_nb.run(prompts, template=template, images=images, model="sim/echo")
    assert said in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("engine", ["asyncio", pytest.param("processes", marks=pytest.mark.spawns)])
def test_an_image_changed_after_the_plan_is_an_error_row_not_a_wrong_key(
    tmp_path: Path, engine: str
) -> None:
    from nito_nb._runs.images import row_images
    from nito_nb._runs.plan import plan
    from nito_nb._runs.runner import Run

    chart = tmp_path / "chart.png"
    chart.write_bytes(PNG)
    df = pd.DataFrame({"q": ["What is it?", "And this?"], "image": [str(chart), None]})
    planned = plan(
        df,
        template="{q}",
        models=["sim/echo"],
        repeats=1,
        params={},
        images=row_images(df, "image", "auto", 10**6),
    )
    chart.write_bytes(JPEG)  # between the plan and the send
    run = Run(planned, progress=False, engine=engine, workers=1 if engine != "asyncio" else None)
    results = run.wait(timeout=120).results().set_index("row")
    assert results.loc[0, "status"] == "failed"
    assert "changed since the run was planned" in results.loc[0, "error_message"]
    assert results.loc[1, "status"] == "done"


@pytest.mark.spawns
def test_worker_processes_send_the_images_too(tmp_path: Path) -> None:
    images = _images(tmp_path)
    df = pd.DataFrame({"q": ["p", "q", "r"], "image": [str(tmp_path / n) for n in images]})
    run = nito_nb.run(
        df,
        template="{q}",
        images="image",
        model="sim/echo",
        engine="processes",
        workers=2,
        progress=False,
    )
    run.wait(timeout=120)
    assert run.error is None
    results = run.results().set_index("row")
    assert (results["status"] == "done").all()
    assert set(results["worker"]) <= {"proc-0", "proc-1"}
    assert _received(PNG) in results.loc[0, "content"]
    assert _received(JPEG, media_type="image/jpeg") in results.loc[1, "content"]
    assert _received(PDF, "file", "application/pdf") in results.loc[2, "content"]


# -- %%nito --over VAR --image COLUMN ---------------------------------------------------------------


def test_over_with_image_sends_each_rows_images_from_the_column(ip: Any, tmp_path: Path) -> None:
    _images(tmp_path)
    ip.user_ns["df"] = pd.DataFrame(
        {
            "caption": ["a chart", "a photo", "nothing"],
            "image": [str(tmp_path / "a.png"), [str(tmp_path / "b.jpg")], None],
        }
    )
    ip.run_cell_magic("nito", "-m sim/echo --over df --image image", "Describe {caption}")
    results = ip.user_ns["_nito"].results().set_index("row")
    assert (results["status"] == "done").all()
    assert f"[received 1: {_received(PNG)}]" in results.loc[0, "content"]
    assert _received(JPEG, media_type="image/jpeg") in results.loc[1, "content"]
    assert results.loc[2, "content"] == "Describe nothing"


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (
            "--image chart.png",
            "--image names the column of each row's images, once (df has caption, image)",
        ),
        ("--image image --image caption", "--image names the column of each row's images, once"),
        ("--image image", "--over df: images='image', row 1: image "),
    ],
)
def test_over_with_image_mistakes_are_one_line(
    ip: Any, tmp_path: Path, line: str, said: str
) -> None:
    from IPython.core.error import UsageError

    _images(tmp_path)
    ip.user_ns["df"] = pd.DataFrame(
        {"caption": ["a", "b"], "image": [str(tmp_path / "a.png"), str(tmp_path / "gone.png")]}
    )
    with pytest.raises(UsageError) as caught:
        ip.run_cell_magic("nito", f"-m sim/echo --over df {line}", "Describe {caption}")
    assert said in str(caught.value) and "\n" not in str(caught.value)
    assert "_nito" not in ip.user_ns or not hasattr(ip.user_ns["_nito"], "results")
