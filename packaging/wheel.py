"""Builds a Python wheel that carries the state binaries as scripts, the way ruff and uv ship
theirs: `pip install`, `pipx install` and `uvx` then put `state-mcp`, `state-http` and
`statectl` on PATH, with no Rust and no Python code involved at run time.

Usage (from `cargo xtask dist`):
  python3 wheel.py --version 0.1.0 --platform manylinux_2_34_x86_64 --bin DIR \
      --readme README.md --license LICENSE-MIT --license LICENSE-APACHE --out DIR
Prints the wheel's path.
"""

import argparse
import base64
import hashlib
import os
import zipfile
from pathlib import Path

NAME = "state-mcp"
BINARIES = ["state-mcp", "state-http", "statectl"]
SUMMARY = "Durable, atomic, shared state for AI agents: an MCP server, an HTTP API and a CLI"


def record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def write(out, wheel_name, info_dir, entries):
    """Writes the wheel: `entries` (path in the wheel, bytes, unix mode) and their RECORD, with
    fixed timestamps so the same inputs give the same bytes. Returns its path."""
    record = [record_line(path, data) for path, data, _ in entries]
    record.append(f"{info_dir}/RECORD,,")
    entries = entries + [(f"{info_dir}/RECORD", ("\n".join(record) + "\n").encode(), 0o644)]
    out.mkdir(parents=True, exist_ok=True)
    target = out / wheel_name
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data, mode in entries:
            info = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return target


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", required=True)
    parser.add_argument("--platform", required=True, help="a wheel platform tag, e.g. manylinux_2_34_x86_64")
    parser.add_argument("--bin", required=True, type=Path, help="directory holding the binaries")
    parser.add_argument("--readme", required=True, type=Path)
    parser.add_argument("--license", action="append", default=[], type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()

    distribution = NAME.replace("-", "_")
    tag = f"py3-none-{args.platform}"
    wheel_name = f"{distribution}-{args.version}-{tag}.whl"
    data_dir = f"{distribution}-{args.version}.data"
    info_dir = f"{distribution}-{args.version}.dist-info"

    readme = args.readme.read_text()
    metadata = "\n".join(
        [
            "Metadata-Version: 2.4",
            f"Name: {NAME}",
            f"Version: {args.version}",
            f"Summary: {SUMMARY}",
            "License-Expression: MIT OR Apache-2.0",
            *[f"License-File: {license.name}" for license in args.license],
            "Requires-Python: >=3.8",
            "Classifier: Programming Language :: Rust",
            "Classifier: Operating System :: POSIX :: Linux",
            "Description-Content-Type: text/markdown",
            "",
            readme,
        ]
    )
    wheel = "\n".join(
        ["Wheel-Version: 1.0", "Generator: state xtask dist", "Root-Is-Purelib: false", f"Tag: {tag}", ""]
    )

    entries = []  # (path in the wheel, bytes, unix mode)
    for binary in BINARIES:
        entries.append((f"{data_dir}/scripts/{binary}", (args.bin / binary).read_bytes(), 0o755))
    for license in args.license:
        entries.append((f"{info_dir}/licenses/{license.name}", license.read_bytes(), 0o644))
    entries.append((f"{info_dir}/METADATA", metadata.encode(), 0o644))
    entries.append((f"{info_dir}/WHEEL", wheel.encode(), 0o644))

    target = write(args.out, wheel_name, info_dir, entries)
    print(os.fspath(target))


if __name__ == "__main__":
    main()
