// Helpers of the browser tests: a real relayd and a real relay-bridge on
// loopback, each with a temporary folder, and Debian's Chromium driven by
// playwright-core (never a downloaded browser). Every wait is bounded.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const HERE = dirname(fileURLToPath(import.meta.url));
export const ROOT = resolve(HERE, '..', '..');
export const RELAYD = process.env.RELAYD || join(ROOT, 'build', 'relayd');
export const BRIDGE = process.env.RELAY_BRIDGE || join(dirname(RELAYD), 'relay-bridge');
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
export const ARTIFACTS = process.env.BROWSER_ARTIFACTS || join(dirname(RELAYD), 'browser-artifacts');
export const SLOW = process.env.RL_SANITIZED === '1' ? 3 : 1;
export const WAIT = 15000 * SLOW;
export const ECHO_AGENT = `jsonl:python3 ${join(ROOT, 'examples', 'echo_agent.py')}`;

export const PHONE = { width: 360, height: 740 };
export const DESKTOP = { width: 1280, height: 800 };

mkdirSync(ARTIFACTS, { recursive: true });

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Every file under dir, its subfolders' too (relayd's data folder: what a test searches for plaintext).
export function filesUnder(dir) {
  const files = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) files.push(...filesUnder(p));
    else files.push(p);
  }
  return files;
}

export async function waitFor(what, fn, timeout = WAIT) {
  const until = Date.now() + timeout;
  let last;
  while (Date.now() < until) {
    try {
      last = await fn();
      if (last) return last;
    } catch (err) {
      last = err;
    }
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what} (last: ${last && last.message ? last.message : JSON.stringify(last)})`);
}

export function freePort() {
  return new Promise((res, rej) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => res(port));
    });
    server.on('error', rej);
  });
}

function cleanEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('RELAY_')) env[k] = v;
  return { ...env, ...extra };
}

// One relayd on a loopback port with its own data folder; start() again after stop() or kill().
export class Relay {
  constructor(args = [], { data } = {}) {
    this.args = args;
    this.dir = mkdtempSync(join(tmpdir(), 'relay-browser-'));
    this.data = data || join(this.dir, 'data');
    this.log = [];
    this.proc = null;
    this.port = null;
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(port) {
    this.port = port || this.port || (await freePort());
    const argv = ['--listen', `127.0.0.1:${this.port}`, '--data', this.data, '--public-url', this.url, ...this.args];
    this.proc = spawn(RELAYD, argv, { env: cleanEnv(), stdio: ['ignore', 'ignore', 'pipe'] });
    this.proc.stderr.on('data', (chunk) => this.log.push(chunk.toString()));
    const proc = this.proc;
    await waitFor('relayd to answer /healthz', async () => {
      if (proc.exitCode !== null) throw new Error(`relayd exited ${proc.exitCode}: ${this.log.join('').slice(-2000)}`);
      const r = await fetch(`${this.url}/healthz`).catch(() => null);
      return r && r.ok;
    });
    return this;
  }

  async stop() {
    if (!this.proc) return 0;
    const proc = this.proc;
    this.proc = null;
    const done = new Promise((r) => proc.once('exit', (code) => r(code)));
    proc.kill('SIGTERM');
    const code = await Promise.race([done, sleep(10000 * SLOW).then(() => 'hung')]);
    if (code === 'hung') {
      proc.kill('SIGKILL');
      throw new Error('relayd did not stop on SIGTERM');
    }
    return code;
  }

  async kill() {
    if (!this.proc) return;
    const proc = this.proc;
    this.proc = null;
    const done = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGKILL');
    await done;
  }

  // A sign-in link from `relayd login-link`, which works beside the running relay.
  loginLink(user, ttl) {
    const argv = ['login-link', user, '--data', this.data, '--public-url', this.url];
    if (ttl) argv.push('--ttl', ttl);
    const out = spawnSync(RELAYD, argv, { env: cleanEnv(), encoding: 'utf8', timeout: WAIT });
    if (out.status !== 0) throw new Error(`relayd login-link failed: ${out.stderr}`);
    return out.stdout.trim().split('\n').pop();
  }

  token(user) {
    const out = spawnSync(RELAYD, ['token', user, '--data', this.data], { env: cleanEnv(), encoding: 'utf8', timeout: WAIT });
    if (out.status !== 0) throw new Error(`relayd token failed: ${out.stderr}`);
    return out.stdout.trim().split('\n').pop();
  }

  async api(method, path, token, body) {
    const r = await fetch(`${this.url}${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await r.json();
    if (!json.ok) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(json.error)}`);
    return json.result;
  }

  sanitizerReport() {
    const text = this.log.join('');
    const line = text.split('\n').find((l) => /ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:/.test(l));
    return line || null;
  }

  async close() {
    const code = await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
    return code;
  }
}

// relay-bridge with its own config folder: pair (the code goes to the browser), then run the echo agent.
export class Bridge {
  constructor(relay) {
    this.relay = relay;
    this.config = join(relay.dir, `bridge-${Math.random().toString(36).slice(2)}`);
    this.proc = null;
    this.log = [];
  }

  env() {
    return cleanEnv({ RELAY_CONFIG_DIR: this.config });
  }

  // Starts pairing and returns { code, claim_url, done } where done resolves with the paired installation id.
  startPairing(name = 'laptop') {
    const proc = spawn(BRIDGE, ['pair', '--server', this.relay.url, '--name', name, '--json'],
      { env: this.env(), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    proc.stderr.on('data', (c) => { err += c; });
    return new Promise((res, rej) => {
      const timer = setTimeout(() => rej(new Error(`relay-bridge pair printed no code: ${err}`)), WAIT);
      proc.stdout.on('data', (chunk) => {
        out += chunk;
        const first = out.split('\n')[0];
        if (out.includes('\n') && !this.first) {
          clearTimeout(timer);
          this.first = JSON.parse(first);
          const done = new Promise((ok, fail) => {
            proc.on('exit', (code) => {
              if (code !== 0) return fail(new Error(`relay-bridge pair exited ${code}: ${err}`));
              const last = JSON.parse(out.trim().split('\n').pop());
              ok(last.installation_id);
            });
          });
          res({ ...this.first, done, kill: () => proc.kill() });
        }
      });
    });
  }

  run(agent = ECHO_AGENT, extra = []) {
    this.proc = spawn(BRIDGE, ['run', '--agent', agent, ...extra], { env: this.env(), stdio: ['ignore', 'ignore', 'pipe'] });
    this.proc.stderr.on('data', (c) => this.log.push(c.toString()));
    return this;
  }

  async stop() {
    if (!this.proc) return;
    const proc = this.proc;
    this.proc = null;
    const done = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await Promise.race([done, sleep(10000).then(() => proc.kill('SIGKILL'))]);
  }
}

// Chromium as the probe of this machine runs it: headless, no sandbox (root), no background traffic.
export async function launch() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--no-first-run', '--disable-gpu', '--disable-quic'],
  });
}

export async function newPage(browser, relay, viewport = PHONE, options = {}) {
  const context = await browser.newContext({ viewport, baseURL: relay.url, serviceWorkers: 'allow', ...options });
  const page = await context.newPage();
  page.problems = [];
  page.on('pageerror', (err) => page.problems.push(`pageerror: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/Failed to load resource|net::ERR_/.test(msg.text())) page.problems.push(`console: ${msg.text()}`);
  });
  return page;
}

export async function screenshot(page, name) {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: false });
}

// Signs the page in with a fresh sign-in link; resolves on the chats screen.
export async function signIn(page, relay, user = 'alice') {
  const link = relay.loginLink(user);
  await page.goto(link);
  await page.waitForSelector('nav.tabs', { timeout: WAIT });
  await page.waitForFunction(() => !location.pathname.startsWith('/login'), null, { timeout: WAIT });
}

// The usual way a page's device is verified (docs/bridge.md "Devices"): the Verify screen of the bridge's
// device, its emoji shown, the one-time code relay-bridge showed typed, They match; the screen goes back
// to Settings once the relay took the confirmation. When it does not, the error says what the screen
// shows instead (a toast, the no-code confirmation, a screen still loading), not only that it timed out.
export async function verifyWithCode(page, relay, bridgeDevice, code) {
  await page.goto(`${relay.url}/#/verify/${bridgeDevice}`);
  await page.waitForSelector('ol.sas[data-sas]', { timeout: WAIT });
  await page.fill('#enrol-code', code);
  await page.click('button:has-text("They match")');
  try {
    await page.waitForURL(/#\/settings$/, { timeout: WAIT });
  } catch (err) {
    const shown = await page.evaluate(() => ({
      url: location.href,
      main: (document.getElementById('main') || document.body).innerText.slice(0, 600),
      toasts: [...document.querySelectorAll('.toast')].map((t) => t.innerText),
      code: (document.getElementById('enrol-code') || {}).value ?? null,
    })).catch(() => null);
    throw new Error(`the Verify screen did not go back to Settings after They match: ${JSON.stringify(shown)}`, { cause: err });
  }
}

// axe-core in the page: returns the violations of impact serious or critical.
export async function axe(page) {
  const source = readFileSync(join(HERE, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');
  // The page's CSP allows only its own scripts: the test injects axe through the DevTools protocol instead.
  await page.evaluate(source);
  const result = await page.evaluate(async () => window.axe.run(document, { resultTypes: ['violations'] }));
  return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.help}: ${v.nodes.slice(0, 3).map((n) => n.html).join(' | ')}`);
}
