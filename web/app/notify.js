// Approve or deny from a notification (docs/web.md "Approve or deny from the
// notification"): the service worker's side, imported by sw.js. An approval's
// notification carries Approve and Deny; a tap on one is answered here with no
// window opened: the decision is posted with the user's token (handoff.js) and,
// in an encrypted session, signed with this device's key exactly as the page
// signs it (decision.js), so the relay still cannot make one the bridge takes.
// What could not be done, or was already done, comes back as a follow-up
// notification that says so. No DOM: this module runs in the worker.
import { get, post, useCredentials, useDevice, ApiError } from './api.js';
import { sharedAuth } from './handoff.js';
import { loadDevice } from './keystore.js';
import { signedDecision } from './decision.js';

export const ACTIONS = {
  approve: { decision: 'approve' },
  deny: { decision: 'deny' },
};

// The actions an approval's notification offers. Approve only where the person can see what
// they approve, and not for a high-severity request: that one is approved in the app, where the
// whole request (its diff, its host, its countdown) shows. Deny is always safe to offer.
// note: the push as the worker opened it; readable: whether its title and body are the request's own.
export function approvalActions(note, readable) {
  const deny = { action: 'deny', title: 'Deny' };
  if (note.severity === 'high' || !readable) return [deny, { action: 'open', title: 'Open to approve' }];
  return [{ action: 'approve', title: 'Approve' }, deny];
}

const said = (decision) => (decision === 'deny' ? 'denied' : 'approved');

// Why an answer did not go through, as a follow-up { title, body }; null when it did.
function followUpFor(err, what) {
  const code = err instanceof ApiError ? err.code : '';
  if (code === 'approval_expired') {
    return { title: `Expired: ${what}`, body: 'The request expired before your answer reached it: nothing was decided. The agent may ask again.' };
  }
  if (code === 'approval_not_found') return { title: `Not found: ${what}`, body: 'This request is no longer on the relay: nothing was decided.' };
  if (code === 'invalid_token' || (err instanceof ApiError && err.status === 401)) {
    return { title: `Sign in to answer: ${what}`, body: 'Relay is signed out on this device. Open it to sign in and answer.' };
  }
  if (code === 'e2e_unverified') return { title: `Open Relay to answer: ${what}`, body: err.message };
  if (code === 'network_error') return { title: `Not answered: ${what}`, body: 'The relay cannot be reached. Open the chat to answer when you are back online.' };
  const request = err instanceof ApiError && err.requestId ? ` (request ${err.requestId})` : '';
  return { title: `Not answered: ${what}`, body: `${err && err.message ? err.message : String(err)}${request}. Open the chat to answer.` };
}

// The session's bridge device, relative to this device (X-Relay-Device: confirmed_by_me is this device's).
async function bridgeFor(installationId, sessionId, me) {
  let installation = installationId;
  if (!installation) {
    const session = (me.sessions || []).find((s) => s.id === sessionId);
    installation = session ? session.installation_id : '';
  }
  const devices = (await get('/v1/me/devices')).devices || [];
  return devices.find((d) => d.platform === 'bridge' && !d.revoked_at && d.installation_id === installation) || null;
}

// Answers the approval a notification is about with action ('approve' or 'deny'). data: the
// notification's data (approval_id, session_id, installation_id, encrypted, title). Resolves to a
// follow-up { title, body } to show, or null when the decision was taken as this one.
export async function answerApproval(data, action) {
  const choice = ACTIONS[action];
  const what = data.title || 'a request';
  if (!choice || !data.approval_id) return { title: `Not answered: ${what}`, body: 'Open the chat to answer.' };
  try {
    const auth = await sharedAuth();
    if (!auth || !auth.token) throw new ApiError(401, { error: { code: 'invalid_token', message: 'Not signed in' } });
    useCredentials({ token: async () => auth.token, refresh: async () => false, expired: () => {} });
    useDevice(null);
    const approval = { approval_id: data.approval_id, session_id: data.session_id };
    let body = { ...choice };
    if (data.encrypted) {
      const me = await get('/v1/me');
      const device = await loadDevice(me.user ? me.user.id : auth.user_id);
      if (device && device.device_id) useDevice(device.device_id);
      body = await signedDecision(approval, device, device ? await bridgeFor(data.installation_id, data.session_id, me) : null, body);
      if (!body) {
        throw new ApiError(409, { error: { code: 'e2e_unverified', message: 'This device cannot sign decisions for this machine yet: verify the machine in Settings, Devices.' } });
      }
    }
    if (data.installation_id) body.installation_id = data.installation_id;
    const result = await post(`/v1/me/approvals/${encodeURIComponent(data.approval_id)}`, body);
    if (result.idempotent && result.decision !== choice.decision) {
      return { title: `Already answered: ${what}`, body: `It was ${said(result.decision)} before your answer: yours changed nothing.` };
    }
    if (result.idempotent) return { title: `Already ${said(result.decision)}: ${what}`, body: 'It had been answered the same way before: nothing changed.' };
    // Encrypted: relayd had a decision already and passed this one on; the bridge acts on the first that verifies.
    if (result.forwarded) {
      return { title: `Already answered: ${what}`, body: 'Another answer reached the relay first. Yours went on to the machine, which keeps the first answer it can verify.' };
    }
    return null;
  } catch (err) {
    return followUpFor(err, what);
  }
}
