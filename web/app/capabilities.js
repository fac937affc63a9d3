// Device capability requests (docs/api.md "Device capabilities"): an agent
// asks this phone for its location or a photo. The card shows the agent's
// reason and asks the user first; only then does the browser ask its own
// permission (navigator.geolocation, or the camera through a file input with
// `capture`). The answer, or a refusal, goes to POST /v1/me/capabilities/:id.
//
// The requests live here, not in state.js: they come from the events and the
// snapshot state.js passes on (topics `event:<name>` and `snapshot`), so
// neither module imports the other's store.
import { api, post, describe } from './api.js';
import { on, emit, store } from './state.js';
import { answerBody, uploadBody } from './e2e.js';
import { h, clear, toast, announce, formatCountdown } from './ui.js';

const PHOTO_BYTES_MAX = 26214400;

// request_id -> the pending entry, with status pending, answered, refused or expired.
export const requests = new Map();

const KINDS = {
  location: { title: 'Share your location?', share: 'Share location', shared: 'Location shared', answer: shareLocation },
  camera: { title: 'Share a photo?', share: 'Take photo', shared: 'Photo shared', answer: sharePhoto },
};

const OUTCOMES = { refused: 'Refused', expired: 'Expired without an answer' };

function put(request) {
  const known = requests.get(request.request_id);
  const changed = request.status !== 'pending' && (!known || known.status === 'pending');
  requests.set(request.request_id, { ...known, ...request, ...(changed ? { changed_at: Date.now() } : {}) });
  emit('capabilities', request.request_id);
}

on('event:device_capability_request', (d) => {
  put({ ...d, status: 'pending' });
  const what = d.capability === 'camera' ? 'a photo' : 'your location';
  // The card is in the request's chat: from anywhere else, say where to answer it.
  if (location.hash !== `#/s/${encodeURIComponent(d.session_id)}`) toast(`An agent asks for ${what}: open its chat to answer`);
  else announce(`The agent asks for ${what}`, true);
});
on('event:device_capability_resolved', (d) => {
  if (requests.has(d.request_id)) put({ request_id: d.request_id, status: d.status });
});
// A reload or resync: what is pending now; those no longer listed were answered or expired meanwhile.
on('snapshot', (snapshot) => {
  const listed = Array.isArray(snapshot.pending_capability_requests) ? snapshot.pending_capability_requests : [];
  for (const r of listed) put({ ...r, status: 'pending' });
  const pending = new Set(listed.map((r) => r.request_id));
  for (const r of requests.values()) {
    if (r.status === 'pending' && !pending.has(r.request_id))
      put({ request_id: r.request_id, status: r.expires_at <= Date.now() ? 'expired' : 'answered' });
  }
});

// The session a request belongs to, as far as sealing goes: an encrypted one's answer leaves sealed.
function sessionOf(request) {
  return store.sessions.get(request.session_id) || (request.encrypted ? { id: request.session_id, encrypted: true } : null);
}

async function answer(request, body, status) {
  try {
    const sealed = await answerBody(sessionOf(request), body);
    const result = await post(`/v1/me/capabilities/${encodeURIComponent(request.request_id)}`, sealed);
    put({ request_id: request.request_id, status: result.status, mine: result.idempotent ? undefined : status });
    announce(result.idempotent ? 'This request was already answered' : (status === 'refused' ? 'Refused' : 'Shared'));
  } catch (err) {
    if (err.code === 'capability_request_expired') put({ request_id: request.request_id, status: 'expired' });
    toast(describe(err), 'error');
  }
}

// The browser's own prompt comes now, after the user chose to share.
function shareLocation(request) {
  return new Promise((resolve) => {
    if (!navigator.geolocation) {
      toast('This browser cannot share a location', 'error');
      resolve();
      return;
    }
    navigator.geolocation.getCurrentPosition(
      (position) => {
        const { latitude, longitude, accuracy } = position.coords;
        answer(request, { location: { latitude, longitude, accuracy } }, 'answered').then(resolve);
      },
      (err) => {
        toast(err.code === 1 ? 'Location permission was not given: refuse, or allow it and try again' : `No location: ${err.message}`, 'error');
        resolve();
      },
      { enableHighAccuracy: true, timeout: 20000, maximumAge: 0 });
  });
}

// A photo is taken by the phone's camera app (capture) and uploaded as an attachment, then its key is the answer.
function sharePhoto(request, card) {
  return new Promise((resolve) => {
    const picker = card.querySelector('.capability-photo');
    picker.onchange = async () => {
      const file = picker.files && picker.files[0];
      picker.value = '';
      if (!file) return resolve();
      try {
        if (file.size > PHOTO_BYTES_MAX) throw new Error('The photo is larger than 25 MB');
        // In an encrypted session the photo leaves sealed and its name and type go in answer_ct.
        const photo = file.type ? file : new File([file], file.name || 'photo.jpg', { type: 'image/jpeg' });
        const sealed = await uploadBody(sessionOf(request), photo);
        const query = sealed.name ? `?name=${encodeURIComponent(sealed.name)}` : '';
        const uploaded = await api('POST', `/v1/me/attachments${query}`, { raw: sealed.raw, contentType: sealed.contentType });
        await answer(request, { attachment_key: uploaded.key, ...(sealed.meta ? { attachment: sealed.meta } : {}) }, 'answered');
      } catch (err) {
        toast(describe(err), 'error');
      }
      resolve();
    };
    picker.click();
  });
}

function cardFor(r) {
  const kind = KINDS[r.capability];
  const el = h('section', { class: `approval capability capability-${r.status}`, role: 'group',
    'aria-label': kind ? kind.title : 'Device request', dataset: { request: r.request_id, expires: String(r.expires_at || 0) } });
  el.append(h('div', { class: 'approval-head' }, h('strong', { class: 'approval-title', text: kind ? kind.title : r.capability })));
  el.append(h('p', { class: 'approval-message capability-reason', text: r.reason || '' }));
  if (r.status !== 'pending') {
    el.append(h('p', { class: 'approval-outcome', text: r.status === 'answered' ? (kind ? kind.shared : 'Shared') : OUTCOMES[r.status] || r.status }));
    return el;
  }
  el.append(h('div', { class: 'countdown', 'aria-live': 'off' }));
  const buttons = [];
  const busy = (on) => { for (const b of buttons) b.disabled = on; };
  if (kind) {
    buttons.push(h('button', { type: 'button', class: 'btn btn-primary', dataset: { choice: 'share' }, text: kind.share,
      onclick: () => { busy(true); kind.answer(r, el).finally(() => busy(false)); } }));
  }
  buttons.push(h('button', { type: 'button', class: 'btn btn-danger', dataset: { choice: 'refuse' }, text: 'Refuse',
    onclick: () => { busy(true); answer(r, { refused: true }, 'refused').finally(() => busy(false)); } }));
  el.append(h('div', { class: 'approval-actions' }, buttons));
  if (r.capability === 'camera')
    el.append(h('input', { type: 'file', accept: 'image/*', capture: 'environment', class: 'sr-only capability-photo', tabindex: '-1', 'aria-hidden': 'true' }));
  tick(el);
  return el;
}

function tick(el) {
  const counter = el.querySelector('.countdown');
  if (!counter) return;
  const left = Number(el.dataset.expires) - Date.now();
  counter.textContent = left > 0 ? `Expires in ${formatCountdown(left)}` : 'Expiring…';
}

// The requests of one session, above its composer: the pending ones, and the last one answered while it is open.
export function capabilityTray(sessionId) {
  // No label of its own: each card is a labelled group, and an empty tray says nothing.
  const el = h('div', { class: 'capability-tray' });
  const shownAt = Date.now();
  const signatures = new Map();

  function draw() {
    const ours = [...requests.values()].filter((r) => r.session_id === sessionId);
    // Only the latest outcome stays in view, so that answered requests do not pile up above the composer.
    const latest = ours.filter((r) => r.status !== 'pending' && r.changed_at >= shownAt)
      .sort((a, b) => b.changed_at - a.changed_at)[0];
    const mine = ours.filter((r) => r.status === 'pending' || r === latest);
    const signature = mine.map((r) => `${r.request_id}:${r.status}`).join(',');
    if (signatures.get('all') === signature) return;
    signatures.set('all', signature);
    clear(el);
    for (const r of mine) el.append(cardFor(r));
  }

  const off = on('capabilities', draw);
  const ticker = setInterval(() => { for (const card of el.querySelectorAll('.capability-pending')) tick(card); }, 1000);
  draw();
  return { el, dispose: () => { off(); clearInterval(ticker); } };
}
