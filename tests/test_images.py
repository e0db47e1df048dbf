"""Images and files in a prompt (``images=``, docs/IMAGES.md): what is sent, checked by the
simulator's answer over HTTP (``sim/echo`` says what it received); what is kept (the log, a saved
file, a frame: a descriptor, never the data); one line for a file that cannot be sent."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

import nito_nb
from nito_nb._core.attachments import from_bytes, sniff
from nito_nb._core.errors import ConfigurationError

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
JPEG = b"\xff\xd8\xff\xe0" + b"jpeg body" * 50
GIF = b"GIF89a" + b"\x01" * 40
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 " + b"\x02" * 40
PDF = b"%PDF-1.4\n" + b"%fake but well-started pdf\n" * 20


def _prefix(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


@pytest.mark.parametrize(
    ("data", "media_type"),
    [
        (PNG, "image/png"),
        (JPEG, "image/jpeg"),
        (GIF, "image/gif"),
        (WEBP, "image/webp"),
        (PDF, "application/pdf"),
        (b"just text", None),
        (b"RIFF\x00\x00\x00\x00WAVE", None),
    ],
)
def test_the_type_is_read_from_the_bytes(data: bytes, media_type: str | None) -> None:
    assert sniff(data) == media_type


def test_an_image_is_sent_as_a_data_url_and_the_simulator_says_what_it_received(
    tmp_path: Path,
) -> None:
    chart = tmp_path / "chart.png"
    chart.write_bytes(PNG)
    stream = nito_nb.stream(
        "What does the chart show?",
        model="sim/echo",
        images=[str(chart), JPEG, "https://example.org/cat.jpg"],
        image_detail="low",
    )
    assert stream.content.startswith("What does the chart show?")
    assert (
        f"[received 3: image_url image/png {len(PNG)} bytes sha256 {_prefix(PNG)}; "
        f"image_url image/jpeg {len(JPEG)} bytes sha256 {_prefix(JPEG)}; "
        "image_url url https://example.org/cat.jpg]"
    ) in stream.content


def test_astream_and_its_reply_send_the_images_too() -> None:
    async def main() -> tuple[nito_nb.AsyncStream, nito_nb.AsyncStream]:
        first = nito_nb.astream("Describe", model="sim/echo", images=[GIF])
        await first.wait()
        second = first.reply("More")
        await second.wait()
        return first, second

    first, second = asyncio.run(main())
    for stream in (first, second):
        assert f"image_url image/gif {len(GIF)} bytes sha256 {_prefix(GIF)}" in stream.content
        assert "base64" not in json.dumps(stream.request)


def test_a_pdf_is_sent_as_a_file_part(tmp_path: Path) -> None:
    paper = tmp_path / "paper.pdf"
    paper.write_bytes(PDF)
    stream = nito_nb.stream("Summarise", model="sim/echo", images=paper)  # a Path, not in a list
    assert (
        f"[received 1: file application/pdf {len(PDF)} bytes sha256 {_prefix(PDF)}]"
        in stream.content
    )
    kept = stream.request["messages"][-1]["content"][1]
    assert kept == {
        "type": "attachment",
        "attachment": {
            "kind": "file",
            "media_type": "application/pdf",
            "size": len(PDF),
            "sha256": hashlib.sha256(PDF).hexdigest(),
            "name": "paper.pdf",
        },
    }


def test_the_log_the_saved_file_and_the_frame_hold_the_descriptor_not_the_data(
    tmp_path: Path,
) -> None:
    chart = tmp_path / "chart.png"
    chart.write_bytes(PNG)
    stream = nito_nb.stream("Describe it", model="sim/echo", images=[chart])
    encoded = base64.b64encode(PNG).decode()
    digest = hashlib.sha256(PNG).hexdigest()
    assert encoded not in json.dumps(stream.request)
    saved = stream.save(tmp_path / "log.jsonl").read_text()
    assert encoded not in saved and "base64" not in saved and digest in saved
    frame_text = stream.frame().to_json()
    assert encoded not in frame_text and "base64" not in frame_text
    loaded = nito_nb.load(tmp_path / "log.jsonl")
    assert loaded.request["messages"][-1]["content"][1]["attachment"]["sha256"] == digest


def test_reply_resends_the_images_of_the_last_turn_only(tmp_path: Path) -> None:
    chart = tmp_path / "chart.png"
    chart.write_bytes(PNG)
    first = nito_nb.stream("Describe it", model="sim/echo", images=[chart])
    second = first.reply("And the colours?")
    assert f"image/png {len(PNG)} bytes sha256 {_prefix(PNG)}" in second.content  # sent again
    assert "base64" not in json.dumps(second.request)
    third = second.reply("Thanks")
    assert "[received" not in third.content  # two turns back: no longer sent
    sent = third.request["messages"][0]["content"][1]
    assert (
        sent["type"] == "text" and _prefix(PNG) in sent["text"] and "earlier turn" in sent["text"]
    )


def test_a_hand_built_data_url_is_kept_as_its_descriptor() -> None:
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "image_url", "image_url": {"url": url}},
            ],
        }
    ]
    stream = nito_nb.stream(messages, model="sim/echo")
    assert f"sha256 {_prefix(PNG)}" in stream.content
    assert "base64" not in json.dumps(stream.request)


def test_a_renamed_non_image_is_one_line(tmp_path: Path) -> None:
    fake = tmp_path / "photo.png"
    fake.write_text("not an image at all")
    with pytest.raises(nito_nb.ConfigurationError) as caught:
        nito_nb.stream("x", model="sim/echo", images=[fake])
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("image 'photo.png' is not a PNG, JPEG, GIF, WEBP or PDF")
    assert "read from the bytes, not the name" in message


def test_a_file_over_the_limit_is_one_line_and_is_not_read(tmp_path: Path) -> None:
    big = tmp_path / "big.png"
    big.write_bytes(PNG + b"\0" * 5000)
    with pytest.raises(nito_nb.ConfigurationError) as caught:
        nito_nb.stream("x", model="sim/echo", images=[str(big)], max_image_size=1000)
    assert "\n" not in str(caught.value)
    assert "over the limit of 1,000 bytes: make it smaller or raise max_image_size=" in str(
        caught.value
    )
    with pytest.raises(nito_nb.ConfigurationError, match="over the limit"):
        nito_nb.stream("x", model="sim/echo", images=[PNG], max_image_size=100)  # bytes too


@pytest.mark.parametrize(
    ("images", "said"),
    [
        (["no/such/file.png"], "image 'no/such/file.png': no such file."),
        ([42], "images[0] is a int: give a path, an http(s) URL or bytes."),
        ({"a": 1}, "images= takes a path, an http(s) URL, bytes, or a list of them, not dict."),
        (["data:image/png;base64,AAAA"], "not a data: URL"),
    ],
)
def test_other_mistakes_are_one_line(images: object, said: str) -> None:
    with pytest.raises(nito_nb.ConfigurationError) as caught:
        nito_nb.stream("x", model="sim/echo", images=images)
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_detail_is_checked() -> None:
    with pytest.raises(
        nito_nb.ConfigurationError, match="image_detail must be one of auto, low, high"
    ):
        nito_nb.stream("x", model="sim/echo", images=[PNG], image_detail="huge")


def test_a_slip_of_images_is_caught() -> None:
    with pytest.raises(nito_nb.ConfigurationError, match="Did you mean images="):
        nito_nb.stream("x", model="sim/echo", imagse=[PNG])


def test_a_hostile_file_name_stays_inert(tmp_path: Path) -> None:
    name = "<img src=x onerror=alert(1)>.png"
    hostile = tmp_path / name
    hostile.write_bytes(PNG)
    stream = nito_nb.stream("x", model="sim/echo", images=[hostile])
    # data, kept as data
    assert stream.request["messages"][-1]["content"][1]["attachment"]["name"] == name
    html = stream._repr_mimebundle_().get("text/html", "")
    assert "<img src=x" not in html
    hostile.write_text("text")
    with pytest.raises(nito_nb.ConfigurationError) as caught:
        nito_nb.stream("x", model="sim/echo", images=[hostile])
    assert "\n" not in str(caught.value)


def test_an_undecodable_file_name_still_makes_json() -> None:
    attachment = from_bytes(PNG, "caf\udce9.png")
    json.dumps(attachment.descriptor).encode("utf-8")  # no lone surrogate left


def test_the_simulator_refuses_a_data_url_that_is_not_what_it_says() -> None:
    from nito_nb import sim

    url = "data:image/png;base64," + base64.b64encode(b"plain text").decode()
    body = {
        "model": "sim/echo",
        "stream": True,
        "messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}
        ],
    }
    response = httpx.post(
        sim.ensure_server() + "/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {sim.token()}"},
    )
    assert response.status_code == 400
    assert "says 'image/png' but holds no known image" in response.text


# -- conversations: how many turns back images are sent again --------------------------------------


def _received_count(stream: nito_nb.Stream) -> int:
    found = re.search(r"\[received (\d+):", stream.content)
    return int(found.group(1)) if found else 0


def test_reply_images_back_says_how_many_turns_of_images_go_again(tmp_path: Path) -> None:
    chart = tmp_path / "chart.png"
    chart.write_bytes(PNG)
    first = nito_nb.stream("one", model="sim/echo", images=[chart], image_detail="low")
    second = first.reply("two", images=[JPEG])  # default: the last turn's (first's) go again
    assert _received_count(second) == 2 and _prefix(PNG) in second.content
    # The record keeps the resent image's own descriptor (its name and detail), not the data.
    kept = second.request["messages"][0]["content"][1]["attachment"]
    assert kept["name"] == "chart.png" and kept["detail"] == "low"
    assert "base64" not in json.dumps(second.request)
    third = second.reply("three", images_back=2)  # both turns' images
    assert _received_count(third) == 2
    assert _prefix(PNG) in third.content and _prefix(JPEG) in third.content
    fourth = third.reply("four")  # the last turn ("three") had none: nothing goes again
    assert _received_count(fourth) == 0
    notes = [
        p["text"]
        for m in fourth.request["messages"]
        if isinstance(m["content"], list)
        for p in m["content"]
        if p["type"] == "text" and "earlier turn" in p["text"]
    ]
    assert len(notes) == 2 and "'chart.png'" in notes[0]
    # Images no longer sent are not held either: a later reply cannot send them.
    assert _received_count(fourth.reply("five", images_back=9)) == 0
    none = first.reply("again", images_back=0)
    assert _received_count(none) == 0 and "earlier turn" in json.dumps(none.request)


@pytest.mark.parametrize("bad", [-1, 1.5, "all", True])
def test_images_back_is_checked(bad: object) -> None:
    first = nito_nb.stream("one", model="sim/echo", images=[PNG])
    with pytest.raises(ConfigurationError, match="images_back is how many"):
        first.reply("two", images_back=bad)  # type: ignore[arg-type]


def test_chat_sends_the_last_turns_images_again_as_the_user_asks(ip: Any, tmp_path: Path) -> None:
    chart = tmp_path / "chart.png"
    chart.write_bytes(PNG)
    ip.run_cell_magic("nito", f"-m sim/echo --chat c --image {chart}", "one")
    ip.run_cell_magic("nito", "-m sim/echo --chat c", "two")  # default: the cell before's images
    second = ip.user_ns["_nito"]
    assert _received_count(second) == 1 and _prefix(PNG) in second.content
    assert second.request["messages"][0]["content"][1]["attachment"]["name"] == "chart.png"
    ip.run_cell_magic("nito", "-m sim/echo --chat c", "three")  # the cell before had none
    third = ip.user_ns["_nito"]
    assert _received_count(third) == 0 and "earlier turn" in json.dumps(third.request)

    ip.run_cell_magic("nito", f"-m sim/echo --chat d --image {chart}", "one")
    ip.run_cell_magic("nito", "-m sim/echo --chat d --images-back 0", "two")
    assert _received_count(ip.user_ns["_nito"]) == 0
    photo = tmp_path / "b.jpg"
    photo.write_bytes(JPEG)
    ip.run_line_magic("config", "Nito.images_back = 3")
    ip.run_cell_magic("nito", f"-m sim/echo --chat e --image {chart}", "one")
    ip.run_cell_magic("nito", f"-m sim/echo --chat e --image {photo}", "two")
    ip.run_cell_magic("nito", "-m sim/echo --chat e", "three")
    assert _received_count(ip.user_ns["_nito"]) == 2


def test_images_back_mistakes_in_the_magic_are_one_line(ip: Any) -> None:
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="use it with --chat"):
        ip.run_cell_magic("nito", "-m sim/echo --images-back 2", "x")
    with pytest.raises(UsageError, match="0 or more"):
        ip.run_cell_magic("nito", "-m sim/echo --chat c --images-back -1", "x")


# -- the multi-model grid ---------------------------------------------------------------------------


def test_the_grid_shows_the_prompts_images_once_above_it_escaped(
    ip: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import start_tags
    from test_magic import Recorder

    from nito_nb._display import notebook as _display

    recorder = Recorder()
    monkeypatch.setattr(ip, "display_pub", recorder)
    monkeypatch.setattr(_display, "in_kernel", lambda: True)
    hostile = tmp_path / '<img src=x onerror="window.__xss=1">.png'
    hostile.write_bytes(PNG)
    url = 'https://example.org/cat.jpg?a="><script>x</script>'
    ip.run_cell_magic("nito", f"-m sim/echo,sim/chat --image '{hostile}' --image '{url}'", "Look")
    html_of = [
        m["data"].get("text/html", "") for m in recorder.messages if isinstance(m["data"], dict)
    ]
    strips = [h for h in html_of if "nito-attachments" in h]
    assert len(strips) == 1  # once, not per column
    first_grid = next(i for i, h in enumerate(html_of) if "sim/chat" in h and "sim/echo" in h)
    assert html_of.index(strips[0]) < first_grid  # above the grid
    shown = strips[0]
    assert f'<img src="data:image/png;base64,{base64.b64encode(PNG).decode()}"' in shown
    assert shown.count("<img") == 1 and "<script" not in shown  # the URL is an escaped link

    found = start_tags(shown)
    assert [tag for tag, _ in found] == ["div", "img", "a"]
    assert not [name for _, attrs in found for name, _ in attrs if name.startswith("on")]
    streams = ip.user_ns["_nito"]
    assert isinstance(streams, list) and len(streams) == 2
    assert _prefix(PNG) in streams[0].content  # sim/echo's column: the image went
