// The web client's modules import each other without a cycle (house style:
// a module that two screens need moves below both), and none builds markup
// from a string.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const APP = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'web', 'app');
const modules = readdirSync(APP).filter((f) => f.endsWith('.js'));
const source = (f) => readFileSync(join(APP, f), 'utf8');
const imports = (f) => [...source(f).matchAll(/^import\s[^;]*?from\s+'\.\/([\w.-]+)'/gms)].map((m) => m[1]);

test('no import cycle among web/app modules', () => {
  const graph = new Map(modules.map((f) => [f, imports(f)]));
  const cycles = [];
  const state = new Map();
  const path = [];
  const visit = (f) => {
    state.set(f, 'open');
    path.push(f);
    for (const next of graph.get(f) || []) {
      if (state.get(next) === 'open') cycles.push([...path.slice(path.indexOf(next)), next].join(' -> '));
      else if (!state.has(next)) visit(next);
    }
    path.pop();
    state.set(f, 'done');
  };
  for (const f of modules) if (!state.has(f)) visit(f);
  assert.deepEqual(cycles, []);
});

test('no module turns a string into markup', () => {
  for (const f of modules) assert.doesNotMatch(source(f), /\.(innerHTML|outerHTML)\b|insertAdjacentHTML|document\.write/, f);
});

test('the service worker caches every module of the app, so that it starts offline', () => {
  const worker = readFileSync(join(APP, '..', 'sw.js'), 'utf8');
  const missing = modules.filter((f) => !worker.includes(`/app/\${VERSION}/${f}\``));
  assert.deepEqual(missing, []);
});
