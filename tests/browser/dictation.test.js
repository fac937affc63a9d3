// Dictation in the composer (issue 40, item 4; docs/web.md "Dictation"): a real
// relayd and relay-bridge with the echo agent; the browser's speech recogniser is
// a scripted stand-in the test installs before the app loads (addInitScript),
// which the test makes "hear" interim and final results and errors. The words
// show in the composer as they come, nothing is sent until Send, Send stops the
// recogniser and later words do not refill the composer, a tap stops it, errors
// are said, and where the browser has no speech recognition there is no button.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Relay, Bridge, launch, newPage, signIn, screenshot, axe, waitFor, sleep, PHONE } from './lib.js';

let relay;
let browser;
let bridge;
let token;
let sessionId;
const problems = [];

// The stand-in: a SpeechRecognition whose results the test scripts through window.__say and window.__fail.
function fakeRecogniser() {
  class FakeRecognition {
    constructor() {
      this.lang = '';
      this.interimResults = false;
      this.continuous = false;
      this.onresult = null;
      this.onerror = null;
      this.onend = null;
      this.calls = [];
      window.__recognisers.push(this);
    }

    start() { this.calls.push('start'); }

    // A stopped recogniser still gives its last words, then ends (window.__end).
    stop() { this.calls.push('stop'); }

    abort() {
      this.calls.push('abort');
      setTimeout(() => this.onend && this.onend({ target: this }), 0);
    }
  }
  window.__recognisers = [];
  // results: [[transcript, isFinal], ...], every result of the session so far, the changed ones from `from`.
  window.__say = (results, from = 0) => {
    const rec = window.__recognisers[window.__recognisers.length - 1];
    const list = results.map(([transcript, isFinal]) => Object.assign([{ transcript, confidence: 0.9 }], { isFinal }));
    if (rec.onresult) rec.onresult({ target: rec, resultIndex: from, results: list });
  };
  window.__end = () => {
    const rec = window.__recognisers[window.__recognisers.length - 1];
    if (rec.onend) rec.onend({ target: rec });
  };
  window.__fail = (error) => {
    const rec = window.__recognisers[window.__recognisers.length - 1];
    if (rec.onerror) rec.onerror({ target: rec, error });
    if (rec.onend) rec.onend({ target: rec });
  };
  window.SpeechRecognition = FakeRecognition;
  window.webkitSpeechRecognition = FakeRecognition;
}

function noRecogniser() {
  delete window.SpeechRecognition;
  delete window.webkitSpeechRecognition;
}

function collect(p) {
  problems.push(...p.problems);
  p.problems.length = 0;
}

async function openChat(scheme, script) {
  const page = await newPage(browser, relay, PHONE, { colorScheme: scheme });
  await page.addInitScript(script);
  await signIn(page, relay);
  await page.goto(`${relay.url}/#/s/${encodeURIComponent(sessionId)}`);
  await page.waitForSelector('.composer-input');
  return page;
}

const sent = async () => (await relay.api('GET', `/v1/me/sessions/${sessionId}/messages`, token)).messages.filter((m) => m.role === 'user');
const composer = (page) => page.inputValue('.composer-input');

before(async () => {
  relay = await new Relay(['--sse-heartbeat', '1s']).start();
  browser = await launch();
  token = relay.token('alice');
  bridge = new Bridge(relay);
  const pairing = await bridge.startPairing('laptop');
  await relay.api('POST', '/v1/me/pairing/claim', token, { code: pairing.code });
  const installationId = await pairing.done;
  bridge.run();
  sessionId = (await relay.api('POST', '/v1/me/sessions', token, { installation_id: installationId, title: 'Dictated' })).session_id;
});

after(async () => {
  if (bridge) await bridge.stop();
  if (browser) await browser.close();
  const code = relay ? await relay.close() : 0;
  assert.equal(code, 0, 'relayd exits 0 on SIGTERM');
  assert.equal(relay.sanitizerReport(), null);
  assert.deepEqual(problems, [], 'no script error in any page');
});

test('the words show in the composer as they are recognised; nothing is sent until Send, which stops listening', async () => {
  const page = await openChat('light', fakeRecogniser);
  const mic = page.locator('.composer-row button.dictate');
  assert.equal(await mic.getAttribute('aria-label'), 'Dictate');
  assert.equal(await mic.getAttribute('aria-pressed'), 'false');
  await page.fill('.composer-input', 'Please');
  await mic.click();
  const rec = await page.evaluate(() => {
    const r = window.__recognisers[0];
    return { count: window.__recognisers.length, lang: r.lang, interim: r.interimResults, continuous: r.continuous, calls: r.calls };
  });
  assert.deepEqual({ ...rec, lang: !!rec.lang }, { count: 1, lang: true, interim: true, continuous: true, calls: ['start'] });
  assert.equal(await mic.getAttribute('aria-pressed'), 'true');
  assert.equal(await mic.getAttribute('aria-label'), 'Stop dictation');

  // An interim guess, then the guess refined, then final and a new interim one: the composer follows each.
  await page.evaluate(() => window.__say([['run the', false]]));
  assert.equal(await composer(page), 'Please run the');
  await page.evaluate(() => window.__say([['run the tests', false]]));
  assert.equal(await composer(page), 'Please run the tests');
  await page.evaluate(() => window.__say([['run the tests', true], [' on the laptop', false]]));
  assert.equal(await composer(page), 'Please run the tests on the laptop');
  await screenshot(page, 'phone-light-dictation');
  assert.deepEqual(await axe(page), []);
  await sleep(500);
  assert.deepEqual(await sent(), [], 'nothing reached the relay while dictating');

  await page.click('button[aria-label="Send"]');
  await waitFor('the dictated message sent', async () => (await sent()).some((m) => m.text === 'Please run the tests on the laptop'));
  assert.equal(await composer(page), '');
  assert.deepEqual(await page.evaluate(() => window.__recognisers[0].calls), ['start', 'abort'], 'Send stopped the recogniser');
  assert.equal(await mic.getAttribute('aria-pressed'), 'false');
  // What the recogniser says after Send goes nowhere.
  await page.evaluate(() => window.__say([['run the tests', true], [' on the laptop', true], [' and more', false]]));
  assert.equal(await composer(page), '');
  await page.waitForSelector('.msg-agent.msg-final:has-text("Please run the tests on the laptop")');
  assert.equal((await sent()).length, 1);
  collect(page);
  await page.context().close();
});

test('a tap stops listening and keeps the last words; typing stops it too; errors are said', async () => {
  const page = await openChat('dark', fakeRecogniser);
  const mic = page.locator('.composer-row button.dictate');
  await mic.click();
  await page.evaluate(() => window.__say([['hello', false]]));
  await screenshot(page, 'phone-dark-dictation');
  assert.deepEqual(await axe(page), []);
  await mic.click();
  assert.deepEqual(await page.evaluate(() => window.__recognisers[0].calls), ['start', 'stop']);
  // The last words the recogniser gives after a tap still come.
  await page.evaluate(() => window.__say([['hello world', true]]));
  assert.equal(await composer(page), 'hello world');
  await page.evaluate(() => window.__end());
  assert.equal(await mic.getAttribute('aria-pressed'), 'false');

  // Typing while listening: the typing wins, the recogniser is aborted.
  await mic.click();
  await page.focus('.composer-input');
  await page.keyboard.type('!');
  assert.deepEqual(await page.evaluate(() => window.__recognisers[1].calls), ['start', 'abort']);
  await page.evaluate(() => window.__say([['ignored', true]]));
  assert.equal(await composer(page), 'hello world!');

  await mic.click();
  await page.evaluate(() => window.__fail('not-allowed'));
  await page.waitForSelector('.toast-error:has-text("The microphone is not allowed for this site")');
  assert.equal(await mic.getAttribute('aria-pressed'), 'false');
  await mic.click();
  await page.evaluate(() => window.__fail('no-speech'));
  await page.waitForSelector('.toast-error:has-text("No speech was heard")');
  assert.equal(await composer(page), 'hello world!', 'an error leaves the composer as it was');
  await sleep(300);
  assert.equal((await sent()).length, 1, 'nothing more was sent');
  collect(page);
  await page.context().close();
});

test('where the browser has no speech recognition there is no microphone', async () => {
  const page = await openChat('light', noRecogniser);
  assert.equal(await page.evaluate(() => !!(window.SpeechRecognition || window.webkitSpeechRecognition)), false);
  assert.ok(await page.$('button[aria-label="Attach a file"]'));
  assert.equal(await page.$('.dictate'), null);
  collect(page);
  await page.context().close();
});
