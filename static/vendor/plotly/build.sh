#!/bin/sh
# Builds plotly-custom.min.js: plotly.js with only the trace types the app draws (scatter, bar, box,
# heatmap), from plotly.js's own source on the npm registry, with esbuild (plotly.js's own bundler).
# Needs node and npm, nothing else; works in a scratch folder and writes three files here:
#   plotly-custom.min.js     the bundle (the global `Plotly`, as the prebuilt bundles)
#   THIRD-PARTY.txt          every package whose code is in the bundle, with its version and licence
#   (its sha256 goes into README.md by hand, with the date)
# The plotly.js version must stay the plotly.js of the pinned plotly.py (tests/test_static_files.py):
#   sh static/vendor/plotly/build.sh $(.venv/bin/python -c "import plotly.offline as o; print(o.get_plotlyjs_version())")
set -eu
PLOTLY_JS=${1:-4.1.1}
ESBUILD=0.28.2
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
npm init -y >/dev/null
# --ignore-scripts: plotly.js's install scripts prepare its development tree, not its source.
npm install --ignore-scripts --no-audit --no-fund --silent "plotly.js@$PLOTLY_JS" "esbuild@$ESBUILD"
# plotly.js's lib/core holds scatter, every component (legend, hover, error bars, shapes, annotations,
# colour bars, the mode bar) and the plotting API; the other three trace types are registered here.
cat > entry.js <<'EOF'
'use strict';
var Plotly = require('plotly.js/lib/core');
Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/box'), require('plotly.js/lib/heatmap')]);
module.exports = Plotly;
EOF
# The options of plotly.js's esbuild-config.js that matter here, minified like its dist bundles. A CSS
# file esbuild writes beside the bundle (maplibre's, imported by plotly's map code) is not used.
npx esbuild entry.js --bundle --minify --format=iife --global-name=Plotly --target=es2016 \
  --define:global=window --define:define.amd=false --alias:stream=stream-browserify \
  --banner:js="/** plotly.js (custom: scatter, bar, box, heatmap - minified) v$PLOTLY_JS, built by static/vendor/plotly/build.sh with esbuild $ESBUILD. Copyright 2012-2026, Plotly, Inc. MIT license; bundled packages: THIRD-PARTY.txt */" \
  --metafile=meta.json --log-level=warning --outfile=out/plotly-custom.min.js
node -e '
const fs = require("fs");
const inputs = Object.entries(require("./meta.json").outputs["out/plotly-custom.min.js"].inputs)
  .filter(([path, input]) => input.bytesInOutput > 0 && !path.endsWith(".css")).map(([path]) => path);
const packages = new Set(inputs.filter(p => p.startsWith("node_modules/"))
  .map(p => p.split("/").slice(0, p.split("/")[1].startsWith("@") ? 3 : 2).join("/")));
const lines = [...packages].sort().map(dir => {
  const pkg = JSON.parse(fs.readFileSync(dir + "/package.json"));
  return `${pkg.name}@${pkg.version}\t${pkg.license || "see its package"}`;
});
fs.writeFileSync("out/THIRD-PARTY.txt", "Packages whose code is in plotly-custom.min.js (name@version, licence):\n" + lines.join("\n") + "\n");
'
cp out/plotly-custom.min.js out/THIRD-PARTY.txt "$HERE/"
sha256sum "$HERE/plotly-custom.min.js"
