// The screens other than a chat: sign-in, chats, a new chat, machines,
// pairing, settings (the inbox is inbox.js's).
import { auth } from './auth.js';
import { get, post, patch, del, describe } from './api.js';
import { agentLabel } from './transcript.js';
import { store, on, loadDeleted, loadGrants, installationName, lastMessage, previewText, agentWorking, loadPreviews } from './state.js';
import { h, clear, reconcile, icon, toast, ask, formatTime, codeBox } from './ui.js';
import { healthPill } from './chat.js';
import { pushStatus, pushSupported, enablePush, disablePush, PushTimeout } from './push.js';
import { go, signedIn, signOut } from './nav.js';
import { devicesSection, verifyHref, bridgeStatus } from './devices.js';
import { e2e, canEncrypt, bridgeOf, bridgeState, createSession, onKeys, bindPairingEnrol } from './e2e.js';
import { startPickers } from './newchat.js';
import { startFields, sealedProject } from './agents.js';

// The agent a bridge runs, as its manifest names it (docs/api.md: the Installation's `agent`).
function agentLine(inst) {
  const agent = inst.agent;
  if (!agent || typeof agent.name !== 'string' || !agent.name) return '';
  const parts = [`Agent: ${agentLabel(agent.name)}${typeof agent.version === 'string' && agent.version ? ` ${agent.version}` : ''}`];
  if (typeof agent.mode === 'string' && agent.mode) parts.push(`mode ${agent.mode}`);
  return parts.join(' · ');
}

function screen(title, ...children) {
  return h('div', { class: 'screen' }, h('h1', { text: title }), children);
}

// ---- sign-in ----

export function loginView(main, message) {
  const box = h('div', { class: 'login' },
    h('div', { class: 'login-brand' }, h('img', { src: document.querySelector('link[rel=icon]').href, alt: '', width: '56', height: '56' }),
      h('h1', { text: 'Relay' })),
    h('p', { class: 'lead', text: 'Chat with the agents on your own machines, and approve what they do.' }));
  if (message) box.append(h('p', { class: 'notice', role: 'alert', text: message }));
  const body = h('div', { class: 'login-body' }, h('p', { text: 'Loading…' }));
  box.append(body);
  main.append(box);
  auth.loadConfig().then((config) => {
    clear(body);
    if (config.auth.mode === 'oidc') {
      body.append(h('button', { type: 'button', class: 'btn btn-primary btn-wide', text: 'Sign in',
        onclick: (e) => {
          e.target.disabled = true;
          auth.startOidc().catch((err) => {
            e.target.disabled = false;
            toast(`Sign-in could not start: ${err.message}`, 'error');
          });
        } }));
    } else if (config.auth.mode === 'embedded') {
      body.append(
        h('p', { text: 'To sign in, open a sign-in link on this device. On the machine that runs the relay:' }),
        h('pre', { class: 'code-block', tabindex: '0' }, h('code', { text: 'relayd login-link YOUR-NAME' })),
        h('p', { text: 'It prints a link (and a QR code to scan with your phone). Each link works once, for ten minutes.' }));
    } else {
      body.append(h('p', { text: 'This relay signs users in with tokens from its identity provider; this app has no client id for it. Ask the operator to set --oidc-client-id.' }));
    }
  }).catch((err) => {
    clear(body);
    body.append(h('p', { class: 'notice', text: `The relay cannot be reached: ${describe(err)}` }));
  });
  if (auth.signedIn()) signedIn();
}

// ---- chats ----

function sessionItem() {
  return h('li', { class: 'session-item' });
}

function updateSessionItem(el, s) {
  const inst = store.installations.get(s.installation_id);
  const last = lastMessage(s.id);
  const preview = previewText(last);
  const working = agentWorking(s.id);
  const signature = JSON.stringify([s.title, s.encrypted, s.state, s.updated_at, inst && inst.health, inst && inst.custom_emoji, inst && installationName(inst),
    location.hash, preview, working, store.reachable]);
  if (el.dataset.signature === signature) return;
  el.dataset.signature = signature;
  clear(el);
  const current = location.hash === `#/s/${encodeURIComponent(s.id)}`;
  const when = Math.max(s.updated_at || 0, (last && last.created_at) || 0);
  el.append(h('a', { href: `#/s/${encodeURIComponent(s.id)}`, class: 'session-link', 'aria-current': current ? 'page' : null },
    h('span', { class: 'avatar', 'aria-hidden': 'true' }, inst && inst.custom_emoji ? inst.custom_emoji : icon('chats')),
    h('span', { class: 'session-text' },
      h('span', { class: 'session-title' }, s.encrypted ? h('span', { class: 'lock', title: 'End-to-end encrypted', 'aria-label': 'Encrypted:' }, icon('lock')) : null,
        s.title || 'Untitled chat'),
      // The latest message, or what the agent is doing now.
      working === 'approval' ? h('span', { class: 'session-preview session-working', text: 'Waiting for your approval' })
        : working === 'reply' ? h('span', { class: 'session-preview session-working' },
          h('span', { class: 'typing', 'aria-hidden': 'true' }, h('i'), h('i'), h('i')), ' Agent is replying…')
          : preview ? h('span', { class: 'session-preview', text: preview }) : null,
      h('span', { class: 'session-sub', text: `${installationName(inst)} · ${formatTime(when)}` })),
    inst && inst.health !== 'healthy' ? healthPill(inst) : null));
}

function deletedItem() {
  return h('li', { class: 'session-item session-deleted' });
}

function updateDeletedItem(el, s) {
  clear(el);
  el.append(h('div', { class: 'session-link' },
    h('span', { class: 'avatar', 'aria-hidden': 'true' }, icon('chats')),
    h('span', { class: 'session-text' },
      h('span', { class: 'session-title', text: s.title || 'Untitled chat' }),
      h('span', { class: 'session-sub', text: s.restore_until ? `Restorable until ${formatTime(s.restore_until)}` : 'Deleted' })),
    h('button', { type: 'button', class: 'btn btn-small', text: 'Restore', 'aria-label': `Restore ${s.title || 'Untitled chat'}`,
      onclick: async () => {
        try {
          await post(`/v1/me/sessions/${encodeURIComponent(s.id)}/restore`, {});
          toast('Chat restored');
        } catch (err) {
          toast(describe(err), 'error');
        }
      } })));
}

// The list of chats with its filter; in the sidebar on a wide screen, the home screen on a phone.
export function sessionsList(container, compact = false) {
  let filter = 'active';
  const tabs = h('div', { class: 'segmented', role: 'tablist', 'aria-label': 'Show chats' });
  const list = h('ul', { class: 'sessions', 'aria-label': 'Chats' });
  const empty = h('p', { class: 'empty', hidden: true });
  const heading = compact ? h('h2', { class: 'sidebar-title', text: 'Chats' }) : h('h1', { text: 'Chats' });
  container.append(h('div', { class: 'list-head' }, heading,
    h('a', { class: 'btn btn-primary btn-small', href: '#/new' }, icon('plus'), h('span', { text: 'New chat' }))), tabs, list, empty);
  for (const [id, label] of [['active', 'Active'], ['archived', 'Archived'], ['deleted', 'Deleted']]) {
    tabs.append(h('button', { type: 'button', role: 'tab', dataset: { filter: id }, text: label,
      onclick: () => {
        filter = id;
        if (id === 'deleted') loadDeleted().catch((err) => toast(describe(err), 'error'));
        draw();
      } }));
  }
  function draw() {
    for (const b of tabs.children) b.setAttribute('aria-selected', String(b.dataset.filter === filter));
    let items;
    if (filter === 'deleted') {
      items = [...store.deleted.values()].filter((s) => !s.restore_until || s.restore_until > Date.now());
      reconcile(list, items, (s) => s.id, deletedItem, updateDeletedItem);
    } else {
      items = [...store.sessions.values()].filter((s) => s.state === filter).sort((a, b) => b.updated_at - a.updated_at);
      reconcile(list, items, (s) => s.id, sessionItem, updateSessionItem);
      loadPreviews(items.slice(0, 40)).catch(() => {});
    }
    empty.hidden = items.length > 0;
    empty.textContent = filter === 'active'
      ? (store.installations.size ? 'No chats yet. Start one with New chat.' : 'Pair a machine first, then start a chat with its agent.')
      : filter === 'archived' ? 'No archived chats.' : 'No deleted chats to restore.';
  }
  // A message or an approval in any chat changes its preview: one redraw per frame.
  let frame = 0;
  const soon = () => {
    if (!frame) frame = requestAnimationFrame(() => { frame = 0; draw(); });
  };
  const offs = [on('sessions', draw), on('installations', draw), on('previews', soon), on('approvals', soon), on('connection', soon),
    on('*', (topic) => { if (topic.startsWith('messages:')) soon(); })];
  window.addEventListener('hashchange', draw);
  draw();
  return () => {
    for (const off of offs) off();
    if (frame) cancelAnimationFrame(frame);
    window.removeEventListener('hashchange', draw);
  };
}

export function sessionsView(main) {
  const box = h('div', { class: 'screen' });
  main.append(box);
  return sessionsList(box);
}

export function welcomeView(main) {
  main.append(h('div', { class: 'screen welcome' },
    h('h1', { text: 'Relay' }),
    h('p', { class: 'lead', text: store.installations.size ? 'Pick a chat on the left, or start a new one.' : 'Pair a machine to start chatting with its agent.' }),
    h('p', null, store.installations.size
      ? h('a', { class: 'btn btn-primary', href: '#/new', text: 'New chat' })
      : h('a', { class: 'btn btn-primary', href: '#/pair', text: 'Pair a machine' }))));
  return null;
}

// The New chat form's draft (machine, title, agent, folder, worktree), kept in this tab while the person verifies the
// machine and comes back (issue 35): sessionStorage, dropped once the chat is made or cancelled.
const NEW_CHAT_DRAFT = 'relay.new-chat';

function loadDraft() {
  try {
    return JSON.parse(sessionStorage.getItem(NEW_CHAT_DRAFT) || 'null');
  } catch (err) {
    return null;
  }
}

function saveDraft(draft) {
  try {
    if (draft) sessionStorage.setItem(NEW_CHAT_DRAFT, JSON.stringify(draft));
    else sessionStorage.removeItem(NEW_CHAT_DRAFT);
  } catch (err) {
    // storage disabled: the form is not kept
  }
}

export function newChatView(main, installationId) {
  const live = [...store.installations.values()].filter((i) => i.state !== 'revoked');
  if (!live.length) {
    main.append(screen('New chat', h('p', { text: 'No machine is paired yet.' }), h('a', { class: 'btn btn-primary', href: '#/pair', text: 'Pair a machine' })));
    return null;
  }
  const saved = loadDraft();
  // The draft of this machine's form (or of any, when none is named): another machine's form starts empty.
  const draft = saved && (!installationId || saved.installation_id === installationId) ? saved : null;
  const chosen = installationId || (draft && draft.installation_id);
  const select = h('select', { id: 'new-installation', required: true },
    live.map((i) => h('option', { value: i.id, selected: i.id === chosen, text: `${i.custom_emoji ? `${i.custom_emoji} ` : ''}${installationName(i)} (${i.health})` })));
  const title = h('input', { id: 'new-title', type: 'text', maxlength: '200', placeholder: 'Optional', autocomplete: 'off',
    value: draft && typeof draft.title === 'string' ? draft.title : '' });
  // The agent, the folder, a new worktree and the agent's own sessions (newchat.js).
  let pickers = null;
  const keep = () => saveDraft({ installation_id: select.value, title: title.value, ...(pickers ? pickers.draft() : {}) });
  pickers = startPickers(select, draft, keep);
  title.addEventListener('input', keep);
  const button = h('button', { type: 'submit', class: 'btn btn-primary', text: 'Start chat' });
  // Whether the chat will be end-to-end encrypted: the machine's bridge has a device this browser verified (e2e.js),
  // and whether that machine has taken this device yet (issue 34).
  const sealing = h('div', { id: 'new-encryption', class: 'field-hint' });
  const drawSealing = () => {
    clear(sealing);
    const bridge = bridgeOf(select.value);
    const inst = store.installations.get(select.value);
    const name = inst ? installationName(inst) : 'This machine';
    if (canEncrypt(select.value)) {
      const state = bridgeState(bridge);
      sealing.append(h('p', null, h('span', { class: 'pill pill-lock', text: 'End-to-end encrypted' })));
      if (state === 'waiting') {
        sealing.append(h('p', null, `${name} waits for its owner to confirm this device on it: until then it cannot read the chats encrypted here. `,
          h('a', { href: verifyHref(bridge, 'new'), text: 'Enter its code' }), ', or see Settings for the command.'));
      } else if (state === 'earlier') {
        sealing.append(h('p', null, `An upgraded relay-bridge on ${name} waits for this device to be verified again: `,
          h('a', { href: verifyHref(bridge, 'new'), text: 'verify again' }), '.'));
      }
    } else if (bridge && e2e.device) {
      sealing.append(h('p', null, 'Not encrypted: ', h('a', { href: verifyHref(bridge, 'new'), text: 'verify this machine' }), ' to encrypt new chats on it.'));
    } else sealing.append(h('p', { text: 'Not encrypted: this machine\'s bridge has no encryption key.' }));
  };
  select.addEventListener('change', () => {
    pickers.machineChanged();
    keep();
    drawSealing();
  });
  drawSealing();
  main.append(screen('New chat',
    h('form', { class: 'form', onsubmit: async (e) => {
      e.preventDefault();
      if (pickers.problem()) {
        pickers.focusProblem();
        return;
      }
      button.disabled = true;
      try {
        const choice = pickers.choice();
        // A chat that continues one of the agent's sessions takes its title when none is typed.
        const name = title.value.trim() || choice.resumeTitle.slice(0, 200) || null;
        // An encrypted chat seals its folder (project_ct, e2e.js); a plain one names it (project).
        const { project, ...fields } = startFields(choice);
        const session = canEncrypt(select.value)
          ? await createSession(select.value, name, { ...fields, project: sealedProject(choice) })
          : (await post('/v1/me/sessions', { installation_id: select.value, title: name, ...fields, ...(project ? { project } : {}) })).session;
        store.sessions.set(session.id, session);
        saveDraft(null);
        go(`/s/${session.id}`);
      } catch (err) {
        toast(describe(err), 'error');
        button.disabled = false;
      }
    } },
    h('label', { for: 'new-installation', class: 'field-label', text: 'Machine' }), select,
    pickers.el,
    h('label', { for: 'new-title', class: 'field-label', text: 'Title' }), title, sealing,
    h('div', { class: 'form-actions' }, h('a', { class: 'btn', href: '#/', text: 'Cancel', onclick: () => saveDraft(null) }), button))));
  // The machine's verification may change while the form is open (a device confirmed, keys received).
  const offKeys = onKeys((id) => id === null && drawSealing());
  return () => {
    offKeys();
    pickers.dispose();
  };
}

// ---- machines ----

function installationItem() {
  return h('li', { class: 'card installation' });
}

function updateInstallation(el, inst) {
  clear(el);
  const name = installationName(inst);
  el.append(
    h('div', { class: 'installation-head' },
      h('span', { class: 'avatar', 'aria-hidden': 'true' }, inst.custom_emoji ? inst.custom_emoji : icon('machines')),
      h('div', { class: 'installation-text' },
        h('h2', { class: 'installation-name', text: name }),
        // The host's own name only when the card's title is another (a name given here): never the same name twice.
        h('p', { class: 'installation-sub', text: [inst.host_label && inst.host_label !== name ? inst.host_label : null,
          inst.connector_type, `paired ${formatTime(inst.created_at)}`].filter(Boolean).join(' · ') }),
        agentLine(inst) ? h('p', { class: 'installation-sub', text: agentLine(inst) }) : null),
      healthPill(inst)));
  if (inst.state === 'revoked') return;
  // Its bridge's encryption key, verified by this browser or not yet (devices.js).
  const bridge = bridgeOf(inst.id);
  if (bridge && e2e.device) {
    const state = bridgeState(bridge);
    if (state === 'unverified') {
      el.append(h('p', { class: 'installation-sub' }, 'Verify this machine to encrypt its new chats: ',
        h('a', { href: verifyHref(bridge, 'machines'), text: 'Verify', 'aria-label': `Verify ${name}` })));
    } else {
      el.append(h('p', { class: 'installation-sub' }, h('span', { class: 'pill pill-lock', text: 'New chats encrypted' })));
      if (state === 'waiting' || state === 'earlier') {
        el.append(bridgeStatus(bridge), h('p', { class: 'installation-sub' },
          h('a', { href: verifyHref(bridge, 'machines'), text: state === 'waiting' ? 'Enter its code' : 'Verify again',
            'aria-label': `${state === 'waiting' ? 'Enter its code' : 'Verify again'}: ${name}` })));
      }
    }
  }
  el.append(h('div', { class: 'card-actions' },
    h('a', { class: 'btn btn-small btn-primary', href: `#/new/${encodeURIComponent(inst.id)}`, text: 'New chat' }),
    h('button', { type: 'button', class: 'btn btn-small', text: 'Rename', 'aria-label': `Rename ${name}`,
      onclick: async () => {
        const value = await ask({ title: 'Rename machine', confirm: 'Save', input: { label: 'Name', value: inst.custom_display_name || '', max: 64 } });
        if (value === null) return;
        try {
          await patch(`/v1/me/installations/${encodeURIComponent(inst.id)}`, { custom_display_name: value.trim() || null });
        } catch (err) {
          toast(describe(err), 'error');
        }
      } }),
    h('button', { type: 'button', class: 'btn btn-small', text: 'Emoji', 'aria-label': `Choose an emoji for ${name}`,
      onclick: async () => {
        const value = await ask({ title: 'Emoji', confirm: 'Save', input: { label: 'One emoji', value: inst.custom_emoji || '', max: 16 } });
        if (value === null) return;
        try {
          await patch(`/v1/me/installations/${encodeURIComponent(inst.id)}`, { custom_emoji: value.trim() || null });
        } catch (err) {
          toast(describe(err), 'error');
        }
      } }),
    h('button', { type: 'button', class: 'btn btn-small btn-danger', text: 'Disconnect', 'aria-label': `Disconnect ${name}`,
      onclick: async () => {
        const ok = await ask({ title: `Disconnect ${name}?`, text: 'Its bridge stops at once and must be paired again. Its chats stay readable.', confirm: 'Disconnect', danger: true });
        if (!ok) return;
        try {
          await del(`/v1/me/installations/${encodeURIComponent(inst.id)}`);
          toast(`${name} disconnected`);
        } catch (err) {
          toast(describe(err), 'error');
        }
      } })));
}

export function installationsView(main) {
  const list = h('ul', { class: 'cards', 'aria-label': 'Machines' });
  const empty = h('p', { class: 'empty', text: 'No machine is paired yet.' });
  main.append(h('div', { class: 'screen' },
    h('div', { class: 'list-head' }, h('h1', { text: 'Machines' }),
      h('a', { class: 'btn btn-primary btn-small', href: '#/pair' }, icon('plus'), h('span', { text: 'Pair a machine' }))),
    list, empty));
  function draw() {
    const items = [...store.installations.values()].sort((a, b) =>
      (a.state === 'revoked') - (b.state === 'revoked') || b.created_at - a.created_at);
    reconcile(list, items, (i) => i.id, installationItem, updateInstallation);
    empty.hidden = items.length > 0;
  }
  const offs = [on('installations', draw), on('connection', draw), onKeys((id) => id === null && draw())];
  draw();
  return () => offs.forEach((off) => off());
}

export function pairView(main, code) {
  const input = h('input', { id: 'pair-code', type: 'text', inputmode: 'text', autocomplete: 'one-time-code', autocapitalize: 'characters',
    spellcheck: 'false', maxlength: '12', pattern: '[A-Za-z \\-]{7,12}', required: true, value: code || '', 'aria-describedby': 'pair-help' });
  const button = h('button', { type: 'submit', class: 'btn btn-primary', text: 'Pair' });
  const result = h('div', { class: 'pair-result', role: 'status' });
  const help = h('p', { id: 'pair-help' }, ['On the machine with your agent, run ', h('code', { class: 'nobreak', text: 'relay-bridge pair' }),
    '. It shows a 7-letter code (and a QR code that opens this page with the code filled in). Codes last two minutes.']);
  const command = codeBox(`relay-bridge pair --server ${location.origin}`, '', 'Copy the command');
  // Once paired, the emptied form goes: the result is what is left to read, with a way back to pair another.
  const showForm = (shown) => {
    for (const el of [help, command, input.form]) el.hidden = !shown;
  };
  main.append(screen('Pair a machine',
    help,
    // The command wraps inside its box on a narrow screen, and copies whole.
    command,
    h('form', { class: 'form', onsubmit: async (e) => {
      e.preventDefault();
      button.disabled = true;
      clear(result);
      try {
        const answer = await post('/v1/me/pairing/claim', { code: input.value.trim() });
        store.installations.set(answer.installation.id, answer.installation);
        // The enrolment code the pairing link carried (main.js) now belongs to this machine's Verify screen.
        const withCode = bindPairingEnrol(input.value.trim(), answer.installation.id);
        input.value = '';
        const id = encodeURIComponent(answer.installation.id);
        showForm(false);
        // DOM append writes a null as the text "null": the optional paragraph is left out instead.
        result.append(...[h('p', { class: 'success' }, [`Paired ${installationName(answer.installation)}. Start its bridge with `,
          h('code', { class: 'nobreak', text: 'relay-bridge run' }), ', then chat.']),
          withCode ? h('p', { text: 'The link also carried the code that lets you verify this machine: once its bridge runs, verify it so that its chats are end-to-end encrypted.' }) : null,
          h('div', { class: 'form-actions' },
            withCode ? h('a', { class: 'btn btn-primary', href: `#/verify/${id}?from=new`, text: 'Verify it' }) : null,
            h('a', { class: `btn${withCode ? '' : ' btn-primary'}`, href: `#/new/${id}`, text: 'Start a chat' }),
            h('button', { type: 'button', class: 'btn', text: 'Pair another machine', onclick: () => {
              clear(result);
              showForm(true);
              input.focus();
            } }))].filter(Boolean));
      } catch (err) {
        result.append(h('p', { class: 'notice', role: 'alert', text: describe(err) }));
      } finally {
        button.disabled = false;
      }
    } },
    h('label', { for: 'pair-code', class: 'field-label', text: 'Pairing code' }), input,
    h('div', { class: 'form-actions' }, button)),
    result));
  if (!code) input.focus();
  return null;
}

// ---- settings ----

export function settingsView(main) {
  const notifications = h('div', { class: 'setting' });
  const grants = h('ul', { class: 'cards', 'aria-label': 'Permanent approvals' });
  const grantsEmpty = h('p', { class: 'empty', text: 'No command is approved for good.' });
  const theme = h('select', { id: 'theme' },
    [['system', 'Like the system'], ['light', 'Light'], ['dark', 'Dark']].map(([value, label]) =>
      h('option', { value, text: label, selected: (localStorage.getItem('relay.theme') || 'system') === value })));
  theme.addEventListener('change', () => {
    localStorage.setItem('relay.theme', theme.value);
    document.documentElement.dataset.theme = theme.value;
  });
  const devices = devicesSection();
  main.append(screen('Settings',
    h('section', { class: 'settings-section', 'aria-labelledby': 'set-account' },
      h('h2', { id: 'set-account', text: 'Account' }),
      h('p', { text: `Signed in as ${auth.userId() || (store.user && store.user.id) || 'unknown'}` }),
      h('button', { type: 'button', class: 'btn', text: 'Sign out', onclick: async () => {
        await disablePush().catch(() => {});
        signOut();
      } })),
    h('section', { class: 'settings-section', 'aria-labelledby': 'set-notify' },
      h('h2', { id: 'set-notify', text: 'Notifications' }),
      h('p', { text: 'Approval requests, and replies that finish while the app is closed.' }),
      notifications),
    h('section', { class: 'settings-section', 'aria-labelledby': 'set-grants' },
      h('h2', { id: 'set-grants', text: 'Always approved' }),
      h('p', { text: 'Requests these cover are approved without asking you.' }),
      grants, grantsEmpty),
    devices.el,
    h('section', { class: 'settings-section', 'aria-labelledby': 'set-look' },
      h('h2', { id: 'set-look', text: 'Appearance' }),
      h('label', { for: 'theme', class: 'field-label', text: 'Theme' }), theme),
    h('p', { class: 'version', id: 'app-version' })));
  auth.loadConfig().then((config) => {
    const version = document.getElementById('app-version');
    if (version) version.textContent = `App version ${config.version}`;
  }).catch(() => {});

  // failure: what went wrong the last time, shown until the next try (a toast would be gone in seconds).
  async function drawNotifications(failure = null) {
    const status = await pushStatus().catch(() => 'unsupported');
    clear(notifications);
    const text = { on: 'On for this device.', off: 'Off for this device.', denied: 'Blocked in this browser\'s site settings.',
      unsupported: pushSupported() ? 'Not available.' : 'This browser cannot receive notifications (on iPhone, add the app to the home screen first).' }[status];
    notifications.append(h('p', { class: 'push-status', text }));
    if (failure) notifications.append(h('p', { class: 'notice push-failure', role: 'alert', text: failure }));
    if (status === 'on' || status === 'off') {
      const label = status === 'on' ? 'Turn off' : 'Turn on';
      notifications.append(h('button', { type: 'button', class: status === 'on' ? 'btn' : 'btn btn-primary', text: label,
        onclick: async (e) => {
          const button = e.currentTarget;
          button.disabled = true;
          button.textContent = status === 'on' ? 'Turning off…' : 'Turning on…';
          const old = notifications.querySelector('.push-failure');
          if (old) old.remove();
          let failed = null;
          try {
            if (status === 'on') await disablePush();
            else await enablePush();
          } catch (err) {
            failed = err instanceof PushTimeout ? err.message : `Notifications could not be turned ${status === 'on' ? 'off' : 'on'}: ${describe(err)}`;
          }
          drawNotifications(failed);
        } }));
    }
  }

  function grantItem() {
    return h('li', { class: 'card grant' });
  }

  function updateGrant(el, g) {
    clear(el);
    const inst = store.installations.get(g.installation_id);
    const scope = { tool: 'this command', domain: 'this host', session: 'one chat', all: 'everything' }[g.scope] || g.scope;
    el.append(
      h('div', { class: 'grant-text' },
        h('strong', { text: `${g.action}: ${scope}` }),
        g.scope_value ? h('pre', { class: 'code-block', tabindex: '0' }, h('code', { text: g.scope_value })) : null,
        h('span', { class: 'grant-sub', text: `${installationName(inst)} · since ${formatTime(g.created_at)}` })),
      h('button', { type: 'button', class: 'btn btn-small btn-danger', text: 'Revoke', 'aria-label': `Revoke ${g.action} ${g.scope_value || scope}`,
        onclick: async () => {
          try {
            await del(`/v1/me/grants/${encodeURIComponent(g.id)}`);
            store.grants = store.grants.filter((x) => x.id !== g.id);
            drawGrants();
            toast('Revoked: it will ask again');
          } catch (err) {
            toast(describe(err), 'error');
          }
        } }));
  }

  function drawGrants() {
    reconcile(grants, store.grants, (g) => g.id, grantItem, updateGrant);
    grantsEmpty.hidden = store.grants.length > 0;
  }

  const off = on('grants', drawGrants);
  drawGrants();
  drawNotifications();
  loadGrants().catch((err) => toast(describe(err), 'error'));
  return () => {
    off();
    devices.stop();
  };
}
