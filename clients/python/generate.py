"""Writes state_client/_operations.py from state-http's OpenAPI document, so the Python client
has one typed method per operation of the server and cannot drift from it.

Usage:
  python3 generate.py --from http://127.0.0.1:7478/openapi.json     # rewrite the module
  python3 generate.py --from openapi.json --check                    # exit 1 if it is stale

The document is the one a server started with `--tools all` serves (every operation).
Operations whose answer is not one JSON document (`state_watch`, `call`, `healthz`,
`metrics`) are written by hand in _client.py; --check verifies they exist there too.
"""

from __future__ import annotations

import argparse
import difflib
import json
import keyword
import sys
import textwrap
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULE = HERE / "state-client" / "state_client" / "_operations.py"
CLIENT = HERE / "state-client" / "state_client" / "_client.py"
HAND_WRITTEN = {"state_watch": "watch", "call": "call", "healthz": "healthz", "metrics": "metrics"}


def load(source: str) -> dict:
    if source.startswith(("http://", "https://")):
        with urllib.request.urlopen(source, timeout=10) as response:  # noqa: S310 (a URL the caller gives)
            return json.load(response)
    return json.loads(Path(source).read_text())


def python_type(schema: dict) -> str:
    types = schema.get("type")
    if types is None:
        if "$ref" in schema or "oneOf" in schema or "anyOf" in schema:
            return "Any"
        return "Any"
    if isinstance(types, str):
        types = [types]
    names = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "object": "dict[str, Any]", "array": "list[Any]"}
    parts = [names.get(t, "Any") for t in types if t != "null"]
    hint = " | ".join(dict.fromkeys(parts)) or "Any"
    return hint


def identifier(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) else name


class Argument:
    def __init__(self, name: str, where: str, required: bool, schema: dict, description: str):
        self.name = name
        self.where = where  # path | query | body | field
        self.required = required
        self.schema = schema
        self.description = " ".join(description.split())
        self.json = where == "query" and schema.get("type") in ("object", "array")


def operation(path: str, method: str, op: dict) -> dict:
    arguments: list[Argument] = []
    for p in op.get("parameters", []):
        if p["in"] in ("path", "query"):
            arguments.append(Argument(p["name"], p["in"], p.get("required", False), p.get("schema", {}), p.get("description", "")))
    headers = {p["name"] for p in op.get("parameters", []) if p["in"] == "header"}
    body = op.get("requestBody")
    body_kind = None
    if body:
        schema = body["content"]["application/json"]["schema"]
        field = body.get("x-argument")
        if field:
            body_kind = "field"
            arguments.append(Argument(field, "field", True, schema, body.get("description", "")))
        else:
            body_kind = "args"
            required = set(schema.get("required", []))
            for name, prop in schema.get("properties", {}).items():
                arguments.append(Argument(name, "body", name in required, prop, prop.get("description", "")))
    return {
        "id": op["operationId"],
        "method": method.upper(),
        "path": path,
        "summary": op.get("summary", ""),
        "description": op.get("description", ""),
        "arguments": arguments,
        "body": body_kind,
        "mutating": "Idempotency-Key" in headers,
    }


def operations(document: dict) -> list[dict]:
    found = []
    for path, item in document["paths"].items():
        for method, op in item.items():
            if op["operationId"] in HAND_WRITTEN:
                continue
            found.append(operation(path, method, op))
    return sorted(found, key=lambda o: o["id"])


def ordered(arguments: list[Argument]) -> list[Argument]:
    """Path parameters and the body argument first (positional), then the other required ones,
    then the optional ones (keyword-only)."""
    rank = {"path": 0, "field": 1}
    first = [a for a in arguments if a.where in rank]
    first.sort(key=lambda a: rank[a.where])
    rest_required = [a for a in arguments if a.where not in rank and a.required]
    optional = [a for a in arguments if a.where not in rank and not a.required]
    return first + rest_required + optional


def signature(op: dict) -> tuple[str, str]:
    args = ordered(op["arguments"])
    parts = ["self"]
    keyword_only = False
    for a in args:
        hint = python_type(a.schema)
        if not a.required and not keyword_only:
            parts.append("*")
            keyword_only = True
        if a.required:
            parts.append(f"{identifier(a.name)}: {hint}")
        else:
            parts.append(f"{identifier(a.name)}: {hint} | None = None")
    if op["mutating"]:
        if not keyword_only:
            parts.append("*")
        parts.append("idempotency_key: str | None = None")
    values = ", ".join(f'"{a.name}": {identifier(a.name)}' for a in args)
    return ", ".join(parts), "{" + values + "}"


def docstring(op: dict, indent: str) -> str:
    text = op["summary"].rstrip(".") + "."
    if op["description"] and op["description"] != op["summary"]:
        text += "\n\n" + textwrap.fill(" ".join(op["description"].split()), 92)
    documented = [a for a in ordered(op["arguments"]) if a.description]
    if documented or op["mutating"]:
        text += "\n\nArgs:"
        for a in documented:
            text += "\n" + textwrap.fill(f"{identifier(a.name)}: {a.description}", 92, subsequent_indent="    ")
        if op["mutating"]:
            text += "\nidempotency_key: Resends with the same key apply once (default: one per call, kept across retries)."
    text = text.replace("\\", "\\\\").replace('"""', "'''")
    lines = text.split("\n")
    body = "\n".join((indent + line) if line else "" for line in lines)
    return f'{indent}"""{body.strip()}\n{indent}"""'


def render(document: dict) -> str:
    ops = operations(document)
    out = [
        "# Generated by clients/python/generate.py from state-http's OpenAPI document "
        f"(state {document['info']['version']}).",
        "# Do not edit: run the generator against a server started with `--tools all`.",
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any",
        "",
        "from ._route import Route",
        "",
        "ROUTES: dict[str, Route] = {",
    ]
    for op in ops:
        a = op["arguments"]
        path_params = tuple(x.name for x in a if x.where == "path")
        query = tuple(x.name for x in a if x.where == "query")
        json_query = tuple(x.name for x in a if x.json)
        field = next((x.name for x in a if x.where == "field"), None)
        out.append(
            f'    "{op["id"]}": Route("{op["method"]}", "{op["path"]}", path={path_params!r}, query={query!r}, '
            f'json_query={json_query!r}, body={op["body"]!r}, field={field!r}, mutating={op["mutating"]!r}),'
        )
    out.append("}")
    for cls, prefix, call in (("Operations", "def", "self._call"), ("AsyncOperations", "async def", "await self._call")):
        out += ["", "", f"class {cls}:"]
        out.append(f'    """One method per operation of the REST API v1, generated from its OpenAPI document."""')
        out.append("")
        out.append("    __slots__ = ()")
        for op in ops:
            params, values = signature(op)
            out.append("")
            out.append(f"    {prefix} {op['id']}({params}) -> dict[str, Any]:")
            out.append(docstring(op, "        "))
            key = ", idempotency_key" if op["mutating"] else ", None"
            out.append(f'        return {call}("{op["id"]}", {values}{key})  # type: ignore[attr-defined]')
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="source", required=True, help="URL or file of the OpenAPI document")
    parser.add_argument("--check", action="store_true", help="fail if the module differs from what the document gives")
    options = parser.parse_args()
    document = load(options.source)
    text = render(document)
    if not options.check:
        MODULE.write_text(text)
        print(f"wrote {MODULE}")
        return 0
    problems = []
    current = MODULE.read_text() if MODULE.exists() else ""
    if current != text:
        diff = difflib.unified_diff(current.splitlines(), text.splitlines(), "committed", "from the server", lineterm="", n=1)
        problems.append("state_client/_operations.py is stale; run clients/python/generate.py:\n" + "\n".join(list(diff)[:60]))
    client = CLIENT.read_text()
    for operation_id, method in HAND_WRITTEN.items():
        in_document = any(op.get("operationId") == operation_id for item in document["paths"].values() for op in item.values())
        if in_document and f"def {method}(" not in client:
            problems.append(f"the server has `{operation_id}` but _client.py has no `{method}` method")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
