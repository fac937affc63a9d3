// The screens of end-to-end encryption (docs/web.md): Settings' list of the
// account's devices (this browser, other phones and browsers, the machines'
// bridges) with Verify and Revoke, and the Verify screen, where the person
// compares the four emoji this browser shows with the four the machine prints,
// types the one-time code the machine shows (issue 34), and confirms only if
// the emoji are the same. A machine takes this device only on that code's
// proof, or once its owner confirms the device there (e2e.js, bridgeState).
import { describe } from './api.js';
import { store, installationName, emit } from './state.js';
import { h, append, clear, toast, ask, announce, codeBox } from './ui.js';
import { go } from './nav.js';
import { normaliseEnrolCode, groupEnrolCode } from './crypto.js';
import { e2e, refreshDevices, sasWith, confirmBridge, revoke, onKeys, bridgeOf, bridgeState, heldEnrolCode, dropEnrolCode } from './e2e.js';

function platformName(d) {
  return { bridge: 'Machine', web: 'Browser', cli: 'Terminal', ios: 'iPhone', android: 'Android' }[d.platform] || d.platform;
}

function deviceName(d) {
  if (d.platform === 'bridge') {
    const inst = store.installations.get(d.installation_id);
    return inst ? installationName(inst) : d.label || d.id;
  }
  return d.label || d.id;
}

// What the machine's owner runs on it to accept this device without the code.
export const machineCommand = () => `relay-bridge devices confirm ${e2e.device ? e2e.device.device_id : 'DEVICE_ID'}`;

// Where the Verify screen was opened from, and so where it goes back to: a table, not a path from the URL.
const ORIGINS = {
  new: { path: (b) => `/new/${encodeURIComponent(b.installation_id || '')}`, label: 'Back to New chat' },
  machines: { path: () => '/machines', label: 'Back to Machines' },
  settings: { path: () => '/settings', label: 'Back to Settings' },
};

export function verifyHref(bridge, from) {
  return `#/verify/${encodeURIComponent(bridge.id)}${from ? `?from=${from}` : ''}`;
}

// A bridge's state as this device knows it (e2e.js bridgeState): a pill, what it means, and the
// sentence that introduces the machine's command where that is what is left to do.
const STATES = {
  unverified: { pill: null },
  earlier: { pill: 'Verify again', warn: true,
    text: 'Verified before machines asked for their code: an upgraded relay-bridge sends this device no keys until it is verified again.' },
  waiting: { pill: 'Waiting for the machine', warn: true,
    text: 'You confirmed it here. Keys arrive only after its owner confirms this device on the machine.',
    command: 'On the machine, its owner runs:' },
  code: { pill: 'Verified with code',
    text: 'Confirmed here with the machine\'s code: the machine takes this device when it checks the code.',
    command: 'Should it refuse the code, its owner confirms this device on the machine:' },
  keys: { pill: 'Keys received', text: null },
};

// The pill and the explanation of a bridge's state, for Settings, Machines and the Verify screen.
export function bridgeStatus(bridge, { command = true } = {}) {
  const state = bridgeState(bridge);
  const s = STATES[state];
  if (!s.pill) return null;
  const withCommand = command && s.command;
  return h('div', { class: 'bridge-status', dataset: { state } },
    h('span', { class: `pill ${s.warn ? 'pill-warn' : 'pill-lock'}`, text: s.pill }),
    s.text ? h('p', { class: 'field-hint', text: s.text }) : null,
    withCommand ? h('p', { class: 'field-hint', text: s.command }) : null,
    withCommand ? codeBox(machineCommand(), '', 'Copy the command') : null);
}

// Settings' section: returns { el, stop }.
export function devicesSection() {
  const list = h('ul', { class: 'device-list', 'aria-label': 'Devices' });
  const note = h('p');
  const el = h('section', { class: 'settings-section', 'aria-labelledby': 'set-devices' },
    h('h2', { id: 'set-devices', text: 'Devices and encryption' }),
    h('p', { text: 'Chats on a machine you verified here are end-to-end encrypted: only your verified devices and that machine can read them, not the relay.' }),
    note, list);

  function draw() {
    clear(list);
    note.textContent = '';
    if (!e2e.supported) {
      note.textContent = 'This browser cannot keep keys (no IndexedDB or WebCrypto): chats stay unencrypted here.';
      return;
    }
    if (!e2e.device) {
      note.textContent = e2e.error ? `Encryption is not available: ${describe(e2e.error)}` : 'Setting up this device…';
      return;
    }
    const mine = e2e.device.device_id;
    const rows = [...e2e.devices].sort((a, b) => (a.id === mine ? -1 : b.id === mine ? 1 : 0) || (a.platform === 'bridge') - (b.platform === 'bridge'));
    for (const d of rows) {
      const actions = [];
      let status = null;
      if (d.platform === 'bridge') {
        const state = bridgeState(d);
        status = bridgeStatus(d);
        // Verify, or verify again (with the machine's code) for a machine confirmed before it asked for one.
        actions.push(h('a', { class: `btn btn-small${state === 'unverified' || state === 'earlier' ? ' btn-primary' : ''}`,
          href: verifyHref(d, 'settings'), text: state === 'unverified' ? 'Verify' : state === 'waiting' ? 'Enter code' : 'Verify again',
          'aria-label': `${state === 'unverified' ? 'Verify' : state === 'waiting' ? 'Enter code for' : 'Verify again'} ${deviceName(d)}` }));
      }
      if (d.id !== mine) {
        actions.push(h('button', { type: 'button', class: 'btn btn-small btn-danger', text: 'Revoke', 'aria-label': `Revoke ${deviceName(d)}`,
          onclick: () => revokeDevice(d) }));
      }
      list.append(h('li', { class: 'card device-item', dataset: { device: d.id } },
        h('span', { class: 'device-text' },
          h('strong', { text: `${deviceName(d)}${d.id === mine ? ' (this device)' : ''}` }),
          h('span', { class: 'device-sub', text: `${platformName(d)} · ${d.id}` })),
        status, actions.length ? h('span', { class: 'device-actions' }, actions) : null));
    }
  }

  async function revokeDevice(d) {
    const yes = await ask({ title: `Revoke ${deviceName(d)}?`, confirm: 'Revoke', danger: true,
      text: 'It gets no key of a chat from now on. The chats this device holds keys of get new keys, for the devices that remain.' });
    if (!yes) return;
    try {
      const rotated = await revoke(d.id, [...store.sessions.values()]);
      announce(`${deviceName(d)} revoked${rotated ? `; new keys for ${rotated} chat${rotated === 1 ? '' : 's'}` : ''}`);
      emit('sessions');
    } catch (err) {
      toast(describe(err), 'error');
    }
    draw();
  }

  const off = onKeys((id) => id === null && draw());
  draw();
  if (e2e.device) refreshDevices().catch(() => {});
  return { el, stop: off };
}

// The field for the machine's one-time code: one input that groups what is typed (or pasted, in any
// case, with or without dashes and spaces) in fours as the machine shows it, and says what is wrong.
function codeField(initial) {
  const input = h('input', { id: 'enrol-code', type: 'text', inputmode: 'text', autocomplete: 'one-time-code', autocapitalize: 'characters',
    spellcheck: 'false', maxlength: '64', placeholder: 'ABCD-EFGH-JKLM-NPQR-ST23', class: 'enrol-code',
    'aria-describedby': 'enrol-hint enrol-error' });
  const error = h('p', { id: 'enrol-error', class: 'field-error', role: 'alert', hidden: true });
  const regroup = () => {
    const raw = input.value.toUpperCase().replace(/[\s-]+/g, '');
    // Only while typing at the end: regrouping in the middle would move the caret under the person's finger.
    if (input.selectionStart === input.value.length) input.value = groupEnrolCode(raw);
  };
  const say = (text) => {
    error.textContent = text || '';
    error.hidden = !text;
    if (text) input.setAttribute('aria-invalid', 'true');
    else input.removeAttribute('aria-invalid');
  };
  // The code, '' for none, or null when malformed (and said so).
  const read = () => {
    if (!input.value.trim()) {
      say('');
      return '';
    }
    const { code, error: why } = normaliseEnrolCode(input.value);
    say(why);
    return code || null;
  };
  input.addEventListener('input', () => {
    regroup();
    say('');
  });
  input.addEventListener('blur', () => input.value.trim() && read());
  if (initial) {
    input.value = initial;
    regroup();
    // A link that carried a malformed code: said at once, not after They match.
    read();
  }
  return { input, error, read, say };
}

// The Verify screen of one machine: its installation id (the link relay-bridge prints) or its bridge
// device id. query: from= (ORIGINS); the code a link carried is held in this tab (main.js, e2e.js).
export function verifyView(main, target, query = new URLSearchParams()) {
  const body = h('div');
  main.append(h('div', { class: 'screen' }, h('h1', { text: 'Verify a machine' }), body));
  const from = query.get('from');
  const origin = (from && Object.hasOwn(ORIGINS, from) && ORIGINS[from]) || ORIGINS.settings;
  const findBridge = () => (String(target || '').startsWith('dev_')
    ? e2e.devices.find((d) => d.id === target && d.platform === 'bridge' && !d.revoked_at)
    : bridgeOf(target)) || null;
  let field = null;
  let prefilled = false;
  let done = null; // the bridge confirmed without a code: what is left, on the machine
  let waiting = null;

  function back(bridge) {
    go(origin.path(bridge || { installation_id: target }));
  }

  function drawDone(bridge) {
    append(body, [
      h('p', { class: 'success', role: 'status', text: `You confirmed ${deviceName(bridge)} on this device.` }),
      h('p', { text: `One step is left, on ${deviceName(bridge)} itself. Its owner runs:` }),
      codeBox(machineCommand(), '', 'Copy the command'),
      h('p', { text: 'The machine sends this device its keys only after that, and until then it cannot read the chats encrypted here. If you get the code it shows, verify again with it instead.' }),
      h('div', { class: 'form-actions' },
        h('button', { type: 'button', class: 'btn btn-primary', text: origin.label, onclick: () => back(bridge) }),
        h('button', { type: 'button', class: 'btn', text: 'Enter the code', onclick: () => { done = null; draw(); } }))]);
  }

  async function confirm(bridge, button) {
    const code = field.read();
    if (code === null) {
      field.input.focus();
      return;
    }
    button.disabled = true;
    try {
      await confirmBridge(bridge.id, code || null, [...store.sessions.values()]);
    } catch (err) {
      toast(describe(err), 'error');
      button.disabled = false;
      return;
    }
    if (!code) {
      announce(`${deviceName(bridge)} confirmed here; its owner must confirm this device on the machine`);
      done = bridge.id;
      draw();
      return;
    }
    // Used: the code is spent on the machine, and this tab forgets it.
    dropEnrolCode(target, bridge.id, bridge.installation_id);
    const text = `${deviceName(bridge)} verified with its code. New chats on it are end-to-end encrypted.`;
    toast(text);
    announce(text);
    back(bridge);
  }

  let drawing = 0;
  async function draw() {
    const mine = ++drawing;
    const bridge = findBridge();
    if (!e2e.device || !bridge) {
      clear(body);
      const inst = store.installations.get(target) || null;
      if (e2e.device && inst && inst.state !== 'revoked') {
        // Paired a moment ago: its bridge registers its key when it first runs. Look again until it has.
        body.append(h('p', { text: `${installationName(inst)} has not registered its encryption key yet. Start its bridge (relay-bridge run); this screen goes on as soon as it has.` }));
        if (!waiting) waiting = setInterval(() => refreshDevices().catch(() => {}), 3000);
      } else {
        body.append(h('p', { text: e2e.device ? 'This machine has no encryption key registered, or it was revoked.' : 'This device is still being set up.' }));
      }
      body.append(h('div', { class: 'form-actions' }, h('a', { class: 'btn', href: `#${origin.path({ installation_id: target })}`, text: origin.label })));
      return;
    }
    if (waiting) {
      clearInterval(waiting);
      waiting = null;
    }
    if (!field) {
      const held = heldEnrolCode(target, bridge.id, bridge.installation_id);
      prefilled = !!held;
      field = codeField(held);
    }
    const emoji = await sasWith(bridge);
    // A newer draw (the devices changed meanwhile) owns the screen.
    if (mine !== drawing) return;
    clear(body);
    if (done === bridge.id) {
      drawDone(bridge);
      return;
    }
    const state = bridgeState(bridge);
    const name = deviceName(bridge);
    const button = h('button', { type: 'button', class: 'btn btn-primary', text: 'They match', onclick: (e) => confirm(bridge, e.currentTarget) });
    append(body, [
      h('p', { text: `Compare these four emoji with the ones ${name} shows (relay-bridge prints them in its terminal). Confirm only if they are the same, in the same order.` }),
      h('ol', { class: 'sas', 'aria-label': 'Verification emoji', dataset: { sas: emoji.join(' ') } }, emoji.map((e) => h('li', { text: e }))),
      state !== 'unverified' ? bridgeStatus(bridge, { command: false }) : null,
      h('label', { for: 'enrol-code', class: 'field-label', text: 'Code from the machine\'s screen' }),
      field.input,
      prefilled
        ? h('p', { id: 'enrol-hint', class: 'field-hint', text: 'Filled in from the link you opened. The machine checks it; the relay never sees it.' })
        : h('p', { id: 'enrol-hint', class: 'field-hint' }, 'relay-bridge shows it with the emoji: five groups of four letters and digits (on a machine paired earlier, ',
          h('code', { text: 'relay-bridge devices add' }), ' shows one). The machine checks it; the relay never sees it. Leave it empty if you have none: the machine\'s owner then confirms this device on the machine.'),
      field.error,
      h('div', { class: 'form-actions' },
        h('a', { class: 'btn', href: `#${origin.path(bridge)}`, text: 'They differ' }),
        button)]);
  }

  draw();
  const off = onKeys((id) => id === null && draw());
  return () => {
    off();
    if (waiting) clearInterval(waiting);
  };
}
