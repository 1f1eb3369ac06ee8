"""How one operation maps onto HTTP: its method, path, and where each argument goes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote


@dataclass(frozen=True)
class Route:
    method: str
    template: str
    path: tuple[str, ...]
    query: tuple[str, ...]
    json_query: tuple[str, ...]
    body: str | None  # "args": the arguments as one JSON object; "field": one argument is the body
    field: str | None
    mutating: bool

    def url(self, arguments: dict[str, Any]) -> str:
        path = self.template
        for name in self.path:
            value = arguments.get(name)
            if value is None:
                raise TypeError(f"missing required argument `{name}`")
            text = str(value)
            if not text:
                raise ValueError(f"`{name}` must not be empty")
            # An id that ends the path may hold `/` (the server takes the rest of the path);
            # one in the middle is a single segment.
            rest_of_path = path.endswith("{" + name + "}")
            parts = text.split("/") if rest_of_path else [text]
            path = path.replace("{" + name + "}", "/".join(_segment(part) for part in parts))
        return path

    def params(self, arguments: dict[str, Any]) -> dict[str, str]:
        import json

        params = {}
        for name in self.query:
            value = arguments.get(name)
            if value is None:
                continue
            if name in self.json_query:
                params[name] = json.dumps(value)
            elif isinstance(value, bool):
                params[name] = "true" if value else "false"
            else:
                params[name] = str(value)
        return params

    def json_body(self, arguments: dict[str, Any]) -> tuple[bool, Any]:
        """(whether there is a body, the body)."""
        if self.body == "field":
            return True, arguments.get(self.field or "")
        if self.body == "args":
            skip = set(self.path)
            return True, {k: v for k, v in arguments.items() if v is not None and k not in skip}
        return False, None


def _segment(part: str) -> str:
    """One path segment, percent-encoded. `.` and `..` are encoded too: sent as they are, the
    HTTP stack would collapse them (`tmp/../important` would reach `important`)."""
    encoded = quote(part, safe="")
    return encoded.replace(".", "%2E") if part in (".", "..") else encoded
