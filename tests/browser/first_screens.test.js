// What a new user meets on a phone (issue 35, item 9's web parts): a real
// relayd and relay-bridge running tests/browser/cards_agent.py named as
// Claude Code's ACP adapter names itself (its npm package).
//
// - the empty chat names the agent as people know it, and does not promise
//   that everything asks first;
// - the "/" list clamps a long description to two lines;
// - the composer keeps its Send button off the screen's edge, and the camera
//   is drawn as a camera (its lens cut out), not a filled blob;
// - an empty typing bubble is not shown while an approval of its turn waits;
// - a machine card's "paired 05:46 PM" never breaks inside the time;
// - the pair page's command never breaks after the hyphen of relay-bridge;
// each screen at 390 and 360 px, light and dark, with no sideways scroll and
// no serious axe finding.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Relay, Bridge, launch, newPage, signIn, screenshot, axe, waitFor, ROOT } from './lib.js';

const AGENT = `jsonl:python3 ${join(ROOT, 'tests', 'browser', 'cards_agent.py')} --name @zed-industries/claude-agent-acp`;
const SIZES = [['390', { width: 390, height: 844 }], ['360', { width: 360, height: 740 }]];
const SCHEMES = ['light', 'dark'];

let relay;
let browser;
let bridge;
let token;
let installationId;
let sessionId;
let page;
const problems = [];

function collect(p) {
  problems.push(...p.problems);
  p.problems.length = 0;
}

// Each size and scheme in turn, on the same page (its keys and state stay), with a screenshot of each.
async function everyLook(name, prepare) {
  for (const [size, viewport] of SIZES) {
    for (const scheme of SCHEMES) {
      await page.setViewportSize(viewport);
      await page.emulateMedia({ colorScheme: scheme });
      if (prepare) await prepare();
      await screenshot(page, `first-${size}-${scheme}-${name}`);
      const wide = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, view: window.innerWidth }));
      assert.ok(wide.page <= wide.view, `${name} at ${size} ${scheme} scrolls sideways (${JSON.stringify(wide)})`);
    }
  }
  assert.deepEqual(await axe(page), [], name);
  await page.setViewportSize(SIZES[0][1]);
  await page.emulateMedia({ colorScheme: 'light' });
}

before(async () => {
  relay = await new Relay(['--sse-heartbeat', '1s']).start();
  browser = await launch();
  token = relay.token('alice');
  bridge = new Bridge(relay);
  const pairing = await bridge.startPairing('build-box');
  await relay.api('POST', '/v1/me/pairing/claim', token, { code: pairing.code });
  installationId = await pairing.done;
  bridge.run(AGENT);
  await waitFor('the agent\'s manifest', async () => {
    const inst = (await relay.api('GET', '/v1/me', token)).installations.find((i) => i.id === installationId);
    return inst && inst.agent && inst.agent.name === '@zed-industries/claude-agent-acp' && (inst.commands || []).length === 3;
  });
  sessionId = (await relay.api('POST', '/v1/me/sessions', token, { installation_id: installationId, title: 'First steps' })).session_id;
  page = await newPage(browser, relay, SIZES[0][1]);
  await signIn(page, relay);
});

after(async () => {
  if (bridge) await bridge.stop();
  if (browser) await browser.close();
  const code = relay ? await relay.close() : 0;
  assert.equal(code, 0, 'relayd exits 0 on SIGTERM');
  assert.equal(relay.sanitizerReport(), null);
  assert.deepEqual(problems, [], 'no script error or CSP report in any page');
});

test('the empty chat names the agent, not its npm package, and says what asks first', async () => {
  await page.goto(`${relay.url}/#/s/${sessionId}`);
  const empty = page.locator('.chat-empty');
  await empty.waitFor();
  const text = await empty.innerText();
  assert.match(text, /Claude Code on build-box will answer here/);
  assert.doesNotMatch(text, /@zed-industries|claude-agent-acp/);
  assert.doesNotMatch(text, /Anything it wants to run/, 'reads do not ask: no promise that everything does');
  assert.match(text, /Before it changes a file or runs a command, it asks you here/);
  assert.match(text, /Reading files usually does not ask/);
  await everyLook('empty-chat');
  collect(page);
});

test('the composer: Send keeps off the edge, the camera has its lens cut out', async () => {
  for (const [, viewport] of SIZES) {
    await page.setViewportSize(viewport);
    const box = await page.locator('button[aria-label="Send"]').boundingBox();
    assert.ok(viewport.width - (box.x + box.width) >= 10, `Send ${viewport.width - (box.x + box.width)} px from the edge at ${viewport.width}`);
    const input = await page.locator('.composer-input').boundingBox();
    assert.ok(input.width >= 150, `room to type at ${viewport.width}: ${input.width}`);
  }
  // The lens is a hole in the body (even-odd), so the icon reads as a camera in both themes.
  assert.equal(await page.locator('button[aria-label="Take a photo"] svg path').getAttribute('fill-rule'), 'evenodd');
  const lensShows = await page.evaluate(() => {
    const path = document.querySelector('button[aria-label="Take a photo"] svg path');
    const point = path.ownerSVGElement.createSVGPoint();
    point.x = 12 + 3.6; // between the outer and the inner lens: cut out
    point.y = 13;
    const hole = !path.isPointInFill(point);
    point.x = 12; // the inner lens: drawn
    return hole && path.isPointInFill(point);
  });
  assert.equal(lensShows, true);
  collect(page);
});

test('the "/" list: a long description takes at most two lines', async () => {
  await page.locator('.composer-input').fill('/');
  await page.locator('#composer-commands').waitFor();
  const lines = async () => page.$$eval('.command-description', (els) => els.map((e) => {
    const height = parseFloat(getComputedStyle(e).lineHeight);
    return Math.round(e.getBoundingClientRect().height / height);
  }));
  await everyLook('commands', async () => {
    assert.ok((await lines()).every((n) => n >= 1 && n <= 2), `description lines: ${await lines()}`);
  });
  // The whole description stays the option's text for screen readers.
  assert.match(await page.locator('.command').first().textContent(), /ordered by how much each finding matters/);
  await page.locator('.composer-input').fill('');
  collect(page);
});

test('while an approval waits, the turn\'s empty typing bubble is not shown; the reply is, once answered', async () => {
  await page.locator('.composer-input').fill('ask');
  await page.click('button[aria-label="Send"]');
  await page.waitForSelector('.approval-pending');
  assert.equal(await page.locator('.timeline .msg-agent').count(), 0, 'no empty bubble with its own time above the card');
  assert.equal(await page.innerText('.approval-pending .approval-message'), 'The agent asks to run:');
  await everyLook('approval-waiting', async () => page.locator('.approval-pending').scrollIntoViewIfNeeded());
  await page.click('.approval-pending button[data-choice="once"]');
  await waitFor('the reply after the answer', async () => (await page.innerText('.timeline')).includes('Told: allow-once.'));
  collect(page);
});

test('a machine card: "paired" and its time never break inside the time', async () => {
  await page.goto(`${relay.url}/#/machines`);
  const sub = page.locator('.installation-sub', { hasText: 'paired' });
  await sub.waitFor();
  const time = /paired (.+)$/.exec(await sub.textContent())[1];
  // The agent as the empty chat names it, not its package (which broke at its hyphens on a phone).
  assert.equal(await page.locator('.installation-sub', { hasText: 'Agent:' }).textContent(), 'Agent: Claude Code 1.0');
  assert.doesNotMatch(time, / /, `an ordinary space inside "${time}"`);
  await everyLook('machines', async () => {
    // The time is one piece on screen: the line holding it ends with it whole.
    const broken = await sub.evaluate((el, when) => {
      const text = el.firstChild;
      const at = text.textContent.lastIndexOf(when);
      const range = document.createRange();
      range.setStart(text, at);
      range.setEnd(text, text.textContent.length);
      const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
      return tops.size > 1;
    }, time);
    assert.equal(broken, false, 'the paired time wraps');
  });
  collect(page);
});

test('the pair page: relay-bridge is never broken at its hyphen', async () => {
  await page.goto(`${relay.url}/#/pair`);
  const word = page.locator('.code-box .nobreak', { hasText: /^relay-bridge$/ });
  await word.waitFor();
  await everyLook('pair', async () => {
    assert.equal(await word.evaluate((e) => e.getClientRects().length), 1, 'relay-bridge on one line');
  });
  collect(page);
});
