// Approvals: the card that asks, its countdown, and the spec's four answers.
//
//   Approve once                 decision approve
//   Approve for this session     decision approve, and this app answers the
//                                session's later requests the same way (the
//                                spec's client-only approveForSession)
//   Always approve this command  decision approve_always, scope tool: a
//                                permanent grant for that command (Settings
//                                lists and revokes grants)
//   Deny                         decision deny
import { post, describe } from './api.js';
import { decisionBody } from './e2e.js';
import { store, emit } from './state.js';
import { h, clear, toast, formatCountdown, announce } from './ui.js';
import { renderBlocks } from './blocks.js';

const SESSION_KEY = 'relay.approve-session';

function sessionsApproved() {
  try {
    return new Set(JSON.parse(localStorage.getItem(SESSION_KEY) || '[]'));
  } catch (err) {
    return new Set();
  }
}

function rememberSession(sessionId) {
  const set = sessionsApproved();
  set.add(sessionId);
  localStorage.setItem(SESSION_KEY, JSON.stringify([...set].slice(-200)));
}

export const CHOICES = [
  { id: 'once', label: 'Approve once', body: { decision: 'approve' } },
  { id: 'session', label: 'Approve for this session', body: { decision: 'approve' }, remember: true },
  { id: 'always', label: 'Always approve this command', body: { decision: 'approve_always', scope: 'tool' } },
  { id: 'deny', label: 'Deny', body: { decision: 'deny' } },
];

const busy = new Set();

export async function decide(approval, choice) {
  if (busy.has(approval.approval_id)) return;
  busy.add(approval.approval_id);
  try {
    // In an encrypted session the decision is signed for the bridge (decision_sig): the relay cannot forge one.
    const body = await decisionBody(approval, store.sessions.get(approval.session_id), choice.body);
    const result = await post(`/v1/me/approvals/${encodeURIComponent(approval.approval_id)}`, body);
    if (choice.remember) rememberSession(approval.session_id);
    const known = store.approvals.get(approval.approval_id) || approval;
    store.approvals.set(approval.approval_id, { ...known, status: 'resolved', decision: result.decision, scope: result.scope,
      answered: result.idempotent ? null : choice.id });
    emit('approvals', approval.approval_id);
    emit(`messages:${approval.session_id}`);
    announce(result.idempotent ? 'This request was already answered' : `${choice.label}: done`);
  } catch (err) {
    if (err.code === 'approval_expired') {
      const known = store.approvals.get(approval.approval_id) || approval;
      store.approvals.set(approval.approval_id, { ...known, status: 'expired' });
      emit('approvals', approval.approval_id);
      emit(`messages:${approval.session_id}`);
    }
    toast(describe(err), 'error');
  } finally {
    busy.delete(approval.approval_id);
  }
}

// A later request in a session the user approved "for this session" is answered by this app at once.
export function autoApprove(approval) {
  if (approval.status !== 'pending' || !sessionsApproved().has(approval.session_id)) return;
  decide(approval, { ...CHOICES[0], id: 'session-auto', label: 'Approved for this session' });
}

// Actions whose `command` is a command line; for the others (an edit's path, a URL) "always" covers that target.
const COMMAND_ACTIONS = new Set(['exec', 'execute']);

// "Always" is a grant on (action, command) (docs/api.md): the label says what it covers.
const ALWAYS_LABELS = {
  edit: 'Always approve edits to this file',
  delete: 'Always approve deleting this',
  move: 'Always approve moving this',
  read: 'Always approve reading this',
  search: 'Always approve this search',
  fetch: 'Always approve fetching this',
};

function choiceLabel(choice, a) {
  if (choice.id !== 'always' || !a.action || COMMAND_ACTIONS.has(a.action)) return choice.label;
  return ALWAYS_LABELS[a.action] || 'Always approve this';
}

// Why an encrypted chat's card has three answers (docs/web.md "End-to-end encryption").
const NO_GRANT_NOTE = 'No “Always approve” in an encrypted chat: the relay cannot read the command, so it cannot '
  + 'answer the next request for you. “Approve for this session” answers this chat’s requests while the app is open.';

// The agent's sentence without the command it ends with, when the card shows that command below it (in
// its code box, or as the path its diff names): "The agent asks to edit /a/b.txt" reads "The agent asks to edit:".
function sentence(message, command) {
  const text = typeof message === 'string' ? message.trim() : '';
  if (text === command) return '';
  if (!command || !text.endsWith(command)) return text;
  const head = text.slice(0, text.length - command.length).replace(/[\s:]+$/, '');
  return head ? `${head}:` : text;
}

function outcome(a) {
  if (a.status === 'expired') return 'Expired without an answer';
  if (a.decision === 'deny') return 'Denied';
  if (a.decision === 'approve_always') return `Always approved${a.scope === 'tool' ? (COMMAND_ACTIONS.has(a.action) || !a.action ? ' (this command)' : ' (this target)') : ''}`;
  if (a.answered === 'session' || a.answered === 'session-auto') return 'Approved for this session';
  return 'Approved';
}

export const approvalCard = {
  create() {
    return h('section', { class: 'approval', role: 'group' });
  },

  update(el, a) {
    const signature = `${a.status}|${a.decision}|${a.answered}|${Array.isArray(a.content) ? a.content.length : 0}`;
    if (el.dataset.signature === signature) return;
    el.dataset.signature = signature;
    clear(el);
    el.className = `approval approval-${a.status} severity-${a.severity || 'medium'}`;
    el.dataset.expires = String(a.expires_at || 0);
    el.setAttribute('aria-label', `Approval request: ${a.title || a.action}`);
    el.append(h('div', { class: 'approval-head' },
      h('span', { class: `severity severity-badge-${a.severity || 'medium'}`, text: `${(a.severity || 'medium')} risk` }),
      h('strong', { class: 'approval-title', text: a.title || a.action || 'Approval' })));
    // What the agent wants to do, as it will be done (the diff of an edit, docs/bridge.md "acp:COMMAND", permissions), just above the answers.
    // The command is shown once: not again as a text block, nor as the path a diff already names, nor at the end of the sentence.
    const command = typeof a.command === 'string' ? a.command.trim() : '';
    const content = (Array.isArray(a.content) ? a.content : []).filter((b) => b && typeof b === 'object' &&
      !(b.type === 'text' && typeof b.text === 'string' && command && b.text.trim() === command));
    const diffPaths = new Set(content.filter((b) => b.type === 'diff').map((b) => b.path));
    const message = sentence(a.message, command);
    if (message) el.append(h('p', { class: 'approval-message', text: message }));
    if (command && !diffPaths.has(a.command))
      el.append(h('pre', { class: 'code-block approval-command', tabindex: '0', 'aria-label': COMMAND_ACTIONS.has(a.action) ? 'Command' : 'What it acts on' }, h('code', { text: a.command })));
    const facts = [];
    if (a.host) facts.push(h('span', { text: `Host: ${a.host}` }));
    if (a.action) facts.push(h('span', { text: `Action: ${a.action}` }));
    if (facts.length) el.append(h('div', { class: 'approval-facts' }, facts));
    if (content.length) {
      const shown = renderBlocks(content, { kind: a.action });
      el.append(a.status === 'pending'
        ? h('div', { class: 'approval-content' }, shown)
        : h('details', { class: 'task-detail approval-content' }, h('summary', { text: 'What was asked' }), shown));
    }
    if (a.status === 'pending') {
      el.append(h('div', { class: 'countdown', 'aria-live': 'off' }));
      // In an encrypted chat nothing answers a later request by a grant (docs/web.md "End-to-end encryption"): no
      // "always" there, and the card says why rather than silently offering three answers instead of four.
      const session = store.sessions.get(a.session_id);
      const sealed = !!(session && session.encrypted);
      const choices = sealed ? CHOICES.filter((c) => c.id !== 'always') : CHOICES;
      el.append(h('div', { class: 'approval-actions' }, choices.map((choice) =>
        h('button', { type: 'button', class: `btn ${choice.id === 'deny' ? 'btn-danger' : choice.id === 'once' ? 'btn-primary' : ''}`,
          dataset: { choice: choice.id }, text: choiceLabel(choice, a),
          onclick: (e) => {
            for (const b of el.querySelectorAll('button')) b.disabled = true;
            decide(store.approvals.get(a.approval_id) || a, choice).finally(() => {
              if (el.isConnected) for (const b of el.querySelectorAll('button')) b.disabled = false;
            });
            e.stopPropagation();
          } }))));
      if (sealed) el.append(h('p', { class: 'approval-note', text: NO_GRANT_NOTE }));
      approvalCard.tick(el);
    } else {
      el.append(h('p', { class: 'approval-outcome', text: outcome(a) }));
    }
  },

  tick(el) {
    const counter = el.querySelector('.countdown');
    if (!counter) return;
    const left = Number(el.dataset.expires) - Date.now();
    counter.textContent = left > 0 ? `Expires in ${formatCountdown(left)}` : 'Expiring…';
    counter.classList.toggle('countdown-soon', left < 30000);
  },
};
