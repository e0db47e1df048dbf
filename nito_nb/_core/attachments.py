"""Images and files in a prompt: the one rule for what is sent and what is kept. No I/O.

What is sent is a content part in the OpenAI format: ``image_url`` (an http(s) URL as given, or
the bytes of a local image as a data URL) or ``file`` (a PDF, as a data URL). The type comes from
the bytes (their magic number), never from the file's name: a renamed file is refused, not sent
under a type it does not have.

What is kept (the request metadata, hence the log, a saved file, a run's store and a frame) is a
*descriptor* in place of the data: kind, type, size, sha256 and name. A run of 10,000 images must
not store 10,000 images, and a log must stay small enough to read.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigurationError

__all__ = [
    "DEFAULT_IMAGES_BACK",
    "DEFAULT_MAX_IMAGE_SIZE",
    "DETAILS",
    "Attachment",
    "PlannedImage",
    "check_detail",
    "check_images_back",
    "check_max_image_size",
    "data_of",
    "from_bytes",
    "from_url",
    "image_list",
    "is_descriptor",
    "kept_messages",
    "keyed_messages",
    "note",
    "resend_history",
    "resend_key",
    "shown_name",
    "sniff",
    "too_big",
    "with_attachments",
]

#: Bytes one local image or file may have before it is refused (OpenAI's limit per image is 20 MB;
#: a data URL is a third bigger again).
DEFAULT_MAX_IMAGE_SIZE = 20 * 1024 * 1024
#: OpenAI's ``image_url.detail`` values.
DETAILS = ("auto", "low", "high")
#: How many earlier turns of a conversation have their images sent again by default: the last
#: one's (``reply()``: the replied Stream's own turn; ``--chat``: the cell before).
DEFAULT_IMAGES_BACK = 1
#: The part type of a descriptor: no gateway takes it, so one never goes out by mistake unnoticed.
DESCRIPTOR = "attachment"

#: The first bytes of each type sent, and its media type.
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
)


def sniff(data: bytes) -> str | None:
    """The media type of ``data`` by its magic number (PNG, JPEG, GIF, WEBP, PDF), else None."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    for magic, media_type in _MAGIC:
        if data.startswith(magic):
            return media_type
    return None


def check_detail(detail: Any) -> str:
    if detail not in DETAILS:
        raise ConfigurationError(
            f"image_detail must be one of {', '.join(DETAILS)}, not {detail!r:.60}."
        )
    return str(detail)


def check_images_back(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(
            f"images_back is how many earlier turns have their images sent again, a whole number "
            f">= 0 (0: none, 1: the last turn's), not {value!r:.60}."
        )
    return value


def check_max_image_size(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(
            f"max_image_size is bytes, a whole number >= 1, not {value!r:.60}."
        )
    return value


@dataclass(frozen=True)
class Attachment:
    """One image or file of a prompt: the part sent, and the descriptor kept in its place.
    ``resent``: one of an earlier turn sent again (in its place in the history, not added to
    the new message): given to the call only so that the record keeps its descriptor."""

    part: dict[str, Any]
    descriptor: dict[str, Any]
    resent: bool = False

    @property
    def kept(self) -> dict[str, Any]:
        """The part as the request metadata keeps it."""
        return {"type": DESCRIPTOR, DESCRIPTOR: self.descriptor}


@dataclass(frozen=True)
class PlannedImage:
    """An image or file of a run's row, as the plan keeps it until the request is sent: where to
    read it again (an absolute path, or the URL), and the descriptor of the bytes it was checked
    and hashed with (the request's key hashes those bytes). Nothing of the data: a plan of 10,000
    images holds 10,000 of these, not the images, and a worker process is handed this."""

    source: str
    descriptor: dict[str, Any]
    max_size: int = DEFAULT_MAX_IMAGE_SIZE

    @property
    def is_url(self) -> bool:
        return "url" in self.descriptor


def keyed_messages(
    messages: list[dict[str, Any]], descriptors: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``messages`` with the last user message's content followed by these descriptors: what a
    run's request key hashes. An image's file name is left out (it is not sent: the same bytes
    under two names are one request); a PDF's is kept (its ``filename`` is sent)."""
    if not descriptors:
        return messages
    parts = [
        Attachment({}, {k: v for k, v in d.items() if d.get("kind") == "file" or k != "name"}).kept
        for d in descriptors
    ]
    return with_attachments(messages, [Attachment(part, {}) for part in parts])[1]


def shown_name(name: object) -> str:
    """A file's name as an error line shows it: quoted (``repr``), and when long, its start and its
    end with the middle cut, since the end of a path is the file's own name."""
    text = repr(str(name))
    return text if len(text) <= 80 else f"{text[:30]}…{text[-49:]}"


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MB" if n >= 1024 * 1024 else f"{n:,} bytes"


def too_big(name: str, size: int, max_size: int) -> str:
    """The one line of a file over the limit (a shell refuses one by its size before reading it)."""
    return (
        f"image {shown_name(name)} is {_size(size)}, over the limit of {_size(max_size)}: make it "
        "smaller or raise max_image_size=."
    )


#: Bytes encoded per call (a multiple of 3: the pieces join into one encoding). One call holds the
#: GIL for all it encodes: 10 MB at once held it 35-50 ms, a stall of the loop thread that reads
#: the streams and takes their arrival times while a run reads an image in another thread.
_BASE64_PIECE = 3 * 256 * 1024


def _base64(data: bytes) -> str:
    view = memoryview(data)
    return "".join(
        base64.b64encode(view[i : i + _BASE64_PIECE]).decode("ascii")
        for i in range(0, len(data), _BASE64_PIECE)
    )


def from_bytes(
    data: bytes, name: str, detail: str = "auto", max_size: int = DEFAULT_MAX_IMAGE_SIZE
) -> Attachment:
    """The attachment of a local file's bytes (``name``: what the user called it, shown in the
    error lines and kept in the descriptor; never used to guess the type)."""
    shown = shown_name(name)
    if len(data) > max_size:
        raise ConfigurationError(too_big(name, len(data), max_size))
    media_type = sniff(data)
    if media_type is None:
        raise ConfigurationError(
            f"image {shown} is not a PNG, JPEG, GIF, WEBP or PDF (its bytes start {data[:8]!r}; the type "
            "is read from the bytes, not the name): convert it, or give an http(s) URL."
        )
    url = f"data:{media_type};base64,{_base64(data)}"
    descriptor: dict[str, Any] = {
        "kind": "file" if media_type == "application/pdf" else "image",
        "media_type": media_type,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "name": name,
    }
    if media_type == "application/pdf":
        part: dict[str, Any] = {"type": "file", "file": {"filename": name, "file_data": url}}
    else:
        part = {"type": "image_url", "image_url": {"url": url, "detail": detail}}
        descriptor["detail"] = detail
    return Attachment(part, descriptor)


def from_url(url: str, detail: str = "auto") -> Attachment:
    """The attachment of an http(s) URL: sent as it is, for the gateway to fetch; kept as it is
    (a URL is small; nothing of the image is known here)."""
    part = {"type": "image_url", "image_url": {"url": url, "detail": detail}}
    return Attachment(part, {"kind": "image", "url": url, "detail": detail})


def image_list(images: Any) -> list[Any]:
    """A call's ``images=`` as a list: none, one item (a path, a URL, bytes), or its list."""
    if images is None:
        return []
    return list(images) if isinstance(images, (list, tuple)) else [images]


def with_attachments(
    messages: list[dict[str, Any]], attachments: list[Attachment]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages sent, messages kept): the last user message's content becomes its text followed
    by the parts; in the messages kept, every image or file carried as data (these, and any in
    the messages themselves: a hand-built list, or the history ``reply()`` resends) is its
    descriptor."""
    sent = messages
    if any(not a.resent for a in attachments):
        last = next(
            (i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), None
        )
        if last is None:
            raise ConfigurationError("images= go with a user message: the messages have none.")
        content = messages[last].get("content")
        if isinstance(content, str):
            head = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            head = list(content)
        else:
            raise ConfigurationError(
                "images= go with a user message whose content is text or a list of parts."
            )
        parts = [*head, *(a.part for a in attachments if not a.resent)]
        sent = [*messages[:last], {**messages[last], "content": parts}, *messages[last + 1 :]]
    known = {a.descriptor["sha256"]: a.descriptor for a in attachments if "sha256" in a.descriptor}
    return sent, _kept(sent, known)


def _kept(messages: list[dict[str, Any]], known: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list) or not any(data_of(p) is not None for p in content):
            out.append(message)  # the common case: nothing copied
            continue
        parts = []
        for part in content:
            found = data_of(part)
            if found is None:
                parts.append(part)
                continue
            media_type, data, name = found
            digest = hashlib.sha256(data).hexdigest()
            descriptor = known.get(digest) or {
                "kind": "file" if part.get("type") == "file" else "image",
                "media_type": media_type,
                "size": len(data),
                "sha256": digest,
                "name": name,
            }
            parts.append({"type": DESCRIPTOR, DESCRIPTOR: descriptor})
        out.append({**message, "content": parts})
    return out


def data_of(part: Any) -> tuple[str, bytes, str | None] | None:
    """(media type, bytes, file name) of a part that carries its data as a base64 data URL."""
    if not isinstance(part, dict):
        return None
    if part.get("type") == "image_url" and isinstance(part.get("image_url"), dict):
        url, name = part["image_url"].get("url"), None
    elif part.get("type") == "file" and isinstance(part.get("file"), dict):
        url, name = part["file"].get("file_data"), part["file"].get("filename")
    else:
        return None
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url[:200]:
        return None
    head, _, payload = url.partition(";base64,")
    try:
        data = base64.b64decode(payload)
    except ValueError:  # not base64: kept as its length, never as itself
        data = payload.encode("utf-8", "replace")
    return head[5:], data, name if isinstance(name, str) else None


def is_descriptor(part: Any) -> bool:
    return (
        isinstance(part, dict)
        and part.get("type") == DESCRIPTOR
        and isinstance(part.get(DESCRIPTOR), dict)
    )


def note(descriptor: dict[str, Any]) -> str:
    """A descriptor in words: what a later turn says in place of an image it no longer sends."""
    if "url" in descriptor:
        return f"[image {descriptor['url']} sent in an earlier turn]"
    name = descriptor.get("name")
    named = f" {name!r}" if isinstance(name, str) else ""
    return (
        f"[{descriptor.get('kind', 'file')}{named} ({descriptor.get('media_type')}, "
        f"{descriptor.get('size')} bytes, sha256 {str(descriptor.get('sha256'))[:12]}) sent in an earlier turn]"
    )


def kept_messages(
    messages: list[dict[str, Any]], resend: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The history of a conversation as the next turn sends it: a descriptor whose sha256 (or URL)
    is in ``resend`` becomes that part again; any other becomes a text note of what was sent."""
    out = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list) or not any(is_descriptor(p) for p in content):
            out.append(message)
            continue
        parts = []
        for part in content:
            if not is_descriptor(part):
                parts.append(part)
                continue
            descriptor = part[DESCRIPTOR]
            key = descriptor.get("sha256") or descriptor.get("url")
            again = resend.get(key) if isinstance(key, str) else None
            parts.append(again if again is not None else {"type": "text", "text": note(descriptor)})
        out.append({**message, "content": parts})
    return out


def resend_history(
    messages: list[dict[str, Any]], held: Mapping[str, Attachment], turns: int
) -> tuple[list[dict[str, Any]], list[Attachment]]:
    """(the history as the next turn sends it, the attachments it sends again). The images and
    files of the last ``turns`` user messages of ``messages`` that ``held`` has (by
    :func:`resend_key`) go again in their place; any other becomes a note (:func:`kept_messages`).
    The attachments come back marked ``resent``: given to the call with the new turn's images,
    the record keeps their descriptors (name, detail) and the new Stream holds them for its own
    next turn."""
    keys: list[str] = []
    users = [m for m in messages if m.get("role") == "user"]
    for message in users[max(0, len(users) - turns) :] if turns else []:
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if is_descriptor(part):
                key = part[DESCRIPTOR].get("sha256") or part[DESCRIPTOR].get("url")
                if isinstance(key, str) and key in held and key not in keys:
                    keys.append(key)
    again = [dataclasses.replace(held[key], resent=True) for key in keys]
    return kept_messages(messages, {resend_key(a): a.part for a in again}), again


def resend_key(attachment: Attachment) -> str:
    """What :func:`kept_messages` matches a descriptor with."""
    return str(attachment.descriptor.get("sha256") or attachment.descriptor.get("url"))
