"""Instructions per MCP call, counted by callgrind: deterministic where wall-clock figures on a
shared machine are not. `python3 tools/speed/instructions.py BINARY [BINARY...]`

For each state-mcp binary: 2,000 `state_get` and 500 `state_set` calls piped on stdin (a pipe
on stdout too, as MCP clients give), standalone and joined to an owner (both processes
counted, the owner started by the joiner under callgrind too), minus a run that only
initializes. Prints instructions per call. Needs valgrind; takes a few minutes per binary."""
import glob, json, os, re, shutil, subprocess, sys, tempfile, time

GETS, SETS = 2000, 500


def messages(calls, tool):
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "count", "version": "1"}}}
    yield init
    yield {"jsonrpc": "2.0", "method": "notifications/initialized"}
    yield {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": "state_set", "arguments": {"key": "k", "value": "v" * 200}}}
    for i in range(calls):
        args = {"key": "k"} if tool == "state_get" else {"key": f"k{i}", "value": "v" * 200}
        yield {"jsonrpc": "2.0", "id": i + 2, "method": "tools/call", "params": {"name": tool, "arguments": args}}


def count(binary, calls, tool, joined):
    """Instructions of every process of one run, by command line."""
    work = tempfile.mkdtemp()
    try:
        run_dir = os.path.join(work, "run")
        os.mkdir(run_dir, 0o700)
        lines = "".join(json.dumps(m) + "\n" for m in messages(calls, tool))
        args = [binary, "--db", os.path.join(work, "s.redb"), "--log", "warn"] + ([] if joined else ["--standalone"])
        valgrind = ["valgrind", "--tool=callgrind", "--trace-children=yes",
                    f"--callgrind-out-file={work}/out.%p"]
        env = dict(os.environ, STATE_RUNTIME_DIR=run_dir)
        server = subprocess.Popen(valgrind + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env, text=True)
        server.stdin.write(lines)
        server.stdin.flush()
        # Every call is answered before stdin closes, so none is cut short.
        for line in server.stdout:
            if json.loads(line).get("id") == calls + 1:
                break
        server.stdin.close()
        server.wait(timeout=600)
        if joined:
            # The owner outlives its client: stop it so callgrind writes its counts.
            subprocess.run(["pkill", "-TERM", "-f", f"owner.*{work}"], check=False)
            deadline = time.time() + 60
            while subprocess.run(["pgrep", "-f", f"owner.*{work}"], capture_output=True).returncode == 0:
                if time.time() > deadline:
                    raise SystemExit("the owner did not stop")
                time.sleep(0.2)
        totals = {}
        for path in glob.glob(f"{work}/out.*"):
            text = open(path).read()
            command = re.search(r"^cmd:\s+(.*)$", text, re.M).group(1)
            role = "owner" if " owner " in command else "server"
            totals[role] = totals.get(role, 0) + int(re.search(r"^summary: (\d+)$", text, re.M).group(1))
        return totals
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind is not installed")
    print("| binary | call | mode | server process | owner | total per call |")
    print("|---|---|---|---:|---:|---:|")
    for binary in sys.argv[1:]:
        for joined in (False, True):
            idle = count(binary, 0, "state_get", joined)
            for tool, calls in (("state_get", GETS), ("state_set", SETS)):
                busy = count(binary, calls, tool, joined)
                per = {role: (busy.get(role, 0) - idle.get(role, 0)) / calls for role in ("server", "owner")}
                mode = "joined" if joined else "standalone"
                owner = f"{per['owner'] / 1000:.1f}k" if joined else "-"
                print(f"| {os.path.basename(binary)} | {tool} | {mode} | {per['server'] / 1000:.1f}k | {owner} "
                      f"| {(per['server'] + per['owner']) / 1000:.1f}k |", flush=True)


if __name__ == "__main__":
    main()
