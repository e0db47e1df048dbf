"""Reading a call's ``images=``: local files (read here, bounded by the size limit) and http(s)
URLs become :class:`~nito_nb._core.attachments.Attachment` s, by the rule of ``_core/attachments.py``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .._core.attachments import (
    Attachment,
    PlannedImage,
    check_detail,
    check_max_image_size,
    from_bytes,
    from_url,
    shown_name,
    too_big,
)
from .._core.errors import ConfigurationError

__all__ = ["plan_images", "read_images"]


def read_images(images: Any, detail: Any, max_size: Any) -> list[Attachment]:
    """The attachments of ``images``: a path (str or ``os.PathLike``), bytes, or an http(s) URL,
    or a list of them. Raises ConfigurationError (one line) for one that cannot be sent."""
    if images is None:
        return []
    detail = check_detail(detail)
    max_size = check_max_image_size(max_size)
    items = [images] if isinstance(images, (str, bytes, bytearray, os.PathLike)) else images
    if not isinstance(items, (list, tuple)):
        raise ConfigurationError(
            f"images= takes a path, an http(s) URL, bytes, or a list of them, "
            f"not {type(images).__name__}."
        )
    return [_one(item, index, detail, max_size) for index, item in enumerate(items)]


def plan_images(images: Any, detail: Any, max_size: Any) -> list[PlannedImage]:
    """What a run's plan keeps of one row's images (read, checked and hashed now, before anything
    is sent; the data dropped): a :class:`PlannedImage` each, read again when its request goes.
    Raises ConfigurationError (one line) as :func:`read_images` does."""
    items = [images] if isinstance(images, (str, bytes, bytearray, os.PathLike)) else images
    if isinstance(items, (list, tuple)) and any(
        isinstance(item, (bytes, bytearray, memoryview)) for item in items
    ):
        raise ConfigurationError(
            "a run's images are paths or http(s) URLs, not bytes (the plan would hold every "
            "image until it is sent): write them to files."
        )
    planned = []
    for item, attachment in zip(items, read_images(items, detail, max_size), strict=True):
        source = (
            attachment.descriptor["url"]
            if "url" in attachment.descriptor
            # absolute: a worker process or a Ray actor may start in another folder
            else str(Path(item).expanduser().absolute())
        )
        planned.append(PlannedImage(source, attachment.descriptor, max_size))
    return planned


def _read_planned(item: PlannedImage, detail: str) -> Attachment:
    """The attachment of a planned image, read again: refused (one line) if its bytes are not
    those its request's key was made from."""
    descriptor = item.descriptor
    if item.is_url:
        return from_url(item.source, descriptor.get("detail", detail))
    attachment = _one(item.source, 0, descriptor.get("detail", detail), item.max_size)
    if attachment.descriptor["sha256"] != descriptor["sha256"]:
        raise ConfigurationError(
            f"image {shown_name(item.source)} changed since the run was planned (its request's key "
            "is made from the bytes it had): run again to send the new one."
        )
    return attachment


def _one(item: Any, index: int, detail: str, max_size: int) -> Attachment:
    if isinstance(item, Attachment):  # read already (a run reads a row's images before sending)
        return item
    if isinstance(item, PlannedImage):
        return _read_planned(item, detail)
    if isinstance(item, (bytes, bytearray, memoryview)):
        return from_bytes(bytes(item), f"images[{index}]", detail, max_size)
    if isinstance(item, str) and item.lower().startswith(("http://", "https://")):
        return from_url(item, detail)
    if isinstance(item, str) and item.lower().startswith("data:"):
        raise ConfigurationError(
            "images= takes a file, its bytes or an http(s) URL, not a data: URL "
            "(give the bytes: nito_nb makes the data URL after checking them)."
        )
    if not isinstance(item, (str, os.PathLike)):
        raise ConfigurationError(
            f"images[{index}] is a {type(item).__name__}: give a path, an http(s) URL or bytes."
        )
    path = Path(item).expanduser()
    shown = shown_name(item)
    try:
        size = path.stat().st_size
        if size > max_size:  # refused before it is read: a 4 GB file is not loaded to be refused
            raise ConfigurationError(too_big(str(item), size, max_size))
        with path.open("rb") as file:
            # bounded: a file that grew since stat() is still refused
            data = file.read(max_size + 1)
    except IsADirectoryError:
        raise ConfigurationError(f"image {shown} is a folder: give a file.") from None
    except FileNotFoundError:
        raise ConfigurationError(f"image {shown}: no such file.") from None
    except OSError as exc:
        raise ConfigurationError(f"image {shown} cannot be read: {exc.strerror or exc}.") from None
    return from_bytes(data, path.name, detail, max_size)
