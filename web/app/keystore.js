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

// Adds a key to a session's list (newest first by `at`); a key already there is not added twice.
export async function addSessionKey(sessionId, key, at) {
  const d = await db();
  return new Promise((resolve, reject) => {
    const tx = d.transaction('sessions', 'readwrite');
    const s = tx.objectStore('sessions');
    let keys = [];
    const req = s.get(sessionId);
    req.onsuccess = () => {
      keys = (req.result && req.result.keys) || [];
      const hex = (k) => Array.from(k, (b) => b.toString(16).padStart(2, '0')).join('');
      if (!keys.some((k) => hex(k.key) === hex(key))) {
        keys = [...keys, { key, at }].sort((a, b) => b.at - a.at);
        s.put({ session_id: sessionId, keys });
      }
    };
    tx.oncomplete = () => resolve(keys);
    tx.onerror = () => reject(tx.error);
  });
}
