"""Recorded contents as snapshots keep them: the codec, the size limit, and the switch.

Apart from :mod:`explomemo.changes.snapshots` (the writer's thread), so that the Stop
hook, which stores a captured turn's contents itself, imports no thread, logging or
dataclass machinery for them.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping

from explomemo.inputs import switched_on

#: Files up to this size get a snapshot (and a diff); a larger one gets neither.
SNAPSHOT_MAX_BYTES = 1 << 20
#: zlib's default level: of stdlib zlib 1/3/6 and zstd 1/3/6 on 24 MB of
#: Python source, the smallest (0.255 of the size); its 25 MB/s runs off the
#: request path.
_LEVEL = 6


def enabled(env: Mapping[str, str]) -> bool:
    """False when ``EXPLOMEMO_SNAPSHOTS=off`` (or 0, false, no)."""
    return switched_on(env, "EXPLOMEMO_SNAPSHOTS")


def compress(data: bytes) -> tuple[str, bytes]:
    """(codec, stored bytes) of a content: zlib, or the bytes as they are when that is smaller."""
    packed = zlib.compress(data, _LEVEL)
    return ("zlib", packed) if len(packed) < len(data) else ("raw", data)


def restore(codec: str, stored: bytes, sha256: str) -> bytes | None:
    """The content a snapshot holds; None when its codec is unknown or it is damaged."""
    try:
        if codec == "zlib":
            data = zlib.decompress(stored)
        elif codec == "raw":
            data = stored
        else:
            return None
    except zlib.error:
        return None
    return data if hashlib.sha256(data).hexdigest() == sha256 else None
