#!/bin/sh
# Builds plotly-custom.min.js: plotly.js with only the trace types the app draws (scatter, bar, box,
# heatmap), from plotly.js's own source on the npm registry, with esbuild (plotly.js's own bundler).
# Needs node and npm, nothing else. Every package (plotly.js, esbuild and all they depend on) is the
# version pinned by build/package-lock.json, installed by `npm ci` in a scratch folder, so that a rebuild
# gives the same bytes (the sha256 in README.md). Writes two files here:
#   plotly-custom.min.js     the bundle (the global `Plotly`, as the prebuilt bundles)
#   THIRD-PARTY.txt          every package whose code is in the bundle, its version, licence and licence text
#   (its sha256 goes into README.md by hand, with the date)
# The plotly.js version must stay the plotly.js of the pinned plotly.py (tests/test_static_files.py). To change
# it, pin the new version (this rewrites build/package.json and build/package-lock.json) and build:
#   sh static/vendor/plotly/build.sh --update $(.venv/bin/python -c "import plotly.offline as o; print(o.get_plotlyjs_version())")
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = "--update" ]; then
  # --ignore-scripts: plotly.js's install scripts prepare its development tree, not its source.
  (cd "$HERE/build" && npm install --package-lock-only --save-exact --ignore-scripts --no-audit --no-fund \
    "plotly.js@$2")
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp "$HERE/build/package.json" "$HERE/build/package-lock.json" "$HERE/build/third-party.js" "$WORK/"
cd "$WORK"
npm ci --ignore-scripts --no-audit --no-fund --silent
PLOTLY_JS=$(node -p 'require("plotly.js/package.json").version')
ESBUILD=$(node -p 'require("esbuild/package.json").version')
# plotly.js's lib/core holds scatter, every component (legend, hover, error bars, shapes, annotations,
# colour bars, the mode bar) and the plotting API; the other three trace types are registered here.
cat > entry.js <<'JS'
'use strict';
var Plotly = require('plotly.js/lib/core');
Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/box'), require('plotly.js/lib/heatmap')]);
module.exports = Plotly;
JS
# The options of plotly.js's esbuild-config.js that matter here, minified like its dist bundles. A CSS
# file esbuild writes beside the bundle (maplibre's, imported by plotly's map code) is not used.
npx esbuild entry.js --bundle --minify --format=iife --global-name=Plotly --target=es2016 \
  --define:global=window --define:define.amd=false --alias:stream=stream-browserify \
  --banner:js="/** plotly.js (custom: scatter, bar, box, heatmap - minified) v$PLOTLY_JS, built by static/vendor/plotly/build.sh with esbuild $ESBUILD. Copyright 2012-2026, Plotly, Inc. MIT license; bundled packages: THIRD-PARTY.txt */" \
  --metafile=meta.json --log-level=warning --outfile=out/plotly-custom.min.js
node third-party.js meta.json out/plotly-custom.min.js out/THIRD-PARTY.txt
cp out/plotly-custom.min.js out/THIRD-PARTY.txt "$HERE/"
sha256sum "$HERE/plotly-custom.min.js"
