"""Builds the wheel of a pure-Python package in clients/python (the client, the LangGraph
checkpointer) from its pyproject.toml, with nothing but the standard library: `cargo xtask
dist` makes releases without reaching a package index.

Usage (from `cargo xtask dist`):
  python3 pure_wheel.py --version 0.1.0 --out DIR clients/python/state-client ...
Prints each wheel's path. Fails if a package's version is not the release's.
"""

import argparse
import os
import sys
import tomllib
from pathlib import Path

from wheel import write


def build(project: Path, version: str, out: Path, licenses: list[Path]) -> Path:
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    if meta["version"] != version:
        sys.exit(f"{project}/pyproject.toml says version {meta['version']}, the release is {version}: make them one")
    name = meta["name"]
    distribution = name.replace("-", "_")
    info_dir = f"{distribution}-{version}.dist-info"
    tag = "py3-none-any"
    packages = (
        tomllib.loads((project / "pyproject.toml").read_text())
        .get("tool", {}).get("hatch", {}).get("build", {}).get("targets", {}).get("wheel", {}).get("packages")
        or [distribution]
    )
    entries = []
    for package in packages:
        for path in sorted((project / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".typed"):
                entries.append((path.relative_to(project).as_posix(), path.read_bytes(), 0o644))
    readme = project / meta.get("readme", "README.md")
    lines = [
        "Metadata-Version: 2.4",
        f"Name: {name}",
        f"Version: {version}",
        f"Summary: {meta['description']}",
        "License-Expression: MIT OR Apache-2.0",
        *[f"License-File: {license.name}" for license in licenses],
        f"Requires-Python: {meta.get('requires-python', '>=3.10')}",
        *[f"Requires-Dist: {dependency}" for dependency in meta.get("dependencies", [])],
        "Description-Content-Type: text/markdown",
        "",
        readme.read_text() if readme.is_file() else "",
    ]
    for license in licenses:
        entries.append((f"{info_dir}/licenses/{license.name}", license.read_bytes(), 0o644))
    entries.append((f"{info_dir}/METADATA", "\n".join(lines).encode(), 0o644))
    wheel = f"Wheel-Version: 1.0\nGenerator: state xtask dist\nRoot-Is-Purelib: true\nTag: {tag}\n"
    entries.append((f"{info_dir}/WHEEL", wheel.encode(), 0o644))
    return write(out, f"{distribution}-{version}-{tag}.whl", info_dir, entries)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--license", action="append", default=[], type=Path)
    parser.add_argument("projects", nargs="+", type=Path)
    args = parser.parse_args()
    for project in args.projects:
        print(os.fspath(build(project, args.version, args.out, args.license)))


if __name__ == "__main__":
    main()
