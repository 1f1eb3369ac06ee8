#!/usr/bin/env python3
"""What a storage quota costs: a tenant holding many keys, measured by `store_usage`, and the
latency of its writes beside those of a tenant without a quota, in turns.

    python3 tools/storagequota/measure.py target/release/state-http [KEYS]

Starts the server on a fresh database in a temporary directory, fills KEYS (default 100,000)
keys under `team/` in transactions of 128, times `GET /v1/usage?prefix=team/`, then writes for
4 s at a time as a token without a quota and as one with `max_keys` over `team/`, three turns
each, and prints a Markdown table of the latencies.
"""
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

TOKENS = """
[[token]]
name = "admin"
secret = "admin-secret-0123456789ab"
prefixes = [""]
rights = ["admin"]

[[token]]
name = "capped"
secret = "capped-secret-0123456789"
prefixes = ["team/"]
rights = ["write"]
max_keys = 10000000

[[token]]
name = "free"
secret = "free-secret-0123456789ab"
prefixes = ["other/"]
rights = ["write"]
"""
ADMIN, CAPPED, FREE = "admin-secret-0123456789ab", "capped-secret-0123456789", "free-secret-0123456789ab"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    server, keys = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    with tempfile.TemporaryDirectory() as dir:
        tokens = os.path.join(dir, "tokens.toml")
        with open(tokens, "w") as f:
            f.write(TOKENS)
        port = free_port()
        env = dict(os.environ, STATE_RUNTIME_DIR=os.path.join(dir, "run"))
        args = [server, "--db", os.path.join(dir, "s.redb"), "--listen", f"127.0.0.1:{port}", "--auth", tokens]
        proc = subprocess.Popen(args, env=env, stderr=subprocess.DEVNULL)
        try:
            measure(port, keys)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def measure(port, keys):
    for _ in range(100):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port)
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            break
        except OSError:
            time.sleep(0.05)

    def call(method, path, token, body=None):
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        response = conn.getresponse()
        return response.status, response.read()

    started = time.time()
    for start in range(0, keys, 128):
        ops = [{"op": "put", "key": f"team/k{i:07d}", "value": {"n": i, "pad": "x" * 40}}
               for i in range(start, min(keys, start + 128))]
        status, body = call("POST", "/v1/kv:txn", ADMIN, {"success": ops})
        assert status == 200, (status, body[:300])
    print(f"filled {keys:,} keys in {time.time() - started:.1f} s")
    times = []
    for _ in range(7):
        began = time.perf_counter()
        status, body = call("GET", "/v1/usage?prefix=team/", ADMIN)
        times.append(time.perf_counter() - began)
        assert status == 200, body
    print(f"store_usage {json.loads(body)}: median {statistics.median(times) * 1000:.1f} ms, "
          f"fastest {min(times) * 1000:.1f} ms\n")

    def writes(token, prefix, seconds=4.0):
        latencies, i, end = [], 0, time.time() + seconds
        while time.time() < end:
            began = time.perf_counter()
            status, body = call("PUT", f"/v1/kv/{prefix}w{i % 50}", token, {"v": i})
            latencies.append(time.perf_counter() - began)
            assert status == 200, (status, body)
            i += 1
        latencies.sort()
        at = lambda q: latencies[min(len(latencies) - 1, int(len(latencies) * q))] * 1000
        return f"{len(latencies):,} | {at(0.5):.3f} ms | {at(0.99):.3f} ms | {at(0.999):.3f} ms | {latencies[-1] * 1000:.3f} ms"

    print("| writer | writes in 4 s | p50 | p99 | p99.9 | max |")
    print("|---|---:|---:|---:|---:|---:|")
    for _ in range(3):
        print(f"| no storage quota | {writes(FREE, 'other/')} |")
        print(f"| `max_keys`, {keys:,} keys held | {writes(CAPPED, 'team/')} |")


if __name__ == "__main__":
    main()
