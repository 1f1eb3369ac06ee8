"""Sequential MCP calls over stdio against two builds of state-mcp, alternated in one run so
the machine's noise falls on both: `python3 tools/speed/stdio_calls.py A_BINARY B_BINARY`.
Prints each build's three rounds of 3,000 alternating state_set / state_get calls."""
import json, subprocess, sys, time, tempfile, os
def run(binary, n, db):
    p = subprocess.Popen([binary, "--db", db, "--standalone", "--log", "warn"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
    def rpc(m):
        p.stdin.write(json.dumps(m)+"\n"); p.stdin.flush()
        if "id" in m:
            while True:
                r=json.loads(p.stdout.readline())
                if r.get("id")==m["id"]: return r
    rpc({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"s","version":"1"}}})
    rpc({"jsonrpc":"2.0","method":"notifications/initialized"})
    t=time.perf_counter()
    for i in range(n):
        rpc({"jsonrpc":"2.0","id":i+1,"method":"tools/call","params":{"name":"state_get" if i%2 else "state_set","arguments":{"key":f"k{i%50}","value":{"i":i}} if i%2==0 else {"key":f"k{i%50}"}}})
    el=time.perf_counter()-t
    p.kill(); return el
d=tempfile.mkdtemp()
res={}
for rnd in range(3):
    for name,b in [(os.path.basename(os.path.dirname(sys.argv[1])) or "a",sys.argv[1]),(os.path.basename(os.path.dirname(sys.argv[2])) or "b",sys.argv[2])]:
        el=run(b, 3000, os.path.join(d,f"{name}{rnd}.redb"))
        res.setdefault(name,[]).append(el)
for k,v in res.items(): print(k, ["%.2f"%x for x in v], "best %.3f s per 3000 calls"%min(v))
