// A scripted stand-in for an OpenClaw gateway, on loopback, speaking the WebSocket protocol the
// authors' bridge client speaks to it (vendor/src/openclaw.ts): the server opens with a
// `connect.challenge` event; the client answers with a `connect` request carrying the operator
// token; requests are `{type: "req", id, method, params}` answered `{type: "res", id, ok,
// payload | error}`; a run streams as `agent` events (streams `assistant`, `tool`, `approval`,
// `lifecycle`) and a closing `chat` event with state `final`.
//
// OpenClaw itself cannot run in this suite (README.md says why), so this plays one turn, the
// same every time: a reply streamed in several deltas, one tool call (start, update, result),
// one approval request, and after the decision arrives by `exec.approval.resolve` the rest of
// the reply and the end of the run; or, if the bridge sends `chat.abort` while the approval is
// pending, the end of the run as aborted. Everything the bridge sent is recorded for the test.
import { randomBytes, randomUUID } from 'node:crypto';
import { WebSocketServer } from 'ws';

const PROTOCOL = 4;

// What a turn plays. The words are distinctive so that the test can look for each one in
// relayd's files and be sure that no match is an accident.
export function defaultScript(filePath) {
  return {
    before: ['Quokka ', 'marmalade ', 'zeppelin: ', 'reading your notes first.'],
    tool: {
      toolCallId: `call_${randomBytes(6).toString('hex')}`,
      name: 'read',
      args: { path: filePath },
      progress: 'halfway through the tangerine ledger',
      result: 'the tangerine ledger holds 3 lines',
    },
    approval: {
      approvalId: `appr_${randomBytes(6).toString('hex')}`,
      approvalSlug: 'exec-lighthouse',
      title: 'Run lighthouse-polish',
      command: 'lighthouse-polish --verbose',
      host: 'gateway',
      message: 'May I run lighthouse-polish on the harpsichord folder?',
    },
    after: { approved: ' Done: the harpsichord sparkles.', denied: ' Understood, nothing was run.' },
  };
}

export class OpenClawStandIn {
  constructor({ token = randomBytes(16).toString('hex'), script, log = () => {} } = {}) {
    this.token = token;
    this.script = script;    // one turn's script, or one per turn
    this.log = log;
    this.server = null;
    this.port = null;
    this.sockets = new Set();
    this.seq = 0;
    this.connects = [];      // the `connect` params each handshake carried
    this.chats = [];         // the `chat.send` params, in order
    this.decisions = [];     // the `exec.approval.resolve` params
    this.patches = [];       // `sessions.patch` params
    this.aborts = [];        // `chat.abort` params
    this.unknown = [];       // requests this stand-in does not implement
    this.runs = new Map();   // runId → { sessionKey, waiting: resolve of the approval }
    this.finished = [];      // runIds that ended
    this.waiters = [];
  }

  get url() {
    return `ws://127.0.0.1:${this.port}`;
  }

  start() {
    return new Promise((resolve, reject) => {
      this.server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
      this.server.once('error', reject);
      this.server.once('listening', () => {
        this.port = this.server.address().port;
        resolve(this);
      });
      this.server.on('connection', (ws) => this.accept(ws));
    });
  }

  async close() {
    for (const ws of this.sockets) ws.terminate();
    await new Promise((r) => (this.server ? this.server.close(() => r()) : r()));
  }

  // Resolves once `what()` is true; checked after every frame the stand-in receives.
  until(what, timeout = 15000) {
    if (what()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('stand-in gateway: timed out waiting')), timeout);
      this.waiters.push({ what, resolve, timer });
    });
  }

  wake() {
    this.waiters = this.waiters.filter((w) => {
      if (!w.what()) return true;
      clearTimeout(w.timer);
      w.resolve();
      return false;
    });
  }

  accept(ws) {
    this.sockets.add(ws);
    ws.authed = false;
    ws.on('close', () => this.sockets.delete(ws));
    ws.send(JSON.stringify({ type: 'event', event: 'connect.challenge',
      payload: { nonce: randomUUID(), ts: Date.now() } }));
    ws.on('message', (raw) => {
      let frame;
      try {
        frame = JSON.parse(raw.toString('utf8'));
      } catch {
        ws.close(1008, 'not json');
        return;
      }
      this.handle(ws, frame);
      this.wake();
    });
  }

  reply(ws, id, payload) {
    ws.send(JSON.stringify({ type: 'res', id, ok: true, payload }));
  }

  fail(ws, id, code, message, details) {
    ws.send(JSON.stringify({ type: 'res', id, ok: false, error: { code, message, ...(details ? { details } : {}) } }));
  }

  event(ws, event, payload) {
    this.seq += 1;
    ws.send(JSON.stringify({ type: 'event', event, payload, seq: this.seq }));
  }

  handle(ws, frame) {
    if (frame.type !== 'req' || typeof frame.id !== 'string' || typeof frame.method !== 'string') return;
    const { id, method } = frame;
    const params = frame.params || {};
    if (!ws.authed) {
      // The first request must be the handshake, with the operator token and a protocol range
      // that includes ours.
      if (method !== 'connect') return this.fail(ws, id, 'INVALID_REQUEST', 'connect first');
      this.connects.push(params);
      if (!(params.minProtocol <= PROTOCOL && PROTOCOL <= params.maxProtocol)) {
        return this.fail(ws, id, 'INVALID_REQUEST', 'protocol mismatch', { expectedProtocol: PROTOCOL });
      }
      if (!params.auth || params.auth.token !== this.token) {
        this.fail(ws, id, 'UNAUTHORIZED', 'gateway token mismatch');
        ws.close(1008, 'unauthorized');
        return;
      }
      ws.authed = true;
      return this.reply(ws, id, { type: 'hello-ok', protocol: PROTOCOL,
        server: { version: 'stand-in', connId: randomUUID() },
        features: { methods: ['chat.send', 'chat.abort', 'exec.approval.resolve', 'sessions.patch', 'models.list'] },
        auth: { role: 'operator', scopes: params.scopes || [] },
        policy: { tickIntervalMs: 30000 } });
    }
    switch (method) {
      case 'sessions.patch':
        this.patches.push(params);
        return this.reply(ws, id, { ok: true, key: params.key });
      case 'models.list':
        return this.reply(ws, id, { models: [{ id: 'standin-1', name: 'Stand-in 1', provider: 'standin' }] });
      case 'chat.send': {
        this.chats.push(params);
        const runId = randomUUID();
        this.runs.set(runId, { sessionKey: params.sessionKey, waiting: null, ended: false, abort: () => {} });
        this.reply(ws, id, { runId, status: 'started' });
        // The bridge binds its stream handlers when the ack arrives; play after it.
        setTimeout(() => this.play(ws, runId).catch((err) => this.log(`stand-in: ${err.message}`)), 20);
        return;
      }
      case 'exec.approval.resolve':
      case 'plugin.approval.resolve': {
        this.decisions.push({ method, ...params });
        const run = [...this.runs.values()].find((r) => r.approvalId === params.id && r.waiting);
        if (!run) return this.fail(ws, id, 'INVALID_REQUEST', 'unknown or already resolved approval id');
        this.reply(ws, id, { ok: true });
        const go = run.waiting;
        run.waiting = null;
        go(params.decision);
        return;
      }
      case 'chat.abort': {
        // Every live run of the session (the bridge names no runId: "stop this chat").
        this.aborts.push(params);
        const live = [...this.runs.entries()].filter(([k, r]) => r.sessionKey === params.sessionKey && !r.ended
          && (!params.runId || params.runId === k));
        this.reply(ws, id, { ok: true, aborted: live.length > 0, runIds: live.map(([k]) => k) });
        for (const [, r] of live) r.abort();
        return;
      }
      default:
        this.unknown.push({ method, params });
        return this.fail(ws, id, 'INVALID_REQUEST', `unknown method ${method}`);
    }
  }

  async play(ws, runId) {
    // One script per turn, in order; the last one again for any turn after.
    const turn = this.chats.length - 1;
    const s = Array.isArray(this.script) ? this.script[Math.min(turn, this.script.length - 1)] : this.script;
    const run = this.runs.get(runId);
    const agent = (stream, data) => this.event(ws, 'agent', { runId, sessionKey: run.sessionKey, stream, ts: Date.now(), data });
    const pause = (ms) => new Promise((r) => setTimeout(r, ms));
    let text = '';
    agent('lifecycle', { phase: 'start' });
    for (const delta of s.before) {
      text += delta;
      agent('assistant', { text, delta });
      await pause(60);
    }
    const t = s.tool;
    agent('tool', { phase: 'start', name: t.name, toolCallId: t.toolCallId, args: t.args });
    await pause(60);
    agent('tool', { phase: 'update', name: t.name, toolCallId: t.toolCallId, partialResult: t.progress });
    await pause(60);
    agent('tool', { phase: 'result', name: t.name, toolCallId: t.toolCallId, result: t.result, isError: false });
    await pause(60);
    const a = s.approval;
    run.approvalId = a.approvalId;
    const decided = new Promise((resolve) => {
      run.waiting = resolve;
      run.abort = () => {
        run.waiting = null;
        resolve('aborted');
      };
    });
    agent('approval', { phase: 'requested', kind: 'exec', status: 'pending', title: a.title,
      toolCallId: t.toolCallId, approvalId: a.approvalId, approvalSlug: a.approvalSlug,
      command: a.command, host: a.host, message: a.message });
    const decision = await decided;
    if (decision === 'aborted') {
      // As the gateway ends a run the user stopped: a `chat` event with state `aborted`.
      this.event(ws, 'chat', { runId, sessionKey: run.sessionKey, state: 'aborted' });
      agent('lifecycle', { phase: 'end', aborted: true });
      run.ended = true;
      this.finished.push({ runId, text, decision });
      this.wake();
      return;
    }
    agent('approval', { phase: 'resolved', kind: 'exec', status: decision === 'deny' ? 'denied' : 'approved',
      title: a.title, approvalId: a.approvalId });
    const tail = decision === 'deny' ? s.after.denied : s.after.approved;
    for (const delta of tail.match(/\S+\s*|\s+/g)) {
      text += delta;
      agent('assistant', { text, delta });
      await pause(40);
    }
    agent('lifecycle', { phase: 'end' });
    this.event(ws, 'chat', { runId, sessionKey: run.sessionKey, state: 'final',
      message: { role: 'assistant', content: [{ type: 'text', text }] } });
    run.ended = true;
    this.finished.push({ runId, text, decision });
    this.wake();
  }
}
