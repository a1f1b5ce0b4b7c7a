// What the census's adapters share: this directory's pinned packages
// (package-lock.json), whichever directory hiatus runs them from.
"use strict";
const path = require("path");
const protocol = require("../node/protocol");
const { createRequire } = require("module");
const { pathToFileURL } = require("url");

const pinned = createRequire(path.join(__dirname, "package.json"));

// version is the installed version of pkg in this directory.
const version = (pkg) => protocol.version(pkg, __dirname);

// importPinned loads an ES-module-only package (no require on Node 20).
function importPinned(pkg) {
  return import(pathToFileURL(pinned.resolve(pkg)).href);
}

module.exports = { pinned, version, importPinned };
