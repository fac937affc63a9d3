// The protocol authors' bridge client as this suite runs it: the vendored files checked against
// the pinned SHA-256 list (so "unmodified" is proven on every run), compiled with the pinned
// TypeScript into sophon-bridge/build/, then started as its own README says a headless user
// would: `bridge openclaw --manual-pair --json`, with its configuration in a temporary folder.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
export const PKG = join(HERE, 'sophon-bridge');
export const VENDOR = join(PKG, 'vendor');
export const BUILD = join(PKG, 'build');
export const CLI = join(BUILD, 'dist', 'cli.js');
const SUMS = join(PKG, 'SHA256SUMS');

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...walk(path));
    else out.push(path);
  }
  return out;
}

// Every file under vendor/ must be listed in SHA256SUMS with its hash, and every listed file must
// be there: returns the differences, empty when the vendored copy is the pinned one.
export function verifyVendor() {
  const listed = new Map();
  for (const line of readFileSync(SUMS, 'utf8').split('\n')) {
    const m = /^([0-9a-f]{64})  (.+)$/.exec(line);
    if (m) listed.set(m[2], m[1]);
  }
  const problems = [];
  const present = new Set();
  for (const path of walk(VENDOR)) {
    const name = relative(PKG, path);
    present.add(name);
    const sum = createHash('sha256').update(readFileSync(path)).digest('hex');
    if (!listed.has(name)) problems.push(`${name}: not in SHA256SUMS`);
    else if (listed.get(name) !== sum) problems.push(`${name}: sha256 ${sum}, pinned ${listed.get(name)}`);
  }
  for (const name of listed.keys()) if (!present.has(name)) problems.push(`${name}: missing`);
  if (listed.size === 0) problems.push('SHA256SUMS lists no file');
  return problems;
}

// tsc over the vendored sources with the authors' compiler options (tsconfig.build.json extends
// their tsconfig.json and only moves the output and leaves out their vitest files). The output
// sits beside a copy of their package.json, which the client reads its version from.
export function build() {
  const tsc = join(HERE, 'node_modules', 'typescript', 'bin', 'tsc');
  rmSync(BUILD, { recursive: true, force: true });
  const out = spawnSync(process.execPath, [tsc, '-p', join(PKG, 'tsconfig.build.json')], { encoding: 'utf8', timeout: 120000 });
  if (out.status !== 0) throw new Error(`tsc failed (${out.status}): ${out.stdout}${out.stderr}`);
  copyFileSync(join(VENDOR, 'package.json'), join(BUILD, 'package.json'));
  return CLI;
}

// One run of the authors' bridge. Its configuration (credentials.json, session-keys.json) lives
// in a temporary folder; a stand-in `openclaw` on PATH satisfies its installed-binary check
// (`which openclaw`), and the gateway's URL and token are given on the command line, so it never
// looks at ~/.openclaw and never offers to install anything.
export class SophonBridge {
  constructor({ relayUrl, gatewayUrl, gatewayToken, hostLabel = 'interop-host', node = process.execPath, nodeArgs = [] }) {
    this.dir = mkdtempSync(join(tmpdir(), 'sophon-bridge-'));
    this.config = join(this.dir, 'config');
    this.home = join(this.dir, 'home');
    mkdirSync(this.home);
    const bin = join(this.dir, 'bin');
    mkdirSync(bin);
    const stub = join(bin, 'openclaw');
    writeFileSync(stub, '#!/bin/sh\necho "stand-in: the real OpenClaw does not run in this test suite" >&2\nexit 1\n');
    chmodSync(stub, 0o755);
    this.bin = bin;
    this.relayUrl = relayUrl;
    this.gatewayUrl = gatewayUrl;
    this.gatewayToken = gatewayToken;
    this.hostLabel = hostLabel;
    this.node = node;
    this.nodeArgs = nodeArgs;
    this.events = [];
    this.stderr = '';
    this.proc = null;
    this.waiters = [];
  }

  env() {
    const env = {};
    for (const [k, v] of Object.entries(process.env)) {
      if (!k.startsWith('SOPHON_') && !k.startsWith('OPENCLAW_') && !k.startsWith('RELAY_')) env[k] = v;
    }
    return { ...env, HOME: this.home, SOPHON_CONFIG_DIR: this.config, PATH: `${this.bin}:${process.env.PATH}`,
      NO_COLOR: '1' };
  }

  start() {
    const argv = [...this.nodeArgs, CLI, 'openclaw', '--json', '--verbose', '--manual-pair', '--yes',
      '--sophon-base', this.relayUrl, '--openclaw-url', this.gatewayUrl, '--openclaw-token', this.gatewayToken,
      '--host-label', this.hostLabel];
    this.proc = spawn(this.node, argv, { env: this.env(), stdio: ['ignore', 'pipe', 'pipe'] });
    let buf = '';
    this.proc.stdout.on('data', (chunk) => {
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        try {
          this.events.push(JSON.parse(line));
        } catch {
          this.events.push({ event: 'unparsed', line });
        }
        this.wake();
      }
    });
    this.proc.stderr.on('data', (chunk) => { this.stderr += chunk; this.wake(); });
    this.proc.on('exit', (code, signal) => { this.exit = { code, signal }; this.wake(); });
    return this;
  }

  wake() {
    this.waiters = this.waiters.filter((w) => {
      const hit = w.what();
      if (!hit && !this.exit) return true;
      clearTimeout(w.timer);
      if (hit) w.resolve(hit);
      else w.reject(new Error(`the authors' bridge exited (${JSON.stringify(this.exit)}) while waiting for ${w.label}:\n${this.tail()}`));
      return false;
    });
  }

  tail() {
    return `events: ${JSON.stringify(this.events.slice(-8))}\nstderr: ${this.stderr.slice(-4000)}`;
  }

  // Resolves with the first event named `name` (and matching `filter`), in its NDJSON output.
  event(name, timeout = 15000, filter = () => true) {
    const what = () => this.events.find((e) => e.event === name && filter(e));
    return new Promise((resolve, reject) => {
      const w = { what, resolve, reject, label: `event ${name}` };
      w.timer = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        reject(new Error(`the authors' bridge: no ${name} event in ${timeout} ms:\n${this.tail()}`));
      }, timeout);
      this.waiters.push(w);
      this.wake();
    });
  }

  // Resolves once its stderr log (--verbose) matches `re`.
  logged(re, timeout = 15000) {
    const what = () => re.test(this.stderr);
    return new Promise((resolve, reject) => {
      const w = { what, resolve, reject, label: `log ${re}` };
      w.timer = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        reject(new Error(`the authors' bridge: nothing logged matching ${re} in ${timeout} ms:\n${this.tail()}`));
      }, timeout);
      this.waiters.push(w);
      this.wake();
    });
  }

  credentials() {
    return JSON.parse(readFileSync(join(this.config, 'credentials.json'), 'utf8'));
  }

  async stop() {
    if (!this.proc || this.exit) return;
    const done = new Promise((r) => this.proc.once('exit', r));
    this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 5000);
    await done;
    clearTimeout(timer);
  }

  async close() {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
