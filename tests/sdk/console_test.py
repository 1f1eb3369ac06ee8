"""The web console in a real browser (Debian's headless Chromium, driven by Playwright) against
a live state-http started with the test tokens: every view loads with no console error and no
request outside the origin; a write by a separate state-mcp process appears within a second;
scopes and rights hold (in the page, and against forged requests); hostile names and values
show as text; an action is confirmed and done. Writes a screenshot of each view.

Environment: STATE_URL, ADMIN / TEAM_A / READER (tokens), STATE_MCP (the binary), STATE_DB,
STATE_RUNTIME_DIR (so the writer joins the server's owner), CHROMIUM, SCREENSHOTS (a directory).
The last line printed: `console: N checks passed`.
"""

import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

URL = os.environ["STATE_URL"]
ADMIN, TEAM_A, READER = os.environ["ADMIN"], os.environ["TEAM_A"], os.environ["READER"]
SHOTS = Path(os.environ["SCREENSHOTS"])
XSS_KEY = 'team-a/<script>alert("key")</script>'
XSS_VALUE = '"><img src=x onerror=alert("value")>'
BIDI_KEY = "team-a/invoice\u202egnp.exe"
PLANTED = "team-a/../team-b/secret"
checks = 0


def check(label, condition, detail=""):
    global checks
    if not condition:
        print(f"FAILED: {label}: {detail}", file=sys.stderr)
        sys.exit(1)
    checks += 1
    print(f"ok: {label}")


def rest(method, path, body=None, token=ADMIN):
    request = urllib.request.Request(URL + path, method=method, data=None if body is None else json.dumps(body).encode())
    request.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"{}")


def quoted(key):
    """A key as a path: each segment encoded, `.` and `..` too (else they would be collapsed)."""
    return "/".join(p.replace(".", "%2E") if p in (".", "..") else urllib.request.quote(p, safe="") for p in key.split("/"))


def seed():
    rest("PUT", "/v1/kv/team-a/config", {"mode": "fast", "workers": 4})
    rest("PUT", "/v1/kv/team-a/config", {"mode": "careful", "workers": 2})
    rest("PUT", "/v1/kv/team-a/doomed", "delete me")
    rest("PUT", "/v1/kv/team-b/secret", "team-b only")
    rest("PUT", f"/v1/kv/{quoted(XSS_KEY)}", XSS_VALUE)
    rest("PUT", f"/v1/kv/{quoted(BIDI_KEY)}", "bidi")
    # Planted by a team-a writer: a key whose name reads like a path into team-b.
    rest("PUT", f"/v1/kv/{quoted(PLANTED)}", "bait", token=TEAM_A)
    # More keys in one folder than a page holds.
    for i in range(120):
        rest("PUT", f"/v1/kv/team-a/many/k{i:03}", i)
    build = rest("POST", "/v1/workflows", {"name": "build", "tags": {"team": "a"}})["run_id"]
    rest("POST", "/v1/workflows", {"name": "deploy", "depends_on": [build]})
    rest("POST", "/v1/workflows", {"name": '<img src=x onerror=alert("run")>'})
    rest("POST", "/v1/workflows:claim", {"agent_id": "agent-7", "run_id": build, "lease_ttl_seconds": 300})
    rest("POST", "/v1/leases:acquire", {"resource_id": "team-a/db/migration", "holder_id": "agent-7", "ttl_seconds": 300})
    rest("POST", "/v1/semaphores:acquire", {"name": "team-a/gpu", "holder_id": "agent-8", "capacity": 2, "ttl_seconds": 300})
    rest("POST", "/v1/queues:send", {"queue": "team-a/jobs", "body": {"job": 1}})
    rest("POST", "/v1/queues:send", {"queue": "team-a/jobs.dead", "body": {"job": "failed three times"}})
    rest("POST", "/v1/paths:reserve", {"scope": "team-a/repo", "holder_id": "agent-7", "patterns": ["src/**"], "ttl_seconds": 300})
    rest("POST", "/v1/checkpoints", {"description": "Finished the schema migration", "workspace": "demo"})
    rest("PUT", "/v1/knowledge/team-a/notes/deploys", {"content": "Deploys run after the build passes.", "scope": "team-a"})
    return build


class Watched:
    """A page whose console errors, dialogs and requests are recorded."""

    def __init__(self, context):
        self.page = context.new_page()
        self.errors, self.dialogs, self.foreign = [], [], []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("request", lambda r: None if r.url.startswith(URL) else self.foreign.append(r.url))
        self.refused = []
        self.page.on("response", lambda r: self.refused.append(f"{r.status} {r.request.method} {r.url}") if r.status >= 400 else None)

    def sign_in(self, token):
        self.page.goto(URL + "/")
        self.page.fill("input[name=token]", token)
        self.page.click("form.login button")
        self.page.wait_for_selector("#live.on, #live.off", timeout=5000)

    def view(self, hash_, heading):
        self.page.goto(f"{URL}/#/{hash_}")
        # Drawn once every request of the view has answered (the console marks which).
        self.page.wait_for_function("h => document.getElementById('main').dataset.view === h", arg=f"#/{hash_}", timeout=5000)
        self.page.wait_for_selector(f"main h1:text-is('{heading}')", timeout=5000)

    def forged(self, method, path):
        """A request the page's own script makes with its token: what a forged button would send."""
        return self.page.evaluate(
            """async ([method, path]) => {
                const token = sessionStorage.getItem("state-console-token");
                const r = await fetch(path, {method, headers: {Authorization: `Bearer ${token}`, "Content-Type": "application/json"}});
                return r.status;
            }""",
            [method, path],
        )


def joined_writer():
    """A state-mcp process on the same database, joined to the server's owner."""
    env = dict(os.environ, STATE_RUNTIME_DIR=os.environ["STATE_RUNTIME_DIR"])
    process = subprocess.Popen(
        [os.environ["STATE_MCP"], "--db", os.environ["STATE_DB"], "--log", "warn"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )

    def rpc(id_, method, params):
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + "\n")
        process.stdin.flush()
        return json.loads(process.stdout.readline())

    rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "writer", "version": "1"}})
    process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    process.stdin.flush()
    return process, rpc


def main():
    SHOTS.mkdir(parents=True, exist_ok=True)
    build = seed()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ["CHROMIUM"], args=["--no-sandbox"])
        admin_context = browser.new_context(viewport={"width": 1280, "height": 800})
        admin = Watched(admin_context)
        admin.sign_in(ADMIN)
        check("the admin token signs in and the watch goes live", admin.page.locator("#live.on").count() == 1)
        for hash_, heading in [("", "Overview"), ("keys?prefix=team-a%2F&key=team-a%2Fconfig", "Keys"),
                               (f"runs?run={build}", "Runs"), ("leases", "Leases"),
                               ("queues?queue=team-a%2Fjobs.dead", "Queues"), ("paths", "Path reservations"),
                               ("memory?workspace=demo&query=deploy+build", "Checkpoints and notes"), ("activity", "Activity")]:
            admin.view(hash_, heading)
            name = heading.split()[0].lower()
            admin.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
            check(f"{heading} loads", admin.page.locator("main .error").count() == 0, admin.page.inner_text("main")[:300])
        check("no console error on any view", not admin.errors, (admin.errors, admin.refused))
        check("no request left the origin", not admin.foreign, admin.foreign)

        # The key tree: one level at a time, folders as one line each, pages of 100.
        admin.view("keys?prefix=team-a%2F", "Keys")
        lines = admin.page.locator("main .list a").all_inner_texts()
        check("a folder of 120 keys is one line of its parent", sum(t.startswith("many/") for t in lines) == 1, lines)
        admin.view("keys?prefix=team-a%2Fmany%2F", "Keys")
        first = admin.page.locator("main .list a").all_inner_texts()
        check("a folder lists its first 100 keys and a next page", "k099" in first and "k100" not in first and "next page…" in first,
              first[-3:])
        admin.page.click("main .list a:text('next page…')")
        admin.page.wait_for_selector("main .list a:text('k119')", timeout=5000)
        rest_of_it = admin.page.locator("main .list a").all_inner_texts()
        check("the next page holds the rest", "k100" in rest_of_it and "k099" not in rest_of_it, rest_of_it[:3])

        # The run's timeline and the dependency graph.
        admin.view(f"runs?run={build}", "Runs")
        text = admin.page.inner_text("main")
        check("a run shows its claim with holder and token", "claim" in text and "agent-7" in text, text[:500])
        check("the dependency graph is drawn", admin.page.locator("svg.graph a").count() >= 2)

        # Live: a write from another process shows in the open view within a second.
        admin.view("keys?prefix=team-a%2Flive%2F", "Keys")
        writer, rpc = joined_writer()
        written = rpc(2, "tools/call", {"name": "state_set", "arguments": {"key": "team-a/live/from-an-agent", "value": 1}})
        acknowledged = time.monotonic()
        check("the agent's write was acknowledged", not written["result"].get("isError"), written)
        admin.page.wait_for_selector("main .list a:text('from-an-agent')", timeout=5000)
        seen = time.monotonic() - acknowledged
        check(f"a write by a state-mcp process appears in the open view ({seen * 1000:.0f} ms)", seen < 1.0, seen)
        writer.stdin.close()
        writer.wait(timeout=10)

        # Seven more tabs of one browser (which allows six connections per host): one watch
        # serves them all, so each loads, goes live, and sees a write.
        tabs = []
        for _ in range(7):
            tab = Watched(admin_context)
            tab.sign_in(ADMIN)
            tab.view("keys?prefix=team-a%2Flive%2F", "Keys")
            tabs.append(tab)
        check("seven more tabs all load and go live", all(t.page.locator("#live.on").count() == 1 for t in tabs))
        rest("PUT", "/v1/kv/team-a/live/seen-by-every-tab", 1)
        for tab in tabs:
            tab.page.wait_for_selector("main .list a:text('seen-by-every-tab')", timeout=5000)
        check("a write shows in every tab", True)
        for tab in tabs:
            tab.page.close()

        # Hostile text is text.
        admin.view(f"keys?{urllib.parse.urlencode({'prefix': 'team-a/', 'key': XSS_KEY})}", "Keys")
        main_text = admin.page.inner_text("main")
        # The value is shown as JSON, so its quotes come escaped.
        check("a key and value holding markup show as text", XSS_KEY in main_text and "<img src=x onerror=alert(" in main_text,
              main_text[:400])
        check("a bidi control in a key is shown by its code point, not obeyed", "invoice⟨U+202E⟩gnp.exe" in main_text, main_text[:400])
        admin.view("runs", "Runs")
        check("a run name holding markup shows as text", 'onerror=alert("run")' in admin.page.inner_text("main"))
        check("no markup from the store ran", not admin.dialogs and admin.page.locator("main img").count() == 0, admin.dialogs)

        # A key named like a path into another prefix is that key: deleting it deletes it alone.
        admin.view(f"keys?{urllib.parse.urlencode({'prefix': 'team-a/', 'key': PLANTED})}", "Keys")
        check("a key with dot segments shows its own value", "bait" in admin.page.inner_text("main"), admin.page.inner_text("main")[:300])
        admin.page.click("main button:text('Delete')")
        admin.page.click("#confirm-ok")
        admin.page.wait_for_selector("main p:text('does not exist')", timeout=5000)
        check("deleting it deletes it, not the key it reads like", rest("GET", "/v1/kv/team-b/secret")["value"] == "team-b only")

        # An action: confirmed, done, recorded.
        admin.view("keys?prefix=team-a%2F&key=team-a%2Fdoomed", "Keys")
        admin.page.click("main button:text('Delete')")
        admin.page.click("#confirm-ok")
        admin.page.wait_for_selector("main p:text('does not exist')", timeout=5000)
        history = rest("GET", "/v1/history?key=team-a/doomed")
        check("a delete from the console is in history", history["events"][-1]["op"] == "delete", history)
        admin.view("queues", "Queues")
        admin.page.click("main button:text('Requeue all')")
        admin.page.click("#confirm-ok")
        admin.page.wait_for_function("() => !document.querySelector('main').innerText.includes('Requeue all')", timeout=5000)
        check("dead letters requeued from the console", rest("GET", "/v1/queues?queue=team-a/jobs")["visible"] == 2)

        # A token scoped to team-a sees nothing of team-b and cannot act there.
        scoped = Watched(browser.new_context())
        scoped.sign_in(TEAM_A)
        scoped.view("keys", "Keys")
        text = scoped.page.inner_text("main")
        check("a team-a token starts at its prefix and sees no team-b key", "config" in text and "team-b" not in text, text[:300])
        check("a team-a token's forged delete in team-b is refused", scoped.forged("DELETE", "/v1/kv/team-b/secret") == 403)
        check("team-b's key is still there", rest("GET", "/v1/kv/team-b/secret")["value"] == "team-b only")

        # A read-only token sees no action, and a forged one is refused.
        reader = Watched(browser.new_context())
        reader.sign_in(READER)
        reader.view("keys?prefix=team-a%2F&key=team-a%2Fconfig", "Keys")
        check("a read-only token sees the value", "careful" in reader.page.inner_text("main"))
        check("a read-only token sees no action button", reader.page.locator("main button:text('Delete')").count() == 0)
        reader.page.goto(f"{URL}/#/runs?run={build}")
        reader.page.wait_for_function("h => document.getElementById('main').dataset.view === h", arg=f"#/runs?run={build}", timeout=5000)
        check("nor a run's (a run outside its prefixes is not shown at all)", reader.page.locator("main button:text('Cancel')").count() == 0)
        check("a read-only token's forged delete is refused", reader.forged("DELETE", "/v1/kv/team-a/config") == 403)
        # The refusals the test provokes (every failed load is checked here; the script errors below).
        expected = {"DELETE /v1/kv/team-b/secret", "DELETE /v1/kv/team-a/config", f"GET /v1/workflows/{build}"}
        unexpected = [r for r in scoped.refused + reader.refused if r.split(" ", 1)[1].replace(URL, "").split("?")[0] not in expected]
        check("scoped tokens meet no refusal but the forged ones (and a run outside their prefixes)", not unexpected, unexpected)
        script_errors = [e for e in scoped.errors + reader.errors if "Failed to load resource" not in e]
        check("no script error for the scoped tokens", not script_errors, script_errors)
        browser.close()
    print(f"console: {checks} checks passed")


if __name__ == "__main__":
    main()
