// The phone, round two (issue 28, items 10-14), at 390x844 and 360x740: the
// keyboard's Send key and Enter, markdown tables and code blocks with a Copy
// button, the relay out of reach (the banner, the header, the outbox through
// a reload, delivered once), empty states and the chat list's previews, the
// pair page and the machine card. A real relayd and relay-bridge running
// tests/browser/agent.py. The tests run in order and share one relay, one
// bridge and one account.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Relay, Bridge, launch, newPage, signIn, screenshot, axe, waitFor, sleep, WAIT, ROOT } from './lib.js';

const AGENT = `jsonl:python3 ${join(ROOT, 'tests', 'browser', 'agent.py')}`;
const PHONE_390 = { width: 390, height: 844 };
const PHONE_360 = { width: 360, height: 740 };

let relay;
let browser;
let bridge;
let token;
let installationId;
let sessionId;
let page;
const problems = [];

before(async () => {
  relay = await new Relay(['--sse-heartbeat', '1s']).start();
  browser = await launch();
  token = relay.token('alice');
  bridge = new Bridge(relay);
  const pairing = await bridge.startPairing('laptop');
  await relay.api('POST', '/v1/me/pairing/claim', token, { code: pairing.code });
  installationId = await pairing.done;
  bridge.run(AGENT);
  await waitFor('the agent online with its commands', async () => {
    const inst = (await relay.api('GET', '/v1/me', token)).installations.find((i) => i.id === installationId);
    return inst.health === 'healthy' && (inst.commands || []).length === 1;
  }, 2 * WAIT);
  page = await newPage(browser, relay, PHONE_390);
  await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: relay.url });
  await signIn(page, relay);
});

after(async () => {
  if (bridge) await bridge.stop();
  if (browser) await browser.close();
  const code = relay ? await relay.close() : 0;
  assert.equal(code, 0, 'relayd exits 0 on SIGTERM');
  assert.deepEqual(problems, [], 'no script error in any page');
});

function collect(p) {
  problems.push(...p.problems);
  p.problems.length = 0;
}

const userTexts = async (p) => p.$$eval('.timeline .msg-user .msg-body', (els) => els.map((e) => e.innerText.trim()));
const agentTexts = async (p) => p.$$eval('.timeline .msg-agent.msg-final .msg-body', (els) => els.map((e) => e.innerText.trim()));

// What the relay stored of the user's messages in the chat, oldest first.
async function storedUserTexts() {
  const history = await relay.api('GET', `/v1/me/sessions/${sessionId}/messages?limit=100`, token);
  return history.messages.filter((m) => m.role === 'user').map((m) => m.text).reverse();
}

async function noSidewaysScroll(p) {
  return p.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);
}

test('a new chat says what to type, which agent on which machine answers, and "/" for its commands', async () => {
  const created = await relay.api('POST', '/v1/me/sessions', token, { installation_id: installationId, title: 'Phone round two' });
  sessionId = created.session_id;
  // The page knows of the chat (session_created on its stream) before it opens it.
  await page.locator('main .session-item', { hasText: 'Phone round two' }).waitFor();
  await page.goto(`${relay.url}/#/s/${sessionId}`);
  const empty = page.locator('.chat-empty');
  await empty.waitFor();
  const text = await empty.innerText();
  assert.match(text, /Start the conversation/);
  assert.match(text, /browser-test on laptop will answer here/);
  assert.match(text, /Type \/ to see its command/);
  await screenshot(page, 'phone390-light-empty-chat');
  assert.deepEqual(await axe(page), []);
  collect(page);
});

test('Enter sends and Shift+Enter breaks the line; "/" then Enter picks a command; a phone\'s Send key sends', async () => {
  const input = page.locator('.composer-input');
  assert.equal(await input.getAttribute('enterkeyhint'), 'send');
  await input.click();
  await input.type('first line');
  await input.press('Shift+Enter');
  await input.type('second line');
  assert.equal(await input.inputValue(), 'first line\nsecond line');
  await input.press('Enter');
  await waitFor('the two-line message', async () => (await userTexts(page)).includes('first line\nsecond line'));
  assert.equal(await input.inputValue(), '');
  // The empty state is gone once the chat has a message.
  await page.locator('.chat-empty').waitFor({ state: 'hidden' });

  // With the command list open, Enter takes the command; the next Enter sends it.
  await input.type('/ta');
  await page.locator('#composer-commands [role="option"]').first().waitFor();
  await input.press('Enter');
  assert.equal(await input.inputValue(), '/table ');
  await input.press('Enter');
  await waitFor('the table reply', () => page.$('.msg-agent.msg-final table'));

  // A phone: coarse pointer, touch. Its keyboard's Send key is Enter...
  const phone = await newPage(browser, relay, PHONE_390, { isMobile: true, hasTouch: true });
  await signIn(phone, relay);
  await phone.goto(`${relay.url}/#/s/${sessionId}`);
  const box = phone.locator('.composer-input');
  await box.waitFor();
  assert.equal(await phone.evaluate(() => matchMedia('(pointer: coarse)').matches), true);
  await box.tap();
  await box.type('from the send key');
  await box.press('Enter');
  await waitFor('the message from the phone', async () => (await userTexts(phone)).includes('from the send key'));
  // ...or, from a keyboard that sends no usable keydown (Android's IME), a line break asked through beforeinput.
  await box.fill('from the ime');
  const prevented = await box.evaluate((el) => !el.dispatchEvent(new InputEvent('beforeinput', { inputType: 'insertLineBreak', bubbles: true, cancelable: true })));
  assert.equal(prevented, true, 'the line break becomes a send');
  await waitFor('the message from the IME', async () => (await userTexts(phone)).includes('from the ime'));
  collect(phone);
  await phone.context().close();
  collect(page);
});

test('a table renders as a table that scrolls in its box, and a code block has its language and a Copy button', async () => {
  await page.setViewportSize(PHONE_360);
  const bubble = page.locator('.msg-agent.msg-final', { has: page.locator('table') }).last();
  const table = bubble.locator('table');
  assert.deepEqual(await table.locator('th').allInnerTexts(), ['Name', 'Size', 'Kind', 'Note']);
  assert.equal(await table.locator('tbody tr').count(), 3);
  assert.equal(await table.locator('th').nth(1).getAttribute('class'), 'align-right');
  assert.equal(await table.locator('th').nth(2).getAttribute('class'), 'align-center');
  // Inline markdown in cells; an escaped pipe stays in its cell.
  assert.equal(await table.locator('tbody tr').first().locator('td strong').innerText(), 'report.md');
  assert.equal(await table.locator('tbody tr').first().locator('td code').innerText(), 'summary');
  assert.equal(await table.locator('tbody tr').nth(1).locator('a').getAttribute('href'), 'https://example.org/data');
  assert.equal(await table.locator('tbody tr').nth(2).locator('td').first().innerText(), 'a | b');
  // Wider than a phone: it scrolls inside its box, the page does not.
  const tableBox = bubble.locator('.table-box');
  assert.ok(await tableBox.evaluate((e) => e.scrollWidth > e.clientWidth), 'the table is wider than its box');
  assert.ok(await tableBox.evaluate((e) => getComputedStyle(e).overflowX === 'auto'));
  assert.ok(await noSidewaysScroll(page), 'no sideways scroll of the page at 360 px');

  const code = bubble.locator('.code-box');
  assert.equal(await code.locator('.code-lang').innerText(), 'bash');
  assert.match(await code.locator('pre code').innerText(), /^ls -la \/srv\/reports/);
  const copy = code.locator('button.code-copy .code-copy-state');
  assert.equal(await copy.innerText(), 'Copy');
  await copy.click();
  await waitFor('"Copied"', async () => (await copy.innerText()) === 'Copied');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()),
    'ls -la /srv/reports && wc -l /srv/reports/*.md | sort -n | tail -n 20');
  await tableBox.evaluate((e) => { e.scrollLeft = 0; });
  await screenshot(page, 'phone360-light-table');
  assert.deepEqual(await axe(page), []);
  await page.setViewportSize(PHONE_390);
  collect(page);
});

test('relayd stopped: the banner says the relay cannot be reached, the header stops saying Online, a message waits in the outbox through a reload and is delivered once', async () => {
  await page.goto(`${relay.url}/#/s/${sessionId}`);
  await page.locator('.chat-subtitle .pill-healthy').waitFor();
  assert.equal(await page.locator('.chat-subtitle .pill-healthy').innerText(), 'Online');
  const before = await storedUserTexts();
  // The service worker holds the app shell, so that a reload works with relayd away.
  await page.evaluate(async () => { await navigator.serviceWorker.ready; });
  assert.equal(await relay.stop(), 0);
  const stopped = Date.now();
  try {
    await page.waitForSelector('#banner:not([hidden])', { timeout: WAIT });
    await waitFor('the banner about the relay', async () => /relay cannot be reached/i.test(await page.innerText('#banner')));
    assert.equal(await page.evaluate(() => navigator.onLine), true);
    assert.doesNotMatch(await page.innerText('#banner'), /you are offline/i);
    // The relay's last word on the machine is no news now.
    await waitFor('the header without "Online"', async () => !/Online/.test(await page.innerText('.chat-subtitle')));
    assert.match(await page.innerText('.chat-subtitle'), /Status unknown/);

    await page.fill('.composer-input', 'written while away');
    await page.press('.composer-input', 'Enter');
    const queued = page.locator('.outbox .msg-outbox');
    await queued.waitFor();
    assert.equal(await page.inputValue('.composer-input'), '', 'the text left the box for the outbox');
    await waitFor('pending', async () => /Waiting for the relay/.test(await queued.innerText()));
    assert.match(await queued.innerText(), /written while away/);
    await screenshot(page, 'phone390-light-outbox');

    // A reload while the relay is still away: the outbox is on this device.
    await page.reload();
    await page.waitForSelector('main h1', { timeout: WAIT });
    const stored = await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('relay.outbox.'))
      .map((k) => JSON.parse(localStorage.getItem(k))).flat());
    assert.deepEqual(stored.map((e) => e.text), ['written while away']);
    await waitFor('the waiting message shown after the reload', async () => /written while away/.test(await page.innerText('main')))
      .catch(async (err) => {
        await screenshot(page, 'debug-reload');
        throw new Error(`${err.message}: ${await page.innerText('body')}`);
      });
    await screenshot(page, 'phone390-light-outbox-reloaded');
    // Away for 10 s at least, as the issue tried it.
    await sleep(Math.max(0, 10000 - (Date.now() - stopped)));
  } finally {
    await relay.start();
  }
  await page.waitForSelector('#banner', { state: 'hidden', timeout: 3 * WAIT });
  await waitFor('the outbox empty', async () => (await page.locator('.outbox .msg-outbox').count()) === 0 &&
    (await userTexts(page)).includes('written while away'), 3 * WAIT);
  await waitFor('the agent online again', async () =>
    (await relay.api('GET', '/v1/me', token)).installations[0].health === 'healthy', 2 * WAIT);
  await waitFor('the header online again', async () => /Online/.test(await page.innerText('.chat-subtitle')), 2 * WAIT);
  // Sent once: not twice after the reload, and not again later.
  await sleep(6000);
  assert.deepEqual(await storedUserTexts(), [...before, 'written while away']);
  assert.equal((await userTexts(page)).filter((t) => t === 'written while away').length, 1);
  assert.equal(await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('relay.outbox.')).length), 0);
  collect(page);
});

test('a message the relay refuses fails with the reason and Retry; Retry sends it once', async () => {
  let refusals = 0;
  await page.route('**/v1/me/sessions/*/send', async (route) => {
    refusals += 1;
    await route.fulfill({ status: 422, contentType: 'application/json',
      body: JSON.stringify({ ok: false, error: { code: 'validation_failed', message: 'Refused by the test' } }) });
  });
  const before = await storedUserTexts();
  await page.fill('.composer-input', 'refused once');
  await page.press('.composer-input', 'Enter');
  const failed = page.locator('.outbox .outbox-failed');
  await failed.waitFor();
  assert.match(await failed.innerText(), /Not sent: Refused by the test/);
  assert.equal(refusals, 1);
  await screenshot(page, 'phone390-light-outbox-failed');
  assert.deepEqual(await axe(page), []);
  await page.unroute('**/v1/me/sessions/*/send');
  await failed.locator('button', { hasText: 'Retry' }).click();
  await waitFor('the retried message', async () => (await page.locator('.outbox .msg-outbox').count()) === 0 &&
    (await userTexts(page)).includes('refused once'));
  await sleep(1000);
  assert.deepEqual(await storedUserTexts(), [...before, 'refused once']);
  collect(page);
});

test('a rotation (phone layout to wide and back) keeps the composer\'s text and its attachments', async () => {
  await page.fill('.composer-input', 'half written');
  await page.setInputFiles('#attach-file', { name: 'kept.txt', mimeType: 'text/plain', buffer: Buffer.from('kept\n') });
  await page.waitForSelector('.chip-ready');
  await page.setViewportSize({ width: 1280, height: 800 });
  await sleep(300);
  await page.setViewportSize(PHONE_390);
  await sleep(300);
  assert.equal(await page.inputValue('.composer-input'), 'half written');
  assert.deepEqual(await page.$$eval('.chip', (els) => els.map((e) => e.textContent)), ['kept.txt×']);
  await page.click('.chip-remove');
  await page.fill('.composer-input', '');
  collect(page);
});

test('the chat list shows each chat\'s latest message, and when its agent is working', async () => {
  await page.goto(`${relay.url}/#/`);
  const item = page.locator('main .session-item', { hasText: 'Phone round two' });
  await waitFor('the preview', async () => /refused once/.test(await item.innerText()));
  assert.match(await item.locator('.session-preview').innerText(), /^refused once|^You: refused once/);

  // A reply on its way.
  await relay.api('POST', `/v1/me/sessions/${sessionId}/send`, token, { text: 'slow 40' });
  await waitFor('the sign of a reply', async () => /Agent is replying/.test(await item.innerText()));
  await screenshot(page, 'phone390-light-chats-working');
  await waitFor('the reply as the preview', async () => !/Agent is replying/.test(await item.innerText()) &&
    /^word1 word2/.test(await item.locator('.session-preview').innerText()), 2 * WAIT);
  // One line, cut short: the list does not grow with a long reply.
  assert.ok((await item.locator('.session-preview').innerText()).length <= 120);

  // A request waiting for approval.
  await relay.api('POST', `/v1/me/sessions/${sessionId}/send`, token, { text: 'run echo waiting' });
  await waitFor('the approval sign', async () => /Waiting for your approval/.test(await item.innerText()));
  const snapshot = await relay.api('GET', '/v1/me/snapshot', token);
  await relay.api('POST', `/v1/me/approvals/${snapshot.pending_approvals[0].approval_id}`, token, { decision: 'deny' });
  await waitFor('the decision as the preview', async () => /decision: deny/.test(await item.innerText()));

  // A chat the app has not opened on this page: its preview is read from the relay.
  const other = await relay.api('POST', '/v1/me/sessions', token, { installation_id: installationId, title: 'Read from the relay' });
  await relay.api('POST', `/v1/me/sessions/${other.session_id}/send`, token, { text: 'hello there' });
  const fresh = await newPage(browser, relay, PHONE_390);
  await signIn(fresh, relay);
  await fresh.goto(`${relay.url}/#/`);
  await waitFor('the preview of an unopened chat', async () =>
    /hello there/.test(await fresh.locator('main .session-item', { hasText: 'Read from the relay' }).innerText()));
  assert.deepEqual(await axe(fresh), []);
  collect(fresh);
  await fresh.context().close();
  collect(page);
});

test('the pair page at 390 px: the command wraps in its box and copies; a machine card names the machine once', async () => {
  await page.goto(`${relay.url}/#/pair`);
  const box = page.locator('.code-box');
  await box.waitFor();
  assert.ok(await noSidewaysScroll(page), 'no sideways scroll of the page');
  const pre = box.locator('pre');
  assert.ok(await pre.evaluate((e) => e.scrollWidth <= e.clientWidth), 'the command is not clipped');
  const right = await page.evaluate(() => document.querySelector('.code-box').getBoundingClientRect().right);
  assert.ok(right <= 390, `the box ends inside the screen (${right})`);
  await box.locator('button.code-copy').click();
  await waitFor('"Copied"', async () => (await box.locator('.code-copy-state').innerText()) === 'Copied');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), `relay-bridge pair --server ${relay.url}`);
  await screenshot(page, 'phone390-light-pair');

  await page.goto(`${relay.url}/#/machines`);
  const card = page.locator('.installation').first();
  await card.locator('.pill-healthy').waitFor();
  assert.equal(await card.locator('.installation-name').innerText(), 'laptop');
  assert.equal((await card.innerText()).split('laptop').length - 1, 1, await card.innerText());
  assert.match(await card.locator('.installation-sub').first().innerText(), /^relay-bridge|jsonl|· paired/);
  // A name given here: then the host's own name is worth showing, once.
  await relay.api('PATCH', `/v1/me/installations/${installationId}`, token, { custom_display_name: 'Work laptop' });
  await waitFor('the new name', async () => (await card.locator('.installation-name').innerText()) === 'Work laptop');
  assert.match(await card.locator('.installation-sub').first().innerText(), /^laptop · /);
  await relay.api('PATCH', `/v1/me/installations/${installationId}`, token, { custom_display_name: null });
  await screenshot(page, 'phone390-light-machines');
  collect(page);
});

test('screenshots at 390x844 and 360x740, light and dark, without sideways scroll', async () => {
  for (const [size, viewport] of [['phone390', PHONE_390], ['phone360', PHONE_360]]) {
    for (const scheme of ['light', 'dark']) {
      const p = await newPage(browser, relay, viewport, { colorScheme: scheme });
      await signIn(p, relay);
      for (const [name, hash] of [['chats', '#/'], ['chat', `#/s/${sessionId}`], ['pair', '#/pair'], ['machines', '#/machines']]) {
        await p.goto(`${relay.url}/${hash}`);
        await p.waitForSelector('main h1, main .chat-title');
        await sleep(300);
        if (name === 'chat') {
          // The table and the code block in view.
          await p.locator('.msg-agent table').first().scrollIntoViewIfNeeded();
        }
        await screenshot(p, `${size}-${scheme}-round2-${name}`);
        assert.ok(await noSidewaysScroll(p), `${size} ${scheme} ${name}: no sideways scroll`);
        assert.deepEqual((await axe(p)).map((v) => `${size} ${scheme} ${name}: ${v}`), []);
      }
      collect(p);
      await p.context().close();
    }
  }
});
