"""What a tool list costs: tool count and bytes of the compact JSON of `tools/list`'s `tools`
array (what a client puts in context every session; about 4 bytes a token), for each tool
choice of `state-mcp`, printed as a markdown table.

Usage:
  python3 tools/toolbytes/toolbytes.py [STATE_MCP] [-- PEER_COMMAND ...]
STATE_MCP defaults to target/release/state-mcp. Any other MCP stdio server is measured the same
way with `--peer NAME COMMAND...` (e.g. the servers the compatibility profiles replace):
  python3 tools/toolbytes/toolbytes.py target/release/state-mcp --peer agentcheckpoint agentcheckpoint
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHOICES = [
    "", "--tools all", "--tools kv", "--tools lease", "--tools semaphore", "--tools paths", "--tools queue", "--tools workflow", "--tools session",
    "--tools admin", "--tools watch", "--tools checkpoint", "--tools knowledge", "--tools transfer",
    "--compat agentcheckpoint", "--compat sidecar", "--compat caxton", "--compat sage", "--compat goldfish", "--compat memory",
]


def measure(command, cwd):
    # Run in a scratch directory: some servers create their database in the working directory.
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=cwd
    )

    def rpc(message):
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        if "id" not in message:
            return None
        while True:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit(f"{command[0]} closed stdout")
            try:
                reply = json.loads(line)
            except ValueError:
                continue  # a banner some servers print
            if reply.get("id") == message["id"]:
                return reply

    try:
        rpc({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "toolbytes", "version": "1"}}})
        rpc({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools = rpc({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["result"]["tools"]
    finally:
        proc.kill()
    return len(tools), len(json.dumps(tools, separators=(",", ":"), ensure_ascii=False).encode())


def main(argv):
    binary = str(Path("target/release/state-mcp").resolve())
    peers = []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--peer":
            name, command = args.pop(0), [str(Path(args[0]).resolve()) if "/" in args[0] else args[0], *args[1:]]
            peers.append((name, command))
            break
        binary = str(Path(arg).resolve()) if "/" in arg else arg
    print("| server | tools | bytes | ≈ tokens |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as scratch:
        for i, choice in enumerate(CHOICES):
            command = [binary, "--db", str(Path(scratch) / f"{i}.redb"), "--standalone", *choice.split()]
            count, size = measure(command, scratch)
            label = f"state-mcp {choice}".strip()
            print(f"| `{label}` | {count} | {size:,} | {size / 4000:.1f}k |")
        for name, command in peers:
            count, size = measure(command, scratch)
            print(f"| {name} | {count} | {size:,} | {size / 4000:.1f}k |")


if __name__ == "__main__":
    main(sys.argv[1:])
