// Writes THIRD-PARTY.txt for build.sh: every package whose code is in the bundle (from esbuild's
// metafile), with its version and licence, then each one's licence file as the package ships it.
// MIT, BSD-3-Clause and Zlib ask that the copyright notice and the licence text go with the code.
// Usage (in build.sh's scratch folder): node third-party.js meta.json out/plotly-custom.min.js out/THIRD-PARTY.txt
"use strict";
const fs = require("fs");
const path = require("path");
const [metafile, bundle, target] = process.argv.slice(2);

const inputs = Object.entries(JSON.parse(fs.readFileSync(metafile)).outputs[bundle].inputs)
  .filter(([file, input]) => input.bytesInOutput > 0 && !file.endsWith(".css")).map(([file]) => file);
// node_modules/<name>/... or node_modules/@scope/<name>/... (the innermost node_modules: a nested copy
// of a package is a package of its own)
const packageDir = function (file) {
  const parts = file.split("/");
  const at = parts.lastIndexOf("node_modules");
  return parts.slice(0, at + (parts[at + 1].startsWith("@") ? 3 : 2)).join("/");
};
// The MIT licence's text (https://opensource.org/license/mit), for an MIT package that ships no licence file.
const MIT = `Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
associated documentation files (the "Software"), to deal in the Software without restriction, including
without limitation the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is furnished to do so, subject to the
following conditions:

The above copyright notice and this permission notice shall be included in all copies or substantial
portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT
LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO
EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER
IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE
USE OR OTHER DEALINGS IN THE SOFTWARE.`;

// A package with no licence file (a few small ones): what it says of its licence, that is the licence
// section of its readme and its package.json's author, and for MIT the licence's text under that author's
// copyright. Any other licence stops the build: its text is to be found and added by hand.
function withoutLicenceFile(pkg, dir, files) {
  const readme = files.find((name) => /^readme(\.(md|markdown|txt))?$/i.test(name));
  // from a "License" heading to the next heading or the end
  const section = readme && fs.readFileSync(path.join(dir, readme), "utf8")
    .match(/^#+ *licen[cs]e.*\n([\s\S]*?)(?=^#|$(?![\s\S]))/im);
  const author = typeof pkg.author === "object" ? `${pkg.author.name} <${pkg.author.email}>` : pkg.author;
  if (pkg.license !== "MIT" || !author) {
    throw new Error(`${pkg.name}@${pkg.version} ships no licence file: add its licence text by hand`);
  }
  const texts = [`(The package ships no licence file. Its package.json: licence ${pkg.license}, author ${author}.` +
    (section ? ` Its ${readme}'s licence section:)\n\n${section[1].trim()}` : ")")];
  if (!(section && section[1].includes("Permission is hereby granted"))) {  // the readme does not hold the text
    texts.push(`The MIT licence, as its package.json says:\n\nCopyright (c) ${author}\n\n${MIT}`);
  }
  return texts;
}

const dirs = [...new Set(inputs.filter((file) => file.includes("node_modules/")).map(packageDir))];
const packages = dirs.map(function (dir) {
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json")));
  const files = fs.readdirSync(dir);
  const licenceFiles = files.filter((name) => /^(licen[cs]e|copying)([.-].*)?$/i.test(name)).sort();
  const texts = licenceFiles.map((name) => fs.readFileSync(path.join(dir, name), "utf8").trim());
  if (!texts.length) texts.push(...withoutLicenceFile(pkg, dir, files));
  return { name: pkg.name, id: `${pkg.name}@${pkg.version}`, licence: pkg.license || "see its package", texts: texts };
}).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.id < b.id ? -1 : 1));

const rule = "=".repeat(78);
fs.writeFileSync(target, [
  "Packages whose code is in plotly-custom.min.js (name@version, licence):",
  ...packages.map((p) => `${p.id}\t${p.licence}`),
  "",
  "Their licences (copyright notice and licence text): each package's licence file, or for a package with",
  "none, what it says of its licence.",
  ...packages.map((p) => ["", rule, p.id, rule, p.texts.join("\n\n")].join("\n")),
  "",
].join("\n"));
