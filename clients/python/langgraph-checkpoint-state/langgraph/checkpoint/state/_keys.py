"""How names from LangGraph become segments of state keys.

The store sees flat, byte-ordered keys of at most 512 bytes with no control characters, and
lists them by prefix. Thread ids, checkpoint namespaces, channel names and store namespaces may
hold anything, `/` included, so each becomes one segment with `%`, `/` and control characters
percent-encoded. No two names share an escaped form and no escaped form holds `/`, so a prefix
ending in `/` after a segment selects exactly that name, never a neighbour whose name merely
starts the same way (`t1/` never lists `t10/`).
"""

from __future__ import annotations

from urllib.parse import unquote

MAX_KEY_BYTES = 512
"""The server's key limit (`crates/state-core/src/limits.rs`)."""


def _needs_escape(c: str) -> bool:
    o = ord(c)
    # `%` and `/`, and what Rust's `char::is_control` refuses: C0, DEL and C1.
    return c in "%/" or o < 0x20 or 0x7F <= o <= 0x9F


def escape(name: str) -> str:
    """One key segment for `name`: reversible, `/`-free, and distinct for distinct names."""
    if not any(_needs_escape(c) for c in name):
        return name
    return "".join("".join(f"%{b:02X}" for b in c.encode("utf-8")) if _needs_escape(c) else c for c in name)


def unescape(segment: str) -> str:
    return unquote(segment, encoding="utf-8", errors="strict")


def descending(checkpoint_id: str) -> str:
    """A segment that sorts in the opposite order to `checkpoint_id`.

    Listing is ascending only, and LangGraph wants checkpoints newest first (ids grow with
    time). Each UTF-8 byte b becomes the two hex digits of 255 - b, and a final `~` (above every
    hex digit) makes a shorter id sort after the longer ids it begins. So the first key under a
    namespace's prefix is its newest checkpoint, one listing call with limit 1.
    """
    return checkpoint_id.encode("utf-8").translate(_COMPLEMENT).hex() + "~"


def ascending(segment: str) -> str:
    """The checkpoint id `descending` made `segment` from."""
    if not segment.endswith("~"):
        raise ValueError(f"not a checkpoint segment: {segment!r}")
    return bytes.fromhex(segment[:-1]).translate(_COMPLEMENT).decode("utf-8")


_COMPLEMENT = bytes(255 - b for b in range(256))


def checked(key: str, what: str) -> str:
    """`key`, or a ValueError saying which name made it longer than the server allows."""
    size = len(key.encode("utf-8"))
    if size > MAX_KEY_BYTES:
        raise ValueError(
            f"the state key for {what} would be {size} bytes, over the server's {MAX_KEY_BYTES}-byte "
            f"limit: use a shorter key prefix or shorter ids ({key[:80]}...)"
        )
    return key
