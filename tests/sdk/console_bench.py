"""How soon each console view is usable on a large store, measured in the browser.

Debian's headless Chromium (Playwright) opens each view LOADS times, each time in a fresh
browser context (nothing cached, a new sign-in, a new watch), and reads from the page's own
Performance timeline when the view was drawn (`state-view-drawn`, every request of the view
answered and its DOM in place) and when the frame after it was painted (`state-view-painted`:
layout and paint of what was drawn, a 500-node SVG graph included). Times are from the start
of navigation. Also reported: the bytes the first view transferred.

Environment: STATE_URL (a server without tokens), CHROMIUM, VIEWS (space-separated hashes),
LOADS. Prints one JSON object per view, then `console bench: done`.
"""

import json
import os
import statistics

from playwright.sync_api import sync_playwright

URL = os.environ["STATE_URL"]
# `overview` is the console's front page, `#/`.
VIEWS = os.environ.get("VIEWS", "").split() or ["overview", "keys", "runs", "leases", "queues", "activity"]
LOADS = int(os.environ.get("LOADS", "5"))

FIGURES = """() => {
  const mark = (name) => performance.getEntriesByName(name)[0]?.startTime ?? null;
  const navigation = performance.getEntriesByType("navigation")[0];
  const resources = performance.getEntriesByType("resource");
  const bytes = (navigation?.transferSize || 0) + resources.reduce((n, r) => n + (r.transferSize || 0), 0);
  const requests = resources.map((r) => new URL(r.name).pathname);
  // The API's answers the view waited for (the watch stream, still open, excluded).
  const api = resources.filter((r) => /^\/v1\//.test(new URL(r.name).pathname) && !r.name.includes("/v1/watch"));
  const slowest = api.reduce((worst, r) => (r.duration > worst.duration ? r : worst), { duration: 0, name: "" });
  return { drawn: mark("state-view-drawn"), painted: mark("state-view-painted"), bytes, requests,
           slowest_ms: slowest.duration, slowest: slowest.name ? new URL(slowest.name).pathname : "" };
}"""


def main():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ["CHROMIUM"], args=["--no-sandbox"])
        for view in VIEWS:
            drawn, painted, bytes_, errors, slowest = [], [], [], [], []
            requests = []
            for _ in range(LOADS):
                context = browser.new_context(viewport={"width": 1280, "height": 800})
                page = context.new_page()
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(f"{URL}/#/{'' if view == 'overview' else view}")
                page.wait_for_function("() => performance.getEntriesByName('state-view-painted').length > 0", timeout=60000)
                figures = page.evaluate(FIGURES)
                drawn.append(figures["drawn"])
                painted.append(figures["painted"])
                bytes_.append(figures["bytes"])
                slowest.append((figures["slowest_ms"], figures["slowest"]))
                requests = figures["requests"]
                if page.locator("main .error").count():
                    errors.append(page.inner_text("main .error"))
                context.close()
            print(json.dumps({
                "view": view,
                "loads": LOADS,
                "drawn_median_ms": round(statistics.median(drawn), 1),
                "painted_median_ms": round(statistics.median(painted), 1),
                "painted_max_ms": round(max(painted), 1),
                "bytes": int(statistics.median(bytes_)),
                "requests": len(requests),
                "slowest_request_ms": round(statistics.median(ms for ms, _ in slowest), 1),
                "slowest_request": max(slowest)[1],
                "errors": errors[:3],
            }), flush=True)
        browser.close()
    print("console bench: done")


if __name__ == "__main__":
    main()
