#!/usr/bin/env node
// The npm registry reachable here does not serve every platform build of optional native
// packages (e.g. @msgpackr-extract/*-darwin-arm64@3.0.7). `npm install` then leaves them out of
// package-lock.json and `npm ci` refuses the lock as "out of sync". This adds a lock entry with
// the package's os/cpu for every optional dependency the lock names but lacks, so `npm ci` skips
// it as a foreign platform without fetching it. Run after `npm install`:
//   node scripts/lock-foreign-platforms.js
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const file = path.join(__dirname, '..', 'package-lock.json');
const lock = JSON.parse(fs.readFileSync(file, 'utf8'));
const OS = ['darwin', 'linux', 'win32', 'freebsd', 'android', 'openharmony', 'sunos', 'aix', 'netbsd', 'openbsd'];
const CPU = ['arm64', 'x64', 'ia32', 'arm', 'loong64', 'ppc64', 'riscv64', 's390x', 'wasm32'];

let added = 0;
for (const [where, entry] of Object.entries(lock.packages)) {
  for (const [name, version] of Object.entries(entry.optionalDependencies ?? {})) {
    const base = where === '' ? 'node_modules' : `${where}/node_modules`;
    const candidates = [`${base}/${name}`, `node_modules/${name}`];
    if (candidates.some((c) => lock.packages[c])) continue;
    const parts = name.split('/').pop().split('-');
    const os = parts.find((p) => OS.includes(p));
    const cpu = parts.find((p) => CPU.includes(p));
    if (!os || !cpu) continue; // not a platform build: leave it to npm
    lock.packages[`node_modules/${name}`] = {
      version: String(version).replace(/^[^\d]*/, ''),
      cpu: [cpu],
      os: [os],
      optional: true,
      ...(entry.dev ? { dev: true } : {}),
    };
    added++;
  }
}
lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b))));
fs.writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`);
process.stdout.write(`package-lock.json: ${added} foreign-platform optional entries added\n`);
