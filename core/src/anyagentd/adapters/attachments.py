"""A prompt's attachments, classified once for every adapter: each renders the result in its own protocol.

:func:`classify` turns the wire's attachment strings (paths or URLs) into :class:`Attachment` values: an image
file (read later, by whoever inlines it), an image URL, or something to mention (a file, a URL, an image too big
or unreadable to inline). Image types are those the agents take inline: :data:`IMAGE_TYPES`.
"""

from __future__ import annotations

import base64
import mimetypes
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""MIME types sent to agents as images."""

MAX_IMAGE_BYTES = 20 * 1024 * 1024
"""Largest image file sent inline (bytes); a bigger one is mentioned instead."""

URL_SCHEMES = ("http://", "https://", "file://")


@dataclass(frozen=True)
class Attachment:
    """One attachment: ``kind`` is ``"image_file"`` (``item`` a readable image path of at most ``MAX_IMAGE_BYTES``),
    ``"image_url"`` (an http(s) image URL) or ``"mention"`` (anything else); ``media`` its guessed MIME type."""

    item: str
    kind: Literal["image_file", "image_url", "mention"]
    media: str | None

    @property
    def is_url(self) -> bool:
        return self.item.startswith(URL_SCHEMES)

    @property
    def path(self) -> str:
        """The absolute path of a local attachment."""
        return os.path.abspath(self.item)

    def base64_data(self) -> str:
        """An ``image_file``'s bytes, base64-encoded. Raises ``OSError`` when it cannot be read."""
        with open(self.item, "rb") as fh:
            return base64.b64encode(fh.read()).decode()

    def inline_data(self) -> str | None:
        """An ``image_file``'s bytes, base64-encoded, or ``None`` when it cannot be read (or is not an image file):
        the adapter then mentions it instead of inlining it."""
        if self.kind != "image_file":
            return None
        try:
            return self.base64_data()
        except OSError:
            return None


def media_type(item: str) -> str | None:
    """The MIME type guessed from ``item``'s name (a URL's query left out)."""
    return mimetypes.guess_type(item.split("?")[0])[0]


def classify(
    items: Iterable[str], *, images: bool = True, image_urls: bool = True, max_image_bytes: int | None = MAX_IMAGE_BYTES
) -> list[Attachment]:
    """Classify ``items`` in order. ``images``: the agent takes inline images (else every image is a mention);
    ``image_urls``: it takes image URLs; ``max_image_bytes`` (``None``: no limit) bounds an inline file."""
    out = []
    for item in items:
        media = media_type(item)
        kind: Literal["image_file", "image_url", "mention"] = "mention"
        if images and media in IMAGE_TYPES:
            if item.startswith(("http://", "https://")):
                kind = "image_url" if image_urls else "mention"
            elif not item.startswith("file://") and _fits(item, max_image_bytes):
                kind = "image_file"
        out.append(Attachment(item, kind, media))
    return out


def _fits(path: str, limit: int | None) -> bool:
    try:
        return os.path.isfile(path) and (limit is None or os.path.getsize(path) <= limit)
    except OSError:
        return False
