"""The --html report in a real headless browser (issue 30): Debian's chromium driven by Playwright
(PyPI) with the system browser. Run by scripts/test_wheel.sh when /usr/bin/chromium exists.

Checks, for a plan and a check report written by the CLI: the page renders with no console error,
no page error and no request other than the file itself (it must work offline); the charts carry the
numbers of the CLI's own --json answer for the same arguments (peaks, tokens/s, the collectives, the
ds_config); hovering a buffer shows its source and lifetime; the copy button works.
Usage: python browser_html.py ZEROPLAN_BINARY [SCREENSHOT.png]
"""

import json
import os
import subprocess
import sys
import tempfile

from playwright.sync_api import sync_playwright

CLI = sys.argv[1]
SHOT = sys.argv[2] if len(sys.argv) > 2 else None
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHROMIUM = os.environ.get("ZEROPLAN_CHROMIUM", "/usr/bin/chromium")
failures = []


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def gb(b):  # the report's own rounding: GB = 1e9 bytes, one decimal
    return f"{b / 1e9:.1f} GB"


def report(args, path):
    subprocess.run([CLI, *args, "--html", path, "--force"], check=False, capture_output=True)
    out = subprocess.run([CLI, *args, "--json"], capture_output=True, text=True)
    return json.loads(out.stdout)


def open_page(browser, path):
    page = browser.new_page(viewport={"width": 1180, "height": 900})
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto("file://" + path)
    page.wait_for_selector("body[data-rendered='1']", timeout=10000)
    return page, errors, requests


with tempfile.TemporaryDirectory() as d, sync_playwright() as pw:
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])

    # ---- plan report
    plan_html = os.path.join(d, "plan.html")
    answer = report(["--model", "13b", "--gpus", "4xA40"], plan_html)
    page, errors, requests = open_page(browser, plan_html)
    expect(errors == [], f"plan report: no console/page errors ({errors[:3]})")
    expect(requests == ["file://" + plan_html], f"plan report: loads nothing else ({requests[:3]})")
    rec = answer["recommendation"]
    verdict = page.inner_text("#verdict")
    expect(f"{round(rec['throughput']['tokens_per_s'])} tokens/s" in verdict, "verdict shows the recommended tokens/s")
    expect(gb(rec["memory"]["gpu"]["peak"]) in verdict, "verdict shows the recommended peak")
    bars = page.text_content("#membars")
    for p in answer["plans"]:
        expect(gb(p["memory"]["gpu"]["peak"]) in bars, f"memory bars show ZeRO-{p['zero_stage']}'s peak {gb(p['memory']['gpu']['peak'])}")
    expect(page.locator("#membars rect.buf").count() >= 4 * len(answer["plans"]), "memory bars are stacked by buffer")
    over = page.text_content("#overstep")
    for p in answer["plans"]:
        expect(f"ZeRO-{p['zero_stage']}: peak {gb(p['memory']['gpu']['peak'])} ({p['memory']['gpu']['peak_phase']})" in over,
               f"memory over the step marks ZeRO-{p['zero_stage']}'s peak and its phase")
    expect(page.locator("#tps circle.pt").count() >= 8 * len(answer["plans"]), "tokens/s sweep has points per plan")
    rows = page.locator("#collectives tr").count() - 1
    expect(rows == len(rec["communication"]["collectives"]), f"collectives table has {rows} rows")
    first = rec["communication"]["collectives"][0]
    expect(first["name"] in page.inner_text("#collectives"), "collectives table names the first collective")
    expect(page.locator("#reasons li").count() == len(answer["reasons"]), "every reason is listed")
    expect(json.loads(page.inner_text("#config")) == rec["deepspeed_config"], "the shown ds_config equals --json's")
    if SHOT:
        page.screenshot(path=SHOT, full_page=True)
        print("screenshot:", SHOT)
    # Hover a parameter buffer: its tooltip names the buffer's source and lifetime.
    page.locator("#membars rect.buf").first.hover()
    tip = page.inner_text("#tip")
    expect("live:" in tip and "GB" in tip, f"hover shows size and lifetime ({tip[:80]!r})")
    page.click("#copy")
    page.wait_for_timeout(200)
    expect(page.inner_text("#copy") == "Copied", "the copy button copies")

    # ---- check report
    check_html = os.path.join(d, "check.html")
    cfg = os.path.join(SRC, "configs", "examples", "13b-4xA40-zero3.json")
    canswer = report(["check", cfg, "--model", "13b", "--gpus", "4xA40"], check_html)
    page, errors, requests = open_page(browser, check_html)
    expect(errors == [], f"check report: no console/page errors ({errors[:3]})")
    expect(requests == ["file://" + check_html], "check report: loads nothing else")
    expect(canswer["verdict"] in page.inner_text("#verdict"), "check report shows the verdict")
    expect(gb(canswer["predicted"]["memory"]["gpu"]["peak"]) in page.text_content("#membars"),
           "check report shows the config's predicted peak")

    # ---- diagnose report
    diag_html = os.path.join(d, "diagnose.html")
    log = os.path.join(SRC, "tests", "diagnose", "z2_tiny_buckets.log")
    danswer = report(["diagnose", log, "--model", "7b", "--gpus", "4xA40"], diag_html)
    page, errors, requests = open_page(browser, diag_html)
    expect(errors == [], f"diagnose report: no console/page errors ({errors[:3]})")
    expect(requests == ["file://" + diag_html], "diagnose report: loads nothing else")
    expect(f"{len(danswer['causes'])} cause(s) found" in page.inner_text("#verdict"), "diagnose report counts the causes")
    expect(f"predicted step {danswer['predicted']['step_ms']:.0f} ms" in page.inner_text("#verdict"),
           "diagnose report shows the predicted step")
    expect(danswer["fixed_config"] is not None and json.loads(page.inner_text("#config")) == danswer["fixed_config"],
           "diagnose report shows the corrected config")
    expect(danswer["causes"][0]["title"] in page.inner_text("#reasons"), "diagnose report lists the first cause")
    browser.close()

print("browser test:", "FAILED" if failures else "ok", f"({len(failures)} failures)")
sys.exit(1 if failures else 0)
