// The markdown renderer's link rule (web/app/markdown.js, safeHref), under
// Node's test runner with no browser: a table of cases, then a fuzz loop that
// checks the rule against WHATWG URL parsing (Node's URL is the same standard
// browsers follow): whatever the rule lets through as a relay-internal link
// must resolve to the relay's own origin.
//
// The app's modules are ES modules without a package.json of their own, so
// they are copied beside one that says so, and imported from there.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, copyFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const app = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'web', 'app');

async function loadMarkdown() {
  const dir = mkdtempSync(join(tmpdir(), 'relay-markdown-'));
  for (const name of ['markdown.js', 'ui.js']) copyFileSync(join(app, name), join(dir, name));
  writeFileSync(join(dir, 'package.json'), '{"type": "module"}');
  try {
    return await import(pathToFileURL(join(dir, 'markdown.js')).href);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const { safeHref } = await loadMarkdown();
const RELAY = 'https://relay.example';

const CASES = [
  // internal: a single '/' and a path
  ['/v1/files/att_abc?exp=1&sig=2', '/v1/files/att_abc?exp=1&sig=2'],
  ['/', '/'],
  ['/a//b', '/a//b'],
  ['/a\\b', '/a\\b'],
  ['  /v1/files/x  ', '/v1/files/x'],
  ['/%2F%2Fevil.example', '/%2F%2Fevil.example'],
  // another host, however it is spelt
  ['//evil.example/', null],
  ['/\\evil.example/', null],
  ['\\/evil.example/', null],
  ['\\\\evil.example/', null],
  ['/\t/evil.example', null],
  ['/\n/evil.example', null],
  ['/\r\\evil.example', null],
  ['/\u0000/evil.example', null],
  ['/\u001f', null],
  ['/\u007f', null],
  // external links go through the external rule
  ['https://example.org/x', 'https://example.org/x'],
  ['HTTP://example.org', 'HTTP://example.org'],
  ['mailto:someone@example.org', 'mailto:someone@example.org'],
  ['javascript:alert(1)', null],
  ['JaVaScRiPt:alert(1)', null],
  ['data:text/html,<script>alert(1)</script>', null],
  ['vbscript:x', null],
  ['file:///etc/passwd', null],
  ['relative/path', null],
  ['./x', null],
  ['#x', null],
  ['?x', null],
  ['', null],
];

test('the link rule: a table of cases', () => {
  for (const [url, want] of CASES) assert.equal(safeHref(url), want, JSON.stringify(url));
});

// Tiny deterministic generator, so that a failure replays the same way.
function random(seed) {
  let x = seed >>> 0;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 4294967296;
  };
}

const PIECES = ['/', '\\', '//', '/\\', '\\/', '\t', '\n', '\r', ' ', '\u0000', '\u000b', '\u000c', '\u00a0',
  '\u2028', '\u3000', '%2f', '%5c', '%09', 'evil.example', 'a', ':', '@', '.', '..', '#', '?', 'http:', 'https:',
  'mailto:', 'javascript:', 'HTTPS:', '\ufeff', '\u200b', '%00', '\uff0f', '\uff3c'];

test('the link rule: nothing it calls internal leaves the relay (fuzzed)', () => {
  const next = random(27);
  for (let n = 0; n < 50000; n++) {
    let url = '';
    const parts = 1 + Math.floor(next() * 6);
    for (let i = 0; i < parts; i++) url += PIECES[Math.floor(next() * PIECES.length)];
    const href = safeHref(url);
    if (href === null) continue;
    assert.ok(!/[\u0000-\u001f\u007f]/.test(href), JSON.stringify(url));
    if (/^(https?:|mailto:)/i.test(href)) continue;
    let resolved;
    try {
      resolved = new URL(href, RELAY + '/app/');
    } catch {
      continue; // a link the browser cannot resolve goes nowhere
    }
    assert.equal(resolved.origin, RELAY, `${JSON.stringify(url)} -> ${resolved.href}`);
  }
});
