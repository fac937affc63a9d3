#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bridge/enrol.h"
#include "bridge/keyring.h"
#include "client/credentials.h"
#include "common/base64.h"
#include "common/log.h"
#include "e2e/keystore.h"

#define DEVICE_FILE   "bridge-device"
#define SESSIONS_FILE "bridge-session-keys"
#define PEERS_FILE    "bridge-devices"

struct rl_keyring {
    rl_device_key_t device;
    char device_path[3200];
    char pubkey[RL_E2E_PUBHEX_SIZE];
    rl_keystore_t *sessions;
    json_t *peers;    /* {device_id: {pubkey, label, platform, verified, verified_at}}: the accepted devices */
    json_t *pending;  /* {device_id: {pubkey, label, platform, phone_confirmed?, reverify?, held?}}: not accepted */
    json_t *received; /* [{session_id, by}]: keys taken from held grants, for the bridge to pass on */
};

static int save_peers(const rl_keyring_t *k);
static void take_held(rl_keyring_t *k, const char *device_id, json_t *pending);

/* The pending devices as saved: {id: pubkey} before this version, {id: {pubkey, ...}} since. */
static void load_pending(rl_keyring_t *k, json_t *saved)
{
    const char *id;
    json_t *item;

    json_object_foreach(saved, id, item)
    {
        if (json_is_string(item))
            json_object_set_new(k->pending, id, json_pack("{s:O}", "pubkey", item));
        else if (json_is_string(json_object_get(item, "pubkey")))
            json_object_set(k->pending, id, item);
    }
}

/*
 * A device accepted before the bridge asked for evidence was accepted on the
 * relay's word alone (device_added): it waits again, its decisions and grants
 * refused, until its owner confirms it on this machine or it brings a code.
 */
static void demote_unverified(rl_keyring_t *k)
{
    const char *id;
    json_t *peer;
    void *tmp;

    json_object_foreach_safe(k->peers, tmp, id, peer)
    {
        if (json_is_string(json_object_get(peer, "verified")))
            continue;
        rl_log(RL_LOG_WARN,
               "device %s (%s) was accepted by an older relay-bridge on the relay's word alone: it gets no keys "
               "until you confirm it again (relay-bridge devices confirm %s, or a code from relay-bridge devices add)",
               id, json_string_value(json_object_get(peer, "label")), id);
        json_object_set_new(peer, "reverify", json_true());
        json_object_set_new(peer, "phone_confirmed", json_true());
        json_object_set(k->pending, id, peer);
        json_object_del(k->peers, id);
    }
}

static rl_keyring_t *open_keyring(int writable, char *err, size_t errsz)
{
    rl_keyring_t *k = calloc(1, sizeof(*k));
    char path[3200];
    json_t *saved;
    int result;

    if (k == NULL) {
        snprintf(err, errsz, "out of memory");
        return NULL;
    }
    if (rl_e2e_init() != 0) {
        snprintf(err, errsz, "libsodium could not start");
        goto fail;
    }
    if (rl_credentials_path(DEVICE_FILE, k->device_path, sizeof(k->device_path)) != 0 ||
        rl_credentials_path(SESSIONS_FILE, path, sizeof(path)) != 0) {
        snprintf(err, errsz, "no config folder (set HOME or RELAY_CONFIG_DIR)");
        goto fail;
    }
    /* The folder may not exist yet on a fresh machine: saving an empty peers file makes it (0700). */
    saved = rl_credentials_load(PEERS_FILE);
    if (saved == NULL && errno == EPERM) {
        snprintf(err, errsz, "%s.json may be read by others: fix its mode (chmod 600)", PEERS_FILE);
        goto fail;
    }
    k->peers = json_is_object(json_object_get(saved, "devices")) ? json_incref(json_object_get(saved, "devices"))
                                                                 : json_object();
    k->pending = json_object();
    k->received = json_array();
    load_pending(k, json_object_get(saved, "pending"));
    json_decref(saved);
    demote_unverified(k);
    if (writable && save_peers(k) != 0) {
        snprintf(err, errsz, "cannot write in the config folder: %s", strerror(errno));
        goto fail;
    }
    result = rl_device_key_load(k->device_path, writable, &k->device);
    if (result < 0) {
        snprintf(err, errsz, "%s: %s", k->device_path,
                 result == RL_E2E_E_FORMAT ? "not a device key, or readable by others (chmod 600)" : "unreadable");
        goto fail;
    }
    if (result == 1)
        rl_log(RL_LOG_INFO, "made this bridge's device key (%s)", k->device_path);

    rl_e2e_pub_hex(k->device.kp.pub, k->pubkey);
    k->sessions = rl_keystore_load(path);
    if (k->sessions == NULL) {
        snprintf(err, errsz, "%s: not a session key store, or readable by others (chmod 600)", path);
        goto fail;
    }
    return k;
fail:
    rl_keyring_free(k);
    return NULL;
}

rl_keyring_t *rl_keyring_open(char *err, size_t errsz)
{
    return open_keyring(1, err, errsz);
}

rl_keyring_t *rl_keyring_peek(char *err, size_t errsz)
{
    return open_keyring(0, err, errsz);
}

json_t *rl_keyring_devices(const rl_keyring_t *k)
{
    json_t *list = json_array(), *item;
    const char *id;

    json_object_foreach(k->peers, id, item)
    {
        json_t *row = json_deep_copy(item);
        json_object_set_new(row, "device_id", json_string(id));
        json_object_set_new(row, "state", json_string("accepted"));
        json_array_append_new(list, row);
    }
    json_object_foreach(k->pending, id, item)
    {
        char sas[RL_E2E_SAS_TEXT_SIZE];
        json_t *row = json_deep_copy(item);
        json_object_set_new(row, "device_id", json_string(id));
        json_object_set_new(row, "state", json_string("waiting"));
        if (rl_keyring_sas(k, json_string_value(json_object_get(item, "pubkey")), sas) == 0)
            json_object_set_new(row, "sas", json_string(sas));
        json_array_append_new(list, row);
    }
    return list;
}

void rl_keyring_free(rl_keyring_t *k)
{
    if (k == NULL)
        return;
    rl_keystore_free(k->sessions);
    json_decref(k->peers);
    json_decref(k->pending);
    json_decref(k->received);
    rl_device_key_wipe(&k->device);
    free(k);
}

const char *rl_keyring_pubkey(const rl_keyring_t *k)
{
    return k->pubkey;
}

const char *rl_keyring_device_id(const rl_keyring_t *k)
{
    return k->device.device_id;
}

void rl_keyring_set_device_id(rl_keyring_t *k, const char *device_id)
{
    if (strcmp(k->device.device_id, device_id) == 0)
        return;
    snprintf(k->device.device_id, sizeof(k->device.device_id), "%s", device_id);
    if (rl_device_key_save(k->device_path, &k->device) != 0)
        rl_log(RL_LOG_WARN, "could not save the device id in %s", k->device_path);
}

int rl_keyring_sas(const rl_keyring_t *k, const char *pubkey, char out[RL_E2E_SAS_TEXT_SIZE])
{
    uint8_t pub[RL_E2E_KEY_LEN], sas[RL_E2E_SAS_LEN];

    if (rl_e2e_pub_parse(pubkey, pub) != 0 || rl_e2e_sas(k->device.kp.sec, pub, sas) != 0)
        return -1;
    rl_e2e_sas_text(sas, out);
    return 0;
}

static int save_peers(const rl_keyring_t *k)
{
    json_t *doc = json_pack("{s:O, s:O}", "devices", k->peers, "pending", k->pending);
    int result = doc != NULL ? rl_credentials_save(PEERS_FILE, doc) : -1;

    json_decref(doc);
    return result;
}

int rl_keyring_pending(rl_keyring_t *k, const char *device_id, const char *pubkey, const char *label,
                       const char *platform)
{
    uint8_t pub[RL_E2E_KEY_LEN];
    json_t *was;

    if (device_id == NULL || device_id[0] == '\0' || rl_e2e_pub_parse(pubkey, pub) != 0)
        return -1;
    was = json_object_get(k->peers, device_id);
    /* Already accepted with this key: a redelivered device_pending changes nothing. */
    if (was != NULL && strcmp(json_string_value(json_object_get(was, "pubkey")), pubkey) == 0)
        return 0;
    was = json_object_get(k->pending, device_id);
    /* A repeated device_pending (a redelivery) keeps what the phone said since, for the same key. */
    if (was != NULL && strcmp(json_string_value(json_object_get(was, "pubkey")), pubkey) == 0)
        return 0;
    json_object_set_new(k->pending, device_id,
                        json_pack("{s:s, s:s, s:s}", "pubkey", pubkey, "label", label != NULL ? label : "", "platform",
                                  platform != NULL ? platform : ""));
    return save_peers(k);
}

/* Moves a pending device to the accepted ones, saying how it was verified. 0 or -1 (not saved). */
static int accept_pending(rl_keyring_t *k, const char *device_id, const char *how)
{
    json_t *pending = json_object_get(k->pending, device_id);
    json_t *peer;

    if (pending == NULL)
        return -1;
    peer = json_pack("{s:O, s:s, s:s, s:s, s:I}", "pubkey", json_object_get(pending, "pubkey"), "label",
                     json_string_value(json_object_get(pending, "label")) != NULL
                         ? json_string_value(json_object_get(pending, "label"))
                         : "",
                     "platform",
                     json_string_value(json_object_get(pending, "platform")) != NULL
                         ? json_string_value(json_object_get(pending, "platform"))
                         : "",
                     "verified", how, "verified_at", (json_int_t)time(NULL));
    take_held(k, device_id, pending);
    json_object_set_new(k->peers, device_id, peer);
    json_object_del(k->pending, device_id);
    return save_peers(k);
}

/* 1 when the owner file confirms device_id with exactly pubkey. */
static int owner_confirmed(const char *device_id, const char *pubkey)
{
    json_t *owner = rl_enrol_owner_load();
    const char *said = json_string_value(json_object_get(json_object_get(owner, "confirmed"), device_id));
    int result = said != NULL && strcmp(said, pubkey) == 0;

    json_decref(owner);
    return result;
}

int rl_keyring_accept(rl_keyring_t *k, const char *device_id, const char *pubkey, const char *label,
                      const char *platform, const char *enrol_proof)
{
    uint8_t pub[RL_E2E_KEY_LEN], shown[RL_E2E_KEY_LEN];
    json_t *peer, *pending;

    if (device_id == NULL || device_id[0] == '\0' || rl_e2e_pub_parse(pubkey, pub) != 0)
        return -1;
    peer = json_object_get(k->peers, device_id);
    if (peer != NULL)
        return strcmp(json_string_value(json_object_get(peer, "pubkey")), pubkey) == 0 ? 1 : -2;
    pending = json_object_get(k->pending, device_id);
    if (rl_e2e_pub_parse(json_string_value(json_object_get(pending, "pubkey")), shown) != 0 ||
        memcmp(pub, shown, sizeof(pub)) != 0)
        return -2;
    if (label != NULL && label[0] != '\0')
        json_object_set_new(pending, "label", json_string(label));
    if (platform != NULL && platform[0] != '\0')
        json_object_set_new(pending, "platform", json_string(platform));
    /* spec (ours, docs/api.md "A device the machine accepted"): evidence the relay cannot make, or no keys. */
    if (rl_enrol_code_spend(k->device.device_id, device_id, pubkey, enrol_proof) == 0)
        return accept_pending(k, device_id, "code") == 0 ? 0 : -1;
    if (owner_confirmed(device_id, pubkey))
        return accept_pending(k, device_id, "owner") == 0 ? 0 : -1;
    json_object_set_new(pending, "phone_confirmed", json_true());
    save_peers(k);
    return -3;
}

int rl_keyring_owner_sync(rl_keyring_t *k, void (*accepted)(void *user, const char *device_id), void *user)
{
    json_t *owner = rl_enrol_owner_load(), *item;
    const char *id;
    size_t i;
    int changed = 0;

    if (owner == NULL)
        return -1;
    json_array_foreach(json_object_get(owner, "revoked"), i, item)
    {
        if (json_is_string(item) && (json_object_get(k->peers, json_string_value(item)) != NULL ||
                                     json_object_get(k->pending, json_string_value(item)) != NULL)) {
            rl_log(RL_LOG_INFO, "device %s revoked on this machine: its decisions and grants no longer count",
                   json_string_value(item));
            rl_keyring_revoke(k, json_string_value(item));
        }
    }
    json_object_foreach(json_object_get(owner, "confirmed"), id, item)
    {
        json_t *pending = json_object_get(k->pending, id);
        if (pending == NULL || !json_is_string(item) ||
            strcmp(json_string_value(json_object_get(pending, "pubkey")), json_string_value(item)) != 0)
            continue;
        if (accept_pending(k, id, "owner") != 0) {
            rl_log(RL_LOG_WARN, "device %s: confirmed on this machine, but the list could not be saved", id);
            continue;
        }
        changed++;
        if (accepted != NULL)
            accepted(user, id);
    }
    json_decref(owner);
    return changed;
}

int rl_keyring_revoke(rl_keyring_t *k, const char *device_id)
{
    if (device_id == NULL)
        return 0;
    json_object_del(k->pending, device_id);
    if (json_object_get(k->peers, device_id) == NULL)
        return 0;
    json_object_del(k->peers, device_id);
    if (save_peers(k) != 0)
        rl_log(RL_LOG_WARN, "could not save the list of accepted devices");
    return 1;
}

int rl_keyring_accepted(const rl_keyring_t *k, const char *device_id)
{
    return device_id != NULL && json_object_get(k->peers, device_id) != NULL;
}

/*
 * The checks of a grant by device by whose key is pub (hex): 0 with the
 * unwrapped session key in key, or -1 with *why.
 */
static int check_grant(const rl_keyring_t *k, const char *session_id, const char *wrapped, const char *by,
                       const char *pubhex, const char *sig, uint8_t key[RL_E2E_KEY_LEN], const char **why)
{
    uint8_t pub[RL_E2E_KEY_LEN];

    if (sig == NULL || sig[0] == '\0')
        *why = "no grant_sig";
    else if (rl_e2e_pub_parse(pubhex, pub) != 0)
        *why = "the device's key is malformed";
    else if (rl_e2e_grant_verify(k->device.kp.sec, pub, session_id, wrapped, by, sig) != 0)
        *why = "grant_sig does not verify";
    else if (rl_e2e_unwrap_key(k->device.kp.sec, wrapped, key) != 0)
        *why = "the key does not unwrap with this bridge's key";
    else
        return 0;
    return -1;
}

/*
 * A grant of a device that waits for this machine's word: kept (at most
 * HELD_MAX a device, the newest), so that a chat begun on the device before
 * its owner confirmed it here opens once it is accepted. Nothing is taken
 * from it before then.
 */
#define HELD_MAX 32

static int hold_grant(rl_keyring_t *k, json_t *pending, const char *session_id, const char *wrapped, const char *sig)
{
    json_t *held = json_object_get(pending, "held");

    if (!json_is_array(held)) {
        held = json_array();
        json_object_set_new(pending, "held", held);
    }
    while (json_array_size(held) >= HELD_MAX)
        json_array_remove(held, 0);
    json_array_append_new(
        held, json_pack("{s:s, s:s, s:s}", "session_id", session_id, "wrapped_session_key", wrapped, "grant_sig", sig));
    return save_peers(k);
}

int rl_keyring_grant(rl_keyring_t *k, const char *session_id, const char *wrapped, const char *by, const char *sig,
                     const char **why)
{
    json_t *peer = by != NULL ? json_object_get(k->peers, by) : NULL;
    json_t *pending = by != NULL ? json_object_get(k->pending, by) : NULL;
    uint8_t key[RL_E2E_KEY_LEN];
    int result = -1;

    if (session_id == NULL || wrapped == NULL) {
        *why = "malformed grant";
    } else if (peer == NULL && pending != NULL) {
        if (check_grant(k, session_id, wrapped, by, json_string_value(json_object_get(pending, "pubkey")), sig, key,
                        why) == 0 &&
            hold_grant(k, pending, session_id, wrapped, sig) == 0) {
            *why = "the device waits for this machine's word (relay-bridge devices confirm, or a code): held until "
                   "then";
            result = 1;
        }
    } else if (peer == NULL) {
        *why = "not wrapped by a device this bridge accepted (unconfirmed, revoked or none named)";
    } else if (check_grant(k, session_id, wrapped, by, json_string_value(json_object_get(peer, "pubkey")), sig, key,
                           why) != 0) {
        /* why says which check failed */
    } else if (rl_keystore_add(k->sessions, session_id, key) < 0) {
        *why = "the key could not be saved";
    } else {
        result = 0;
    }
    rl_e2e_wipe(key, sizeof(key));
    return result;
}

/* The held grants of a device just accepted: taken now (checked again), their sessions noted for the bridge. */
static void take_held(rl_keyring_t *k, const char *device_id, json_t *pending)
{
    json_t *item;
    size_t i;

    json_array_foreach(json_object_get(pending, "held"), i, item)
    {
        const char *sid = json_string_value(json_object_get(item, "session_id")), *why = NULL;
        uint8_t key[RL_E2E_KEY_LEN];
        if (sid != NULL &&
            check_grant(k, sid, json_string_value(json_object_get(item, "wrapped_session_key")), device_id,
                        json_string_value(json_object_get(pending, "pubkey")),
                        json_string_value(json_object_get(item, "grant_sig")), key, &why) == 0 &&
            rl_keystore_add(k->sessions, sid, key) >= 0)
            json_array_append_new(k->received, json_pack("{s:s, s:s}", "session_id", sid, "by", device_id));
        rl_e2e_wipe(key, sizeof(key));
    }
}

json_t *rl_keyring_take_received(rl_keyring_t *k)
{
    json_t *taken = k->received;

    k->received = json_array();
    return taken;
}

int rl_keyring_create(rl_keyring_t *k, const char *session_id)
{
    uint8_t key[RL_E2E_KEY_LEN];
    int result;

    rl_e2e_session_key_new(key);
    result = rl_keystore_add(k->sessions, session_id, key) < 0 ? RL_E2E_E_IO : 0;
    rl_e2e_wipe(key, sizeof(key));
    return result;
}

int rl_keyring_has(const rl_keyring_t *k, const char *session_id)
{
    return rl_keystore_key(k->sessions, session_id, 0) != NULL;
}

size_t rl_keyring_sessions(const rl_keyring_t *k)
{
    return rl_keystore_count(k->sessions);
}

const char *rl_keyring_session(const rl_keyring_t *k, size_t i)
{
    return rl_keystore_session(k->sessions, i);
}

json_t *rl_keyring_recipients(const rl_keyring_t *k, const char *session_id, const char *device_id, const char *except)
{
    const uint8_t *key = rl_keystore_key(k->sessions, session_id, 0);
    json_t *list, *body, *peer;
    const char *id;

    if (key == NULL)
        return NULL;
    list = json_array();
    json_object_foreach(k->peers, id, peer)
    {
        uint8_t pub[RL_E2E_KEY_LEN];
        char *wrapped;
        if ((device_id != NULL && strcmp(id, device_id) != 0) || (except != NULL && strcmp(id, except) == 0))
            continue;
        if (rl_e2e_pub_parse(json_string_value(json_object_get(peer, "pubkey")), pub) != 0)
            continue;
        wrapped = rl_e2e_wrap(pub, key, RL_E2E_KEY_LEN);
        if (wrapped != NULL) {
            char sig[RL_E2E_SIG_SIZE];
            json_t *item = json_pack("{s:s, s:s}", "device_id", id, "wrapped_session_key", wrapped);
            /* Signed as the clients sign theirs: a phone takes a key as its sealing key only from a bridge it
             * confirmed. */
            if (item != NULL && k->device.device_id[0] != '\0' &&
                rl_e2e_grant_sig(k->device.kp.sec, pub, session_id, wrapped, k->device.device_id, sig) == 0)
                json_object_set_new(item, "grant_sig", json_string(sig));
            json_array_append_new(list, item);
        }
        free(wrapped);
    }
    if (json_array_size(list) == 0) {
        json_decref(list);
        return NULL;
    }
    body = json_pack("{s:s, s:o}", "session_id", session_id, "recipients", list);
    if (body != NULL && k->device.device_id[0] != '\0')
        json_object_set_new(body, "wrapped_by_device_id", json_string(k->device.device_id));
    return body;
}

char *rl_keyring_seal(const rl_keyring_t *k, const char *session_id, const char *kind, const void *plain, size_t len)
{
    char path[160];

    if (rl_e2e_path(path, sizeof(path), kind, session_id) != 0)
        return NULL;
    return rl_keystore_seal_field(k->sessions, session_id, path, plain, len);
}

int rl_keyring_open_field(const rl_keyring_t *k, const char *session_id, const char *kind, const char *b64, char **out)
{
    char path[160];

    if (b64 == NULL || rl_e2e_path(path, sizeof(path), kind, session_id) != 0)
        return RL_E2E_E_FORMAT;
    return rl_keystore_open_field(k->sessions, session_id, path, b64, out, NULL);
}

char *rl_keyring_seal_path(const rl_keyring_t *k, const char *session_id, const char *path, const void *plain,
                           size_t len)
{
    return rl_keystore_seal_field(k->sessions, session_id, path, plain, len);
}

int rl_keyring_open_path(const rl_keyring_t *k, const char *session_id, const char *path, const char *b64, char **out)
{
    return b64 != NULL ? rl_keystore_open_field(k->sessions, session_id, path, b64, out, NULL) : RL_E2E_E_FORMAT;
}

int rl_keyring_open_bytes(const rl_keyring_t *k, const char *session_id, const char *kind, const void *envelope,
                          size_t len, char **out, size_t *outlen)
{
    char path[160], *b64;
    int result;

    if (rl_e2e_path(path, sizeof(path), kind, session_id) != 0 || len > ((size_t)1 << 30))
        return RL_E2E_E_FORMAT;
    /* The key store opens base64 envelopes (every other field is one): the bytes are encoded once for it. */
    if ((b64 = malloc(RL_BASE64_ENCODED_SIZE(len))) == NULL)
        return RL_E2E_E_FORMAT;
    rl_base64_encode(envelope, len, b64);
    result = rl_keystore_open_field(k->sessions, session_id, path, b64, out, outlen);
    free(b64);
    return result;
}

int rl_keyring_file_index(const rl_keyring_t *k, const char *session_id, const char *path,
                          char out[RL_E2E_BLIND_IDX_SIZE])
{
    const uint8_t *key = rl_keystore_key(k->sessions, session_id, 0);
    const char *inputs[] = {session_id, path};
    uint8_t idx_key[RL_E2E_KEY_LEN];
    int result;

    if (key == NULL)
        return RL_E2E_E_AUTH;
    result = rl_e2e_blind_index_key(key, idx_key);
    if (result == 0)
        result = rl_e2e_blind_index(idx_key, "agent_files", inputs, 2, out);
    rl_e2e_wipe(idx_key, sizeof(idx_key));
    return result;
}

/*
 * The public key of the accepted device that signed something (a decision, a
 * setting): 0 with pub filled, or -1 with *why. Every signed word of a device
 * goes through here, so one rule says whose signature counts.
 */
static int signer_key(const rl_keyring_t *k, const char *device_id, const char *sig, const char *sig_name,
                      uint8_t pub[RL_E2E_KEY_LEN], const char **why)
{
    json_t *peer = device_id != NULL ? json_object_get(k->peers, device_id) : NULL;

    if (sig == NULL || sig[0] == '\0') {
        *why = sig_name;
        return -1;
    }
    if (device_id == NULL || device_id[0] == '\0') {
        *why = "no device_id";
        return -1;
    }
    if (peer == NULL) {
        *why = "signed by a device this bridge has not accepted (unconfirmed or revoked)";
        return -1;
    }
    if (rl_e2e_pub_parse(json_string_value(json_object_get(peer, "pubkey")), pub) != 0) {
        *why = "malformed device key";
        return -1;
    }
    return 0;
}

int rl_keyring_verify_decision(const rl_keyring_t *k, const char *approval_id, const char *session_id,
                               const char *decision, const char *scope, const char *device_id, const char *sig,
                               const char **why)
{
    uint8_t pub[RL_E2E_KEY_LEN];

    if (signer_key(k, device_id, sig, "no decision_sig", pub, why) != 0)
        return -1;
    if (approval_id == NULL || decision == NULL) {
        *why = "malformed decision";
        return -1;
    }
    if (rl_e2e_decision_verify(k->device.kp.sec, pub, approval_id, session_id, decision, scope, device_id, sig) != 0) {
        *why = "decision_sig does not verify";
        return -1;
    }
    return 0;
}

int rl_keyring_verify_config(const rl_keyring_t *k, const char *session_id, const char *option_id, const char *value,
                             long long ts, const char *device_id, const char *sig, const char **why)
{
    uint8_t pub[RL_E2E_KEY_LEN];

    if (signer_key(k, device_id, sig, "no config_sig", pub, why) != 0)
        return -1;
    if (rl_e2e_config_verify(k->device.kp.sec, pub, session_id, option_id, value, ts, device_id, sig) != 0) {
        *why = "config_sig does not verify";
        return -1;
    }
    return 0;
}

char *rl_keyring_seal_to_device(const rl_keyring_t *k, const char *device_id, const void *plain, size_t len)
{
    json_t *peer = device_id != NULL ? json_object_get(k->peers, device_id) : NULL;
    uint8_t pub[RL_E2E_KEY_LEN], *box;
    char *text = NULL;

    if (peer == NULL || rl_e2e_pub_parse(json_string_value(json_object_get(peer, "pubkey")), pub) != 0)
        return NULL;
    box = malloc(crypto_box_NONCEBYTES + crypto_box_MACBYTES + len);
    if (box == NULL)
        return NULL;
    randombytes_buf(box, crypto_box_NONCEBYTES);
    if (crypto_box_easy(box + crypto_box_NONCEBYTES, plain, len, box, pub, k->device.kp.sec) == 0) {
        text = malloc(RL_BASE64_ENCODED_SIZE(crypto_box_NONCEBYTES + crypto_box_MACBYTES + len));
        if (text != NULL)
            rl_base64_encode(box, crypto_box_NONCEBYTES + crypto_box_MACBYTES + len, text);
    }
    free(box);
    return text;
}

/* How each content field of a bridge call is sealed. */
typedef enum seal_form {
    SEAL_TEXT, /* a string, sealed as its bytes */
    SEAL_JSON, /* any JSON value, sealed as its JSON text */
    SEAL_AUTO, /* a string as SEAL_TEXT, anything else as SEAL_JSON */
} seal_form_t;

static const struct seal_rule {
    rl_call_t call;
    const char *field, *ct_field, *kind;
    seal_form_t form;
} seal_rules[] = {
    {RL_CALL_SEND_MESSAGE, "text", "text_ct", "messages", SEAL_TEXT},
    {RL_CALL_DELTA, "delta", "delta_ct", "messages", SEAL_TEXT},
    {RL_CALL_END, "text", "text_ct", "messages", SEAL_TEXT},
    {RL_CALL_CREATE_TASK, "status_label", "status_label_ct", "tasks", SEAL_TEXT},
    {RL_CALL_CREATE_TASK, "args", "args_ct", "tasks", SEAL_JSON},
    {RL_CALL_UPDATE_TASK, "status_label", "status_label_ct", "tasks", SEAL_TEXT},
    {RL_CALL_UPDATE_TASK, "partial_result", "partial_result_ct", "tasks", SEAL_JSON},
    {RL_CALL_FINISH_TASK, "status_label", "status_label_ct", "tasks", SEAL_TEXT},
    {RL_CALL_FINISH_TASK, "error", "error_ct", "tasks", SEAL_AUTO},
    {RL_CALL_FINISH_TASK, "result", "result_ct", "tasks", SEAL_JSON},
    /* ours (docs/api.md "Device capabilities"): the agent's reason, under capabilities/<sid> */
    {RL_CALL_REQUEST_CAPABILITY, "reason", "reason_ct", "capabilities", SEAL_TEXT},
};

/* What an approval's details_ct holds (the authors' shape, and content: the diff or text a person reviews). */
static const char *const approval_details[] = {"title",        "message",       "command", "host",
                                               "tool_call_id", "approval_slug", "content", NULL};

static int seal_value(const rl_keyring_t *k, const char *session_id, const char *kind, json_t *value, seal_form_t form,
                      json_t *body, const char *ct_field)
{
    char *text, *sealed;
    int owned = 0;
    size_t len;

    if (json_is_string(value) && form != SEAL_JSON) {
        text = (char *)json_string_value(value);
        len = json_string_length(value);
    } else {
        text = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
        if (text == NULL)
            return -1;
        len = strlen(text);
        owned = 1;
    }
    sealed = rl_keyring_seal(k, session_id, kind, text, len);
    if (owned)
        free(text);
    if (sealed == NULL)
        return -1;
    json_object_set_new(body, ct_field, json_string(sealed));
    free(sealed);
    return 0;
}

int rl_keyring_seal_call(const rl_keyring_t *k, rl_call_t call, const char *session_id, json_t *body)
{
    size_t i;

    if (call == RL_CALL_REQUEST_APPROVAL) {
        json_t *details = json_object();
        int result;
        for (i = 0; approval_details[i] != NULL; i++) {
            json_t *v = json_object_get(body, approval_details[i]);
            if (v != NULL && !json_is_null(v))
                json_object_set(details, approval_details[i], v);
            json_object_del(body, approval_details[i]);
        }
        result = seal_value(k, session_id, "approvals", details, SEAL_JSON, body, "details_ct");
        json_decref(details);
        return result;
    }
    for (i = 0; i < sizeof(seal_rules) / sizeof(seal_rules[0]); i++) {
        const struct seal_rule *rule = &seal_rules[i];
        json_t *v;
        if (rule->call != call)
            continue;
        v = json_object_get(body, rule->field);
        if (v == NULL || json_is_null(v)) {
            json_object_del(body, rule->field);
            continue;
        }
        if (seal_value(k, session_id, rule->kind, v, rule->form, body, rule->ct_field) != 0)
            return -1;
        json_object_del(body, rule->field);
    }
    return 0;
}
