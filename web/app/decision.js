// What this device signs for a bridge, as it is posted: an approval decision
// (POST /v1/me/approvals/:id, docs/api.md "Approval decisions: what is signed")
// and a change of a session's mode, model or other option (POST
// /v1/me/sessions/:id/config, docs/api.md "Steering"), each signed in an
// encrypted session. Both the page (e2e.js, the approval card and the chat's
// pickers) and the service worker (notify.js, the Approve and Deny actions of a
// notification) make their bodies here, so a decision made from the lock screen
// is signed exactly as one made in the app. No state, no DOM, no storage: the
// caller gives this device's key and the session's bridge device.
import { decisionSig, configSig, fromHex } from './crypto.js';

// device: this browser's { device_id, secret_key }; bridge: the session's bridge device as
// GET /v1/me/devices lists it ({ pubkey, confirmed_by_me }). Whether this device can sign for that
// machine: not without a device yet, a bridge device, or a bridge this device never confirmed (the
// bridge would refuse the signature).
function canSign(device, bridge) {
  return !!(device && device.device_id && device.secret_key && bridge && bridge.pubkey && bridge.confirmed_by_me);
}

// Answers body with decision_sig and device_id, or null when this device cannot sign for that machine.
export async function signedDecision(approval, device, bridge, body) {
  if (!canSign(device, bridge)) return null;
  const sig = await decisionSig(device.secret_key, fromHex(bridge.pubkey), {
    approvalId: approval.approval_id, sessionId: approval.session_id, decision: body.decision, scope: body.scope, deviceId: device.device_id,
  });
  // device_id says which device signed: the bridge recomputes the key with that device's public key.
  return { ...body, decision_sig: sig, device_id: device.device_id };
}

// A config change's body {option: {id, value}, device_id, config_sig, ts}, or null when this device cannot
// sign for that machine. ts (ms, the relay's clock as well as the page knows it) must be newer than the
// last change the bridge took for the session and within five minutes of its clock.
export async function signedConfig(sessionId, option, device, bridge, ts) {
  if (!canSign(device, bridge)) return null;
  const stamp = Math.floor(ts);
  const sig = await configSig(device.secret_key, fromHex(bridge.pubkey), {
    sessionId, optionId: option.id, value: option.value, ts: stamp, deviceId: device.device_id,
  });
  return { option: { id: option.id, value: option.value }, device_id: device.device_id, config_sig: sig, ts: stamp };
}
