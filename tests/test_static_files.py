"""Static files (Lighthouse): collected under hashed names with gzip copies and served by
whitenoise compressed and cached for good; plotly is the vendored custom bundle of the same
plotly.js version as the pinned plotly.py, loaded only by pages with figures, by their deferred figures.js."""
import gzip
import json
import re
from pathlib import Path

import plotly.offline
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.management import call_command
from django.http import HttpResponseNotFound
from django.template.loader import render_to_string
from django.test import RequestFactory
from django.urls import reverse
from whitenoise.middleware import WhiteNoiseMiddleware

from ownwords_site import settings as production

REPO = Path(__file__).resolve().parent.parent
BUNDLE = REPO / "static" / "vendor" / "plotly" / "plotly-custom.min.js"
TEN_YEARS = 10 * 365 * 24 * 3600


def test_the_vendored_bundle_is_the_plotly_js_of_the_pinned_plotly_py_with_its_licence():
    header = BUNDLE.read_text()[:200]
    version = re.search(r"plotly\.js \(custom: scatter, bar, box, heatmap - minified\) v(\d+\.\d+\.\d+)",
                        header).group(1)
    assert version == plotly.offline.get_plotlyjs_version()
    assert "MIT License" in (BUNDLE.parent / "LICENSE").read_text()
    assert "plotly.js@" + version + "\tMIT" in (BUNDLE.parent / "THIRD-PARTY.txt").read_text()
    # the full bundle of plotly.py is 4.8 MB, the prebuilt cartesian one 1.5 MB
    assert BUNDLE.stat().st_size < 1_300_000


def test_the_bundle_is_built_from_a_lockfile_and_ships_every_bundled_package_s_licence_text():
    build = BUNDLE.parent / "build"
    lock = json.loads((build / "package-lock.json").read_text())
    # build.sh installs exactly the lockfile (npm ci), whose plotly.js is the bundle's
    assert lock["packages"]["node_modules/plotly.js"]["version"] == plotly.offline.get_plotlyjs_version()
    assert lock["packages"][""]["dependencies"] == json.loads((build / "package.json").read_text())["dependencies"]
    assert "npm ci " in (BUNDLE.parent / "build.sh").read_text()
    listing, texts = (BUNDLE.parent / "THIRD-PARTY.txt").read_text().split("\n\n", 1)
    packages = [line.split("\t")[0] for line in listing.splitlines()[1:]]
    assert "plotly.js@" + plotly.offline.get_plotlyjs_version() in packages and len(packages) > 10
    sections = dict(re.findall(r"^=+\n(\S+)\n=+\n(.*?)(?=\n\n=+\n|\Z)", texts, re.M | re.S))
    assert list(sections) == packages
    for package, text in sections.items():  # MIT, BSD-3-Clause and Zlib: a copyright notice and the terms
        assert "Copyright" in text and ("Permission" in text or "Redistribution" in text), package


def test_collected_files_are_hashed_compressed_and_served_with_a_long_cache_lifetime(settings, tmp_path):
    settings.STORAGES = production.STORAGES
    settings.STATIC_ROOT = tmp_path
    settings.WHITENOISE_USE_FINDERS = False
    settings.WHITENOISE_AUTOREFRESH = False
    call_command("collectstatic", interactive=False, verbosity=0)
    url = staticfiles_storage.url("vendor/plotly/plotly-custom.min.js")
    assert re.fullmatch(r"/static/vendor/plotly/plotly-custom\.min\.[0-9a-f]{12}\.js", url), url
    # the page's include names the hashed file for figures.js to load, which is deferred
    script = f'<script src="{staticfiles_storage.url("js/figures.js")}" data-plotly="{url}" defer></script>'
    assert script in render_to_string("includes/figure_scripts.html")

    serve = WhiteNoiseMiddleware(lambda request: HttpResponseNotFound())
    response = serve(RequestFactory().get(url, HTTP_ACCEPT_ENCODING="gzip, deflate"))
    body = b"".join(response.streaming_content)
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert response["Cache-Control"] == f"max-age={TEN_YEARS}, public, immutable"
    assert len(body) < BUNDLE.stat().st_size / 2 and gzip.decompress(body) == BUNDLE.read_bytes()
    # a client that takes no compression gets the plain file
    plain = serve(RequestFactory().get(url))
    assert "Content-Encoding" not in plain and b"".join(plain.streaming_content) == BUNDLE.read_bytes()
    # a name without its hash may change under the same URL: a short lifetime only
    unhashed = serve(RequestFactory().get("/static/vendor/plotly/plotly-custom.min.js"))
    assert unhashed.status_code == 200 and unhashed["Cache-Control"] == "max-age=60, public"


def test_only_pages_with_figures_load_plotly_and_they_defer_it(client, cast, rated_run):
    from experiments.analysis.dashboard import dashboard_refresh
    dashboard_refresh(rated_run)
    client.force_login(cast["owner"])
    slug = rated_run.protocol.project.slug
    without = [reverse("project_detail", args=[slug]), reverse("run_detail", args=[slug, rated_run.pk]),
               reverse("prediction_list", args=[slug, rated_run.pk])]
    for path in without:
        body = client.get(path).content.decode()
        assert "plotly" not in body, path
    body = client.get(reverse("run_dashboard", args=[slug, rated_run.pk])).content.decode()
    scripts = re.findall(r"<script[^>]*\bsrc=[^>]*>", body)
    assert any("plotly-custom.min.js" in s for s in scripts)
    assert all(" defer" in s for s in scripts), scripts
