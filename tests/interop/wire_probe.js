// Each call the authors' bridge client makes, made once against a relayd by the authors' own
// compiled modules (sophon-bridge/build/dist: pair.js, sophon.js, crypto.js, unmodified), with
// every HTTP exchange recorded: method, path, status and, for a failure, the body. The full turn
// (interop.test.js) stops at the first call relayd refuses; this lists them all, so the gaps of
// relayd against the authors' wire are visible at once.
//
//   node wire_probe.js            (RELAYD=path/to/relayd; builds the client first)
//
// It prints one line per call and exits 0 when every call succeeded.
import { Buffer } from 'node:buffer';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Relay } from '../browser/lib.js';
import { BUILD, build, verifyVendor } from './sophon_bridge.js';

export async function probe(relay, { log = console.log } = {}) {
  const dist = (name) => import(pathToFileURL(join(BUILD, 'dist', name)).href);
  const { pair } = await dist('pair.js');
  const { SophonClient } = await dist('sophon.js');
  const { SessionKeyStore } = await dist('session-keys.js');
  const crypto = await dist('crypto.js');
  const { setJsonMode } = await dist('events.js');
  setJsonMode(true);

  const calls = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (input, init = {}) => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    const method = (init.method || 'GET').toUpperCase();
    const r = await realFetch(input, init);
    const body = await r.clone().text();
    let ok = r.ok;
    try {
      ok = ok && JSON.parse(body).ok !== false;
    } catch {
      ok = false;
    }
    calls.push({ method, path: url.pathname + url.search, status: r.status, ok, body: ok ? '' : body.slice(0, 400),
      sent: init.body ? String(init.body).slice(0, 300) : '' });
    return r;
  };

  const user = relay.token('alice');
  let botToken = null;
  let installationId = null;
  try {
    // The authors' pairing; the phone's claim is made by the API as soon as the code exists.
    const codeSeen = new Promise((resolve) => {
      const orig = globalThis.fetch;
      globalThis.fetch = async (input, init) => {
        const r = await orig(input, init);
        const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
        if (url.pathname === '/v1/pairing/start' && r.ok) {
          const j = await r.clone().json();
          if (j.ok) resolve(j.result.code);
        }
        return r;
      };
    });
    void codeSeen.then((code) => relay.api('POST', '/v1/me/pairing/claim', user, { code }).catch((e) => log(`claim: ${e.message}`)));
    const result = await Promise.race([
      pair({ sophonBase: relay.url, connectorTypeId: 'openclaw', hostLabel: 'probe-host', manual: true, print: () => {} }),
      new Promise((_, rej) => setTimeout(() => rej(new Error('pairing did not finish in 20 s')), 20000)),
    ]);
    botToken = result.botToken;
    installationId = result.installationId;
    log(`pairing (authors' variant): ok, installation ${installationId}, sophon_ws_url ${result.sophonWsUrl}`);
  } catch (err) {
    log(`pairing (authors' variant) failed: ${err.message}`);
  }
  if (!botToken) {
    // The spec's pairing instead, so that the later calls can still be probed.
    const start = await (await realFetch(`${relay.url}/v1/pairing/start`, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ connector_type: 'openclaw', host_label: 'probe-host' }) })).json();
    await relay.api('POST', '/v1/me/pairing/claim', user, { code: start.result.code });
    const polled = await (await realFetch(`${relay.url}/v1/pairing/poll`, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ poll_token: start.result.poll_token }) })).json();
    botToken = polled.result.token;
    installationId = polled.result.installation_id;
    log(`(fell back to the spec's pairing for the rest: installation ${installationId})`);
  }

  const store = new SessionKeyStore();
  const sophon = new SophonClient({ baseUrl: relay.url, botToken, sessionKeyStore: store, log: () => {} });
  const kp = crypto.generateKeypair();
  const pubHex = Buffer.from(kp.publicKey).toString('hex');
  const attempt = async (what, fn) => {
    try {
      const r = await fn();
      return r;
    } catch (err) {
      log(`${what}: ${err.message.slice(0, 300)}`);
      return null;
    }
  };
  const dev = await attempt('registerBridgeDevice', () => sophon.registerBridgeDevice({ pubkeyHex: pubHex, label: 'probe-host' }));
  // The bridge-made session of a cron run: no interaction, as handleCronEvent makes it.
  const cron = (await attempt('createSession', () => sophon.createSession({ source: 'cron' })))?.sessionId;
  if (cron) {
    await store.getOrCreate(cron);
    const m = await attempt('cron: startStreamingMessage', () => sophon.startStreamingMessage({ sessionId: cron }));
    if (m?.messageId) await attempt('cron: sendDelta', () => sophon.sendDelta({ messageId: m.messageId, sessionId: cron, delta: 'cron delta' }));
    await attempt('cron: createTask (no interaction_id)', () => sophon.createTask({ sessionId: cron, taskId: 'call_cron', kind: 'exec', statusLabel: 'exec x', args: { cmd: 'x' } }));
    await attempt('cron: requestApproval (no interaction_id)', () => sophon.requestApproval({ sessionId: cron, approvalId: 'appr_cron',
      action: 'shell.exec', title: 'cron probe', message: 'cron probe?', command: 'true', host: 'gateway' }));
  }
  // A user's turn: the phone makes an encrypted session, the user sends (the interaction the
  // bridge's calls then name, as handleSessionMessage passes u.interaction_id).
  let made = await relay.api('POST', '/v1/me/sessions', user, { installation_id: installationId, encrypted: true }).catch((e) => {
    log(`POST /v1/me/sessions {encrypted: true}: ${e.message}`);
    return null;
  });
  if (!made) made = await relay.api('POST', '/v1/me/sessions', user, { installation_id: installationId });
  const sessionId = made.session_id;
  log(`session ${sessionId}, encrypted=${made.session?.encrypted}`);
  const key = await store.getOrCreate(sessionId);
  await attempt('postBridgeSessionRecipients', () => sophon.postBridgeSessionRecipients({ sessionId,
    recipients: [{ deviceId: dev?.deviceId || 'dev_unknown', wrappedSessionKeyB64: Buffer.from(crypto.sealedBoxEncrypt(key, kp.publicKey)).toString('base64') }],
    ...(dev ? { wrappedByDeviceId: dev.deviceId } : {}) }));
  const msgKey = crypto.deriveBlobKey(key, `messages/${sessionId}`);
  const textCt = Buffer.from(crypto.encryptSymmetric(new TextEncoder().encode('probe question'), msgKey)).toString('base64');
  const sent = await relay.api('POST', `/v1/me/sessions/${sessionId}/send`, user, made.session?.encrypted ? { text_ct: textCt } : { text: 'probe question' })
    .catch((e) => { log(`user send: ${e.message}`); return {}; });
  const interactionId = sent.interaction_id;
  await attempt('sendMessage', () => sophon.sendMessage({ sessionId, text: 'probe whole message', interactionId }));
  const started = await attempt('startStreamingMessage', () => sophon.startStreamingMessage({ sessionId, interactionId }));
  if (started?.messageId) {
    await attempt('sendDelta', () => sophon.sendDelta({ messageId: started.messageId, sessionId, delta: 'probe delta' }));
  }
  await attempt('createTask', () => sophon.createTask({ sessionId, interactionId, taskId: 'call_probe', kind: 'read', statusLabel: 'read x', args: { path: '/x' } }));
  await attempt('updateTask', () => sophon.updateTask({ sessionId, interactionId, taskId: 'call_probe', partialResult: 'half' }));
  await attempt('finishTask', () => sophon.finishTask({ sessionId, interactionId, taskId: 'call_probe', name: 'read', status: 'completed', result: 'done' }));
  const idx = crypto.blindIndex(crypto.deriveBlindIndexKey(key), 'agent_files', sessionId, '/tmp/probe.txt');
  const fileKey = crypto.deriveBlobKey(key, `agent_files/${sessionId}/${idx}`);
  const enc = (s) => Buffer.from(crypto.encryptSymmetric(new TextEncoder().encode(s), fileKey)).toString('base64');
  // notifyToolFile swallows its own failure (it only logs it); the recorded exchange shows it.
  await sophon.notifyToolFile({ sessionId, tool: 'read', sizeBytes: 3, pathCt: enc('/tmp/probe.txt'), displayNameCt: enc('probe.txt'), pathBlindIdx: idx });
  await attempt('requestApproval', () => sophon.requestApproval({ sessionId, interactionId, approvalId: 'appr_probe', action: 'shell.exec',
    title: 'probe', message: 'probe?', command: 'true', host: 'gateway' }));
  if (started?.messageId) {
    await attempt('sendEnd', () => sophon.sendEnd({ messageId: started.messageId, sessionId, text: 'probe delta', usage: { input_tokens: 1 } }));
  }
  // What relayd gives back: every ciphertext field sent must be there, as sent.
  const timeline = await relay.api('GET', `/v1/me/sessions/${sessionId}/timeline?limit=50`, user).catch((e) => ({ error: e.message }));
  const text = JSON.stringify(timeline);
  for (const field of ['text_ct', 'status_label_ct', 'args_ct', 'partial_result_ct', 'result_ct', 'details_ct']) {
    log(`readback: ${field} ${text.includes(`"${field}"`) ? 'present' : 'ABSENT'} in GET /v1/me/sessions/:id/timeline`);
  }
  globalThis.fetch = realFetch;
  return calls;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const problems = verifyVendor();
  if (problems.length) {
    console.error(`vendored client differs from the pin:\n${problems.join('\n')}`);
    process.exit(1);
  }
  build();
  const relay = await new Relay().start();
  let calls;
  try {
    calls = await probe(relay);
  } finally {
    await relay.close();
  }
  const lines = calls.map((c) => `${c.ok ? 'ok  ' : 'FAIL'} ${c.method} ${c.path} → ${c.status}${c.ok ? '' : ` ${c.body}`}`);
  console.log(lines.join('\n'));
  if (process.env.PROBE_OUT) writeFileSync(process.env.PROBE_OUT, `${lines.join('\n')}\n`);
  process.exit(calls.every((c) => c.ok) ? 0 : 1);
}
