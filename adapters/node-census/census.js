// What the census's adapters share: this directory's pinned packages
// (package-lock.json), whichever directory hiatus runs them from.
"use strict";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");
const { pathToFileURL } = require("url");

const pinned = createRequire(path.join(__dirname, "package.json"));

// version is the installed version of pkg, for the hello's library: read
// from its package.json, which some packages' exports do not let require.
function version(pkg) {
  return JSON.parse(fs.readFileSync(path.join(__dirname, "node_modules", pkg, "package.json"), "utf8")).version;
}

// importPinned loads an ES-module-only package (no require on Node 20).
function importPinned(pkg) {
  return import(pathToFileURL(pinned.resolve(pkg)).href);
}

module.exports = { pinned, version, importPinned };
