// Where this browser keeps its end-to-end keys: IndexedDB, database
// "relay-e2e" (docs/web.md "End-to-end encryption"). Two stores:
//   devices   by user_id: { user_id, device_id, public_key (hex), secret_key (32 bytes) }
//             this browser's X25519 key pair for that account; the secret never leaves it.
//   sessions  by session_id: { session_id, keys: [{ key (32 bytes), at }] } newest first;
//             a rotated session keeps its old keys, to read what they sealed.
// The service worker (sw.js) reads the sessions store with the same names to open a
// push's text: change them in both places.
const DB_NAME = 'relay-e2e';
const DB_VERSION = 1;

let opening = null;

function db() {
  if (!opening) {
    opening = new Promise((resolve, reject) => {
      const req = indexedDB.open(DB_NAME, DB_VERSION);
      req.onupgradeneeded = () => {
        const d = req.result;
        if (!d.objectStoreNames.contains('devices')) d.createObjectStore('devices', { keyPath: 'user_id' });
        if (!d.objectStoreNames.contains('sessions')) d.createObjectStore('sessions', { keyPath: 'session_id' });
      };
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    opening.catch(() => {
      opening = null;
    });
  }
  return opening;
}

async function run(store, mode, fn) {
  const d = await db();
  return new Promise((resolve, reject) => {
    const tx = d.transaction(store, mode);
    let result;
    const req = fn(tx.objectStore(store));
    if (req) req.onsuccess = () => {
      result = req.result;
    };
    tx.oncomplete = () => resolve(result);
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error);
  });
}

export const loadDevice = (userId) => run('devices', 'readonly', (s) => s.get(userId));
export const saveDevice = (record) => run('devices', 'readwrite', (s) => s.put(record));
export const forgetDevice = (userId) => run('devices', 'readwrite', (s) => s.delete(userId));

export async function loadSessionKeys() {
  const all = (await run('sessions', 'readonly', (s) => s.getAll())) || [];
  return new Map(all.map((r) => [r.session_id, r.keys]));
}

const hex = (k) => Array.from(k, (b) => b.toString(16).padStart(2, '0')).join('');

// Where a granted key goes in a session's list (docs/api.md "Signed grants"), by how far it is trusted:
//   signed    grant_sig verifies (a bridge this device confirmed, or this device itself): the newest key, it seals;
//   unsigned  no grant_sig (the authors' bridge, the keys route): taken only as the first key of a session;
//   peer      another client device of the user (no signature a client can check): the first key of a session,
//             else the oldest, to read what it sealed, never to seal with;
//   forged    a grant_sig that does not verify, or a signer this device did not confirm: never taken.
// keys is newest first ({ key, at }); the answer { keys, taken }: 'seal', 'read', 'known' or 'refused'.
export function placeGrant(keys, key, trust, now) {
  keys = keys || [];
  if (keys.some((k) => hex(k.key) === hex(key))) return { keys, taken: 'known' };
  if (trust === 'forged' || (keys.length > 0 && trust === 'unsigned')) return { keys, taken: 'refused' };
  if (trust === 'signed' || keys.length === 0) {
    // Newest whatever `at` the relay gave the others: this one seals.
    const at = Math.max(now, keys.length ? keys[0].at + 1 : 0);
    return { keys: [{ key, at }, ...keys], taken: 'seal' };
  }
  if (trust === 'peer') return { keys: [...keys, { key, at: keys[keys.length - 1].at - 1 }], taken: 'read' };
  return { keys, taken: 'refused' };
}

// Places a key in a session's list (placeGrant; a key this device made itself is 'signed'). Answers { keys, taken }.
export async function addSessionKey(sessionId, key, now, trust = 'signed') {
  const d = await db();
  return new Promise((resolve, reject) => {
    const tx = d.transaction('sessions', 'readwrite');
    const s = tx.objectStore('sessions');
    let placed = { keys: [], taken: 'refused' };
    const req = s.get(sessionId);
    req.onsuccess = () => {
      placed = placeGrant((req.result && req.result.keys) || [], key, trust, now);
      if (placed.taken === 'seal' || placed.taken === 'read') s.put({ session_id: sessionId, keys: placed.keys });
    };
    tx.oncomplete = () => resolve(placed);
    tx.onerror = () => reject(tx.error);
  });
}
