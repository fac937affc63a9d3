// An approval decision as it is posted (POST /v1/me/approvals/:id), signed in an
// encrypted session (docs/api.md "Approval decisions: what is signed"). Both the
// page (e2e.js, the approval card) and the service worker (notify.js, the Approve
// and Deny actions of a notification) make their bodies here, so a decision made
// from the lock screen is signed exactly as one made in the app. No state, no DOM,
// no storage: the caller gives this device's key and the session's bridge device.
import { decisionSig, fromHex } from './crypto.js';

// device: this browser's { device_id, secret_key }; bridge: the session's bridge device as
// GET /v1/me/devices lists it ({ pubkey, confirmed_by_me }). Answers body with decision_sig and
// device_id, or null when this device cannot sign for that machine (no device yet, no bridge
// device, or a bridge this device never confirmed: the bridge would refuse the signature).
export async function signedDecision(approval, device, bridge, body) {
  if (!device || !device.device_id || !device.secret_key || !bridge || !bridge.pubkey || !bridge.confirmed_by_me) return null;
  const sig = await decisionSig(device.secret_key, fromHex(bridge.pubkey), {
    approvalId: approval.approval_id, sessionId: approval.session_id, decision: body.decision, scope: body.scope, deviceId: device.device_id,
  });
  // device_id says which device signed: the bridge recomputes the key with that device's public key.
  return { ...body, decision_sig: sig, device_id: device.device_id };
}
