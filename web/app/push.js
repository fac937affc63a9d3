// The service worker and Web Push from the page's side: registering the
// worker, and subscribing this browser with the relay's VAPID key.
import { auth } from './auth.js';
import { post, del } from './api.js';

export async function registerWorker() {
  if (!('serviceWorker' in navigator)) return null;
  try {
    return await navigator.serviceWorker.register('/sw.js', { scope: '/' });
  } catch (err) {
    console.warn('relay: the service worker could not be registered', err);
    return null;
  }
}

function keyBytes(b64) {
  const text = atob(b64.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

export function pushSupported() {
  return 'serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window;
}

// 'on', 'off', 'denied' or 'unsupported'.
export async function pushStatus() {
  if (!pushSupported()) return 'unsupported';
  if (Notification.permission === 'denied') return 'denied';
  const registration = await navigator.serviceWorker.ready;
  const subscription = await registration.pushManager.getSubscription();
  return subscription && localStorage.getItem('relay.push') === subscription.endpoint ? 'on' : 'off';
}

export async function enablePush() {
  const config = await auth.loadConfig();
  if (!config.push || !config.push.vapid_public_key) throw new Error('This relay does not send notifications.');
  const permission = await Notification.requestPermission();
  if (permission !== 'granted') throw new Error('Notifications are blocked for this site in the browser settings.');
  const registration = await navigator.serviceWorker.ready;
  let subscription = await registration.pushManager.getSubscription();
  const key = keyBytes(config.push.vapid_public_key);
  // A subscription made for another relay key would never deliver: start over.
  if (subscription && subscription.options && subscription.options.applicationServerKey) {
    const old = new Uint8Array(subscription.options.applicationServerKey);
    if (old.length !== key.length || old.some((b, i) => b !== key[i])) {
      await subscription.unsubscribe();
      subscription = null;
    }
  }
  if (!subscription)
    subscription = await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
  const json = subscription.toJSON();
  await post('/v1/me/push-subscriptions', { endpoint: json.endpoint, keys: json.keys });
  localStorage.setItem('relay.push', json.endpoint);
}

export async function disablePush() {
  const endpoint = localStorage.getItem('relay.push');
  localStorage.removeItem('relay.push');
  if (pushSupported()) {
    const registration = await navigator.serviceWorker.ready;
    const subscription = await registration.pushManager.getSubscription();
    if (subscription) await subscription.unsubscribe().catch(() => {});
  }
  if (endpoint && auth.signedIn()) await del('/v1/me/push-subscriptions', { endpoint }).catch(() => {});
}
