#!/usr/bin/env node
// Runs one of state's binaries from the package for this platform (installed beside this one
// as an optional dependency, as esbuild and biome ship theirs), with this process's stdin,
// stdout and stderr: an MCP client speaks to the binary itself.
"use strict";

const { spawnSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

// The platform packages of this release, by `process.platform process.arch` (written by
// `cargo xtask dist`): exactly the ones it holds.
const PLATFORMS = require("./platforms.json");

function binaryPath(name) {
  const key = `${process.platform} ${process.arch}`;
  const pkg = PLATFORMS[key];
  if (!pkg) {
    const offered = Object.keys(PLATFORMS).join(", ");
    throw new Error(
      `this release of state has no build for ${key} (it has: ${offered}); build it from source with cargo (see its README)`,
    );
  }
  let dir;
  try {
    dir = path.dirname(require.resolve(`${pkg}/package.json`));
  } catch {
    throw new Error(`${pkg} is not installed: reinstall without --no-optional (npm install state-mcp)`);
  }
  const file = path.join(dir, "bin", name);
  try {
    fs.accessSync(file, fs.constants.X_OK);
  } catch {
    fs.chmodSync(file, 0o755); // some package managers drop the executable bit
  }
  return file;
}

function run(name) {
  let file;
  try {
    file = binaryPath(name);
  } catch (error) {
    process.stderr.write(`${name}: ${error.message}\n`);
    process.exit(1);
  }
  const result = spawnSync(file, process.argv.slice(2), { stdio: "inherit" });
  if (result.error) {
    process.stderr.write(`${name}: cannot run ${file}: ${result.error.message}\n`);
    process.exit(1);
  }
  if (result.signal) {
    process.kill(process.pid, result.signal);
  }
  process.exit(result.status ?? 1);
}

module.exports = { run };
