// The screens of end-to-end encryption (docs/web.md): Settings' list of the
// account's devices (this browser, other phones and browsers, the machines'
// bridges) with Verify and Revoke, and the Verify screen, where the person
// compares the four emoji this browser shows with the four the machine prints
// and confirms only if they are the same. Until then the machine gets no key
// from this device and new chats on it are not encrypted (e2e.js).
import { describe } from './api.js';
import { store, installationName, emit } from './state.js';
import { h, clear, toast, ask, announce } from './ui.js';
import { e2e, refreshDevices, sasWith, confirmBridge, revoke, onKeys } from './e2e.js';

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
      if (d.platform === 'bridge') {
        actions.push(d.confirmed_by_me
          ? h('span', { class: 'pill pill-lock', text: 'Verified' })
          : h('a', { class: 'btn btn-primary btn-small', href: `#/verify/${encodeURIComponent(d.id)}`, text: 'Verify',
            'aria-label': `Verify ${deviceName(d)}` }));
      }
      if (d.id !== mine) {
        actions.push(h('button', { type: 'button', class: 'btn btn-small btn-danger', text: 'Revoke', 'aria-label': `Revoke ${deviceName(d)}`,
          onclick: () => revokeDevice(d) }));
      }
      list.append(h('li', { class: 'card device-item', dataset: { device: d.id } },
        h('span', { class: 'device-text' },
          h('strong', { text: `${deviceName(d)}${d.id === mine ? ' (this device)' : ''}` }),
          h('span', { class: 'device-sub', text: `${platformName(d)} · ${d.id}` })),
        actions));
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

// The Verify screen for one bridge device.
export function verifyView(main, bridgeDeviceId) {
  const body = h('div');
  main.append(h('div', { class: 'screen' }, h('h1', { text: 'Verify a machine' }), body));

  async function draw() {
    clear(body);
    const bridge = e2e.devices.find((d) => d.id === bridgeDeviceId && d.platform === 'bridge');
    if (!e2e.device || !bridge) {
      body.append(h('p', { text: e2e.device ? 'This machine has no encryption key registered, or it was revoked.' : 'This device is still being set up.' }),
        h('a', { class: 'btn', href: '#/settings', text: 'Back to Settings' }));
      return;
    }
    const emoji = await sasWith(bridge);
    body.append(
      h('p', { text: `Compare these four emoji with the ones ${deviceName(bridge)} shows (relay-bridge prints them in its terminal). Confirm only if they are the same, in the same order.` }),
      h('ol', { class: 'sas', 'aria-label': 'Verification emoji', dataset: { sas: emoji.join(' ') } }, emoji.map((e) => h('li', { text: e }))),
      bridge.confirmed_by_me ? h('p', { class: 'pill pill-lock', text: 'Verified' }) : null,
      h('div', { class: 'form-actions' },
        h('a', { class: 'btn', href: '#/settings', text: 'They differ' }),
        bridge.confirmed_by_me ? null : h('button', { type: 'button', class: 'btn btn-primary', text: 'They match', onclick: async (e) => {
          e.currentTarget.disabled = true;
          try {
            await confirmBridge(bridge.id);
            announce(`${deviceName(bridge)} verified`);
            location.hash = '#/settings';
          } catch (err) {
            toast(describe(err), 'error');
            draw();
          }
        } })));
  }

  draw();
  return onKeys((id) => id === null && draw());
}
