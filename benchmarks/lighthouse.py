"""Lighthouse performance and accessibility scores of the main pages, on the demo data, logged in.

    npm install --prefix /tmp/lh lighthouse        # once, outside the repository
    .venv/bin/python benchmarks/lighthouse.py              # production mode: DEBUG off, collectstatic, whitenoise
    DEBUG=1 .venv/bin/python benchmarks/lighthouse.py      # bin/demo's mode: DEBUG on, files from the finders
    RUNS=5 PRESET=desktop .venv/bin/python benchmarks/lighthouse.py
    PAGES=dashboard,"campaign results" REPORTS=/tmp/reports .venv/bin/python benchmarks/lighthouse.py

Builds what bin/demo builds (demo_setup inline, demo_ratings, then every open rating of the demo
campaign filled in so its results page has figures) in a scratch database on the embedded server
(static files under a temporary folder), serves it with `manage.py runserver` on a free port, and runs Lighthouse (its default
mobile emulation with simulated throttling, or PRESET=desktop) on each page RUNS times with the
demo owner's session cookie. Prints the best and the median performance score per page, with the
median first contentful paint, largest contentful paint, total blocking time and bytes sent, with the
load average and a speed check (sum of i*i below 10**7 in Python) before and after.

Lighthouse is found as LIGHTHOUSE, on PATH, or in /tmp/lh/node_modules/.bin; Chromium as
CHROME_PATH (default /usr/bin/chromium). Without Lighthouse the script says so and exits 0.
"""
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ownwords_site import embedded  # noqa: E402
from page_setup import speed_check  # noqa: E402
RUNS = int(os.environ.get("RUNS", 3))
PRESET = os.environ.get("PRESET", "")  # "" (mobile) or "desktop"
DEBUG = os.environ.get("DEBUG", "0") not in ("", "0", "false", "False")
CHROME = os.environ.get("CHROME_PATH", "/usr/bin/chromium")
ONLY = [name for name in os.environ.get("PAGES", "").split(",") if name]  # e.g. PAGES=dashboard,task
REPORTS = os.environ.get("REPORTS")  # a folder to keep each run's JSON report in


def lighthouse_binary() -> str | None:
    for candidate in (os.environ.get("LIGHTHOUSE"), shutil.which("lighthouse"),
                      "/tmp/lh/node_modules/.bin/lighthouse"):
        if candidate and Path(candidate).exists():
            return candidate
    return None


LIGHTHOUSE = lighthouse_binary()
if LIGHTHOUSE is None:
    print("Lighthouse is not installed: skipped. Install it outside the repository with "
          "`npm install --prefix /tmp/lh lighthouse` (or set LIGHTHOUSE=/path/to/lighthouse).")
    sys.exit(0)
if not Path(CHROME).exists():
    print(f"No Chromium at {CHROME}: skipped (set CHROME_PATH).")
    sys.exit(0)

scratch = Path(tempfile.mkdtemp(prefix="ownwords-lighthouse-"))
SERVER_ENV = {
    **os.environ,
    # A fresh database on the embedded server (DATABASE_URL: another server's).
    "DATABASE_URL": os.environ.get("DATABASE_URL") or embedded.fresh_postgres_url(ROOT / "var", "bench_lighthouse"),
    "STATIC_ROOT": str(scratch / "static"),
    "SECRET_KEY": "lighthouse-benchmark-only",
    "DEBUG": "1" if DEBUG else "0",
    "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/14"),
    "DJANGO_SETTINGS_MODULE": "ownwords_site.settings",
}
os.environ.update(SERVER_ENV)
sys.path.insert(0, str(ROOT))

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import reverse  # noqa: E402

from annotations.campaign_agreement import campaign_results  # noqa: E402
from annotations.models import Assignment, RatingCampaign  # noqa: E402
from annotations.rating import rating_record  # noqa: E402
from experiments.models import Prediction, Run  # noqa: E402


def demo_pages() -> tuple[dict[str, str], dict[str, str]]:
    """The demo's pages by name, and the session cookie each is opened with (its owner's; a demo
    rater's for the rating page)."""
    quiet = open(os.devnull, "w")
    call_command("migrate", verbosity=0)
    call_command("demo_setup", stdout=quiet)
    call_command("demo_ratings", stdout=quiet)
    campaign = RatingCampaign.objects.get(project__slug="demo", name="demo-ratings")
    # Two raters who mostly agree, so every agreement figure has something to draw; the last open item
    # of each rater is left for the rating page.
    open_items = list(Assignment.objects.filter(campaign=campaign, status=Assignment.Status.OPEN)
                      .select_related("item").order_by("rater_id", "position"))
    last = {a.rater_id: a.pk for a in open_items}
    for a in (a for a in open_items if a.pk != last[a.rater_id]):
        grade = (a.item.number * 5 + (a.rater_id % 2) * (a.item.number % 3 == 0)) % 4
        rating_record(campaign=campaign, user=a.rater, assignment_id=a.pk, grade=grade, flagged=False,
                      flag_reason="", note="", seconds=12.0)
    campaign_results(campaign, use_cache=False)
    if not DEBUG:
        call_command("collectstatic", interactive=False, verbosity=0)
    run = Run.objects.get(protocol__project__slug="demo")
    task_pk = Prediction.objects.filter(run=run).order_by("task_id").values_list("task_id", flat=True)[0]
    slug = "demo"
    pages = {
        "login": reverse("login"),
        "project": reverse("project_detail", args=[slug]),
        "run": reverse("run_detail", args=[slug, run.pk]),
        "dashboard": reverse("run_dashboard", args=[slug, run.pk]),
        "explorer": reverse("run_explorer", args=[slug, run.pk]),
        "task": reverse("prediction_detail", args=[slug, run.pk, task_pk]),
        "campaign results": reverse("campaign_results", args=[slug, campaign.pk]),
        "rating": reverse("rate_page", args=[slug, campaign.pk]),
    }
    cookies = {}
    for name in pages:
        client = Client()
        client.force_login(get_user_model().objects.get(username="demo-rater-1" if name == "rating" else "demo"))
        cookies[name] = client.cookies["sessionid"].value
    return pages, cookies


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(port: int) -> subprocess.Popen:
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT, env=SERVER_ENV, stdout=subprocess.DEVNULL, stderr=open(scratch / "server.log", "w"))
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=2)
            return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    sys.exit(f"the server did not start; see {scratch / 'server.log'}")


def lighthouse(url: str, cookie: str, name: str) -> dict:
    out = Path(REPORTS or scratch) / f"{name.replace(' ', '-')}-{time.time_ns()}.json"
    command = [LIGHTHOUSE, url, "--quiet", "--only-categories=performance,accessibility", "--output=json",
               f"--output-path={out}", "--chrome-flags=--headless --no-sandbox --disable-gpu",
               "--extra-headers", json.dumps({"Cookie": f"sessionid={cookie}"})]
    if PRESET:
        command.append(f"--preset={PRESET}")
    for attempt in range(2):  # Chromium now and then fails to start on a busy machine: once more
        done = subprocess.run(command, env={**os.environ, "CHROME_PATH": CHROME}, capture_output=True, text=True)
        if done.returncode == 0:
            break
    else:
        sys.exit(f"{name}: lighthouse failed twice: {done.stderr.strip().splitlines()[-1:]}")
    report = json.loads(out.read_text())
    audits = report["audits"]
    return {
        "score": round(100 * report["categories"]["performance"]["score"]),
        "a11y": round(100 * report["categories"]["accessibility"]["score"]),
        "fcp": audits["first-contentful-paint"]["numericValue"],
        "lcp": audits["largest-contentful-paint"]["numericValue"],
        "tbt": audits["total-blocking-time"]["numericValue"],
        "bytes": audits["total-byte-weight"]["numericValue"],
        "final_url": report.get("finalDisplayedUrl") or report.get("finalUrl", url),
    }


def machine() -> str:
    """The machine's state, which simulated throttling scales: its load and a fixed piece of Python."""
    speed = speed_check()
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return f"load average {load}, speed check {speed:.2f} s"


def main() -> None:
    pages, cookies = demo_pages()
    port = free_port()
    server = serve(port)
    mode = "DEBUG on (files from the finders)" if DEBUG else "DEBUG off (collectstatic, whitenoise)"
    print(f"Lighthouse performance, {PRESET or 'mobile'} preset, {mode}, {RUNS} runs per page; {machine()}")
    print(f"{'page':<18} {'best':>4} {'median':>6} {'a11y':>5} {'FCP ms':>7} {'LCP ms':>7} {'TBT ms':>7} {'kB sent':>8}")
    try:
        for name, path in pages.items():
            if ONLY and name not in ONLY:
                continue
            url = f"http://127.0.0.1:{port}{path}"
            results = [lighthouse(url, cookies[name], name) for _ in range(RUNS)]
            if name != "login" and "/accounts/login/" in results[0]["final_url"]:
                sys.exit(f"{name}: redirected to the login page; the session cookie was not accepted")
            median = {k: statistics.median(r[k] for r in results) for k in ("score", "a11y", "fcp", "lcp", "tbt", "bytes")}
            print(f"{name:<18} {max(r['score'] for r in results):>4} {median['score']:>6.0f} {median['a11y']:>5.0f} "
                  f"{median['fcp']:>7.0f} "
                  f"{median['lcp']:>7.0f} {median['tbt']:>7.0f} {median['bytes'] / 1024:>8.0f}", flush=True)
    finally:
        print(f"after: {machine()}")
        server.terminate()
        server.wait()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
