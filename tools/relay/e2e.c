/*
 * relay: encrypted sessions (docs/api.md, "Encrypted sessions"). The device
 * key lives in the config folder (client-device.json, 0600), the session keys
 * beside it (client-session-keys.json). The device is registered on the first
 * use of an encrypted feature; every answer of the relay and every event of
 * the stream goes through relay_e2e_open_result, which opens the *_ct fields
 * of the sessions this device holds keys for.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/credentials.h"
#include "e2e/keystore.h"
#include "relay.h"

#define DEVICE_FILE   "client-device"
#define SESSIONS_FILE "client-session-keys"
/* What a field this device cannot open shows on a terminal. */
#define LOCKED "[encrypted: this device has no key for it]"

static struct {
    int tried;   /* load() ran */
    int active;  /* a device key exists */
    int synced;  /* the wraps addressed to this device were fetched in this run */
    int opening; /* relay_call from inside this file: answers are not opened again */
    rl_device_key_t device;
    char device_path[3200];
    rl_keystore_t *keys;
} e2e;

/* Makes the config folder (0700) when it does not exist yet. */
static void make_folder(const char *file)
{
    char dir[3200], *slash;

    snprintf(dir, sizeof(dir), "%s", file);
    slash = strrchr(dir, '/');
    if (slash == NULL)
        return;
    *slash = '\0';
    if (mkdir(dir, 0700) != 0 && errno == ENOENT) {
        char parent[3200];
        snprintf(parent, sizeof(parent), "%s", dir);
        slash = strrchr(parent, '/');
        if (slash != NULL) {
            *slash = '\0';
            mkdir(parent, 0755);
        }
        mkdir(dir, 0700);
    }
}

static int call(const char *method, const char *path, const json_t *body, json_t **result, rl_api_error_t *error)
{
    int ret;

    e2e.opening++;
    ret = relay_call(method, path, body, result, error);
    e2e.opening--;
    return ret;
}

/*
 * How far this terminal trusts a grant (docs/api.md, "Signed grants"): signed
 * by a bridge device it confirmed, or by itself; from another client device of
 * the user (read only once a key is held); unsigned; or forged. devices is
 * GET /v1/me/devices (NULL when it could not be fetched: nothing verifies).
 */
static rl_grant_trust_t grant_trust(const json_t *devices, const json_t *grant)
{
    const char *by = rl_cli_str(grant, "wrapped_by_device_id"), *sig = rl_cli_str(grant, "grant_sig");
    const json_t *d, *signer = NULL;
    uint8_t pub[RL_E2E_KEY_LEN];
    size_t i;

    json_array_foreach(json_object_get(devices, "devices"), i, d)
    {
        if (by[0] != '\0' && strcmp(rl_cli_str(d, "device_id"), by) == 0)
            signer = d;
    }
    if (strcmp(by, e2e.device.device_id) == 0) {
        memcpy(pub, e2e.device.kp.pub, sizeof(pub));
    } else if (signer == NULL) {
        return RL_GRANT_FORGED; /* no device of the user, or a revoked one: nobody this terminal can trust */
    } else if (strcmp(rl_cli_str(signer, "platform"), "bridge") != 0) {
        return sig[0] != '\0' ? RL_GRANT_FORGED : RL_GRANT_PEER;
    } else if (!json_is_true(json_object_get(signer, "confirmed_by_me")) ||
               rl_e2e_pub_parse(rl_cli_str(signer, "pubkey"), pub) != 0) {
        return RL_GRANT_FORGED;
    }
    if (sig[0] == '\0')
        return strcmp(by, e2e.device.device_id) == 0 ? RL_GRANT_PEER : RL_GRANT_UNSIGNED;
    return rl_e2e_grant_verify(e2e.device.kp.sec, pub, rl_cli_str(grant, "session_id"),
                               rl_cli_str(grant, "wrapped_session_key"), by, sig) == 0
               ? RL_GRANT_SIGNED
               : RL_GRANT_FORGED;
}

/* Unwraps a grant addressed to this device and keeps its key as far as it is trusted; says when it is not taken. */
static void take_grant(const json_t *devices, const json_t *grant)
{
    uint8_t key[RL_E2E_KEY_LEN];
    const char *sid = rl_cli_str(grant, "session_id");
    int result;

    if (rl_e2e_unwrap_key(e2e.device.kp.sec, rl_cli_str(grant, "wrapped_session_key"), key) != 0)
        return;
    result = rl_keystore_take_grant(e2e.keys, sid, key, grant_trust(devices, grant));
    rl_e2e_wipe(key, sizeof(key));
    if (result == RL_E2E_E_AUTH)
        rl_cli_note(&relay.cli,
                    "relay: a key granted for %s by %s was refused: not signed by a bridge this terminal "
                    "confirmed (the key it seals with is unchanged)",
                    sid,
                    rl_cli_str(grant, "wrapped_by_device_id")[0] != '\0' ? rl_cli_str(grant, "wrapped_by_device_id")
                                                                         : "nobody named");
    else if (result == RL_E2E_E_IO)
        rl_cli_note(&relay.cli, "relay: could not save the key of %s", sid);
}

/* Fetches the wraps addressed to this device and keeps the keys (once per run). */
static void sync_keys(void)
{
    char path[512];
    rl_api_error_t error;
    const json_t *wrap;
    json_t *result, *devices;
    size_t i;

    if (e2e.synced || e2e.device.device_id[0] == '\0')
        return;
    e2e.synced = 1;
    rl_api_path(path, sizeof(path), "/v1/me/devices/%s/keys", e2e.device.device_id);
    if (call("GET", path, NULL, &result, &error) != 0) {
        rl_cli_note(&relay.cli, "relay: could not fetch this device's session keys: %s", error.message);
        return;
    }
    /* Checked as the events are: the keys route gives back each wrap's grant_sig (docs/api.md, "Signed grants"). */
    if (call("GET", "/v1/me/devices", NULL, &devices, &error) != 0)
        devices = NULL;
    json_array_foreach(json_object_get(result, "keys"), i, wrap) take_grant(devices, wrap);
    json_decref(devices);
    json_decref(result);
}

/* Loads the device key (making it when create is set) and the session keys. 1 when a device key is there. */
static int load(int create)
{
    char path[3200];
    int result;

    if (e2e.active || (e2e.tried && !create))
        return e2e.active;
    e2e.tried = 1;
    if (rl_e2e_init() != 0 || rl_credentials_path(DEVICE_FILE, e2e.device_path, sizeof(e2e.device_path)) != 0 ||
        rl_credentials_path(SESSIONS_FILE, path, sizeof(path)) != 0)
        return 0;
    if (create)
        make_folder(e2e.device_path);
    result = rl_device_key_load(e2e.device_path, create, &e2e.device);
    if (result == RL_E2E_E_FORMAT)
        rl_cli_note(&relay.cli, "relay: %s is not a device key or may be read by others (chmod 600): ignored",
                    e2e.device_path);
    if (result < 0)
        return 0;
    e2e.keys = rl_keystore_load(path);
    if (e2e.keys == NULL) {
        rl_cli_note(&relay.cli, "relay: %s is not a session key store or may be read by others (chmod 600)", path);
        rl_device_key_wipe(&e2e.device);
        return 0;
    }
    e2e.active = 1;
    return 1;
}

/* The device, registered with the relay. EXIT_OK, or reported. */
static int need_device(void)
{
    char pub[RL_E2E_PUBHEX_SIZE], host[48] = "terminal", label[64];
    rl_api_error_t error;
    json_t *body, *result;
    const char *id;

    if (!load(1))
        return relay_report(EXIT_RUNTIME, "cannot make or read this device's key in the config folder", NULL);
    if (relay.api == NULL && relay_connect() != EXIT_OK)
        return EXIT_RUNTIME;
    if (e2e.device.device_id[0] != '\0') {
        rl_api_set_device(relay.api, e2e.device.device_id);
        return EXIT_OK;
    }
    gethostname(host, sizeof(host) - 1);
    snprintf(label, sizeof(label), "relay on %.47s", host);
    rl_e2e_pub_hex(e2e.device.kp.pub, pub);
    body = json_pack("{s:s, s:s, s:s}", "pubkey", pub, "label", label, "platform", "cli");
    if (call("POST", "/v1/me/devices", body, &result, &error) != 0) {
        json_decref(body);
        return relay_report_api(&error);
    }
    json_decref(body);
    id = rl_cli_str(result, "device_id");
    snprintf(e2e.device.device_id, sizeof(e2e.device.device_id), "%s", id);
    snprintf(e2e.device.label, sizeof(e2e.device.label), "%s", label);
    json_decref(result);
    if (e2e.device.device_id[0] == '\0')
        return relay_report(EXIT_RUNTIME, "the relay registered the device without an id", NULL);
    if (rl_device_key_save(e2e.device_path, &e2e.device) != 0)
        return relay_report(EXIT_RUNTIME, "could not save the device id", NULL);
    rl_api_set_device(relay.api, e2e.device.device_id);
    rl_cli_note(&relay.cli, "relay: registered this terminal as device %s", e2e.device.device_id);
    return EXIT_OK;
}

/* ---- opening what the relay serves ---- */

typedef enum form {
    FORM_TEXT,  /* the plaintext is the field's string */
    FORM_JSON,  /* the plaintext is JSON text: args, results */
    FORM_AUTO,  /* JSON when it parses, else a string: a task's error */
    FORM_MERGE, /* a JSON object whose members join the object: an approval's details */
} form_t;

/* Every ciphertext field of the wire, what it opens to, and the family of its key. */
static const struct ct_field {
    const char *ct, *plain, *kind;
    form_t form;
} ct_fields[] = {
    {"text_ct", "text", "messages", FORM_TEXT},
    {"delta_ct", "delta", "messages", FORM_TEXT},
    {"status_label_ct", "status_label", "tasks", FORM_TEXT},
    {"args_ct", "args", "tasks", FORM_JSON},
    {"partial_result_ct", "partial_result", "tasks", FORM_JSON},
    {"error_ct", "error", "tasks", FORM_AUTO},
    {"result_ct", "result", "tasks", FORM_JSON},
    {"details_ct", NULL, "approvals", FORM_MERGE},
    {"title_ct", "title", "session_meta", FORM_TEXT},
    {"reason_ct", "reason", "capabilities", FORM_TEXT},
};

static char *open_ct(const char *sid, const char *kind, const char *b64)
{
    char path[200], *plain = NULL;

    if (sid == NULL || b64 == NULL || rl_e2e_path(path, sizeof(path), kind, sid) != 0)
        return NULL;
    if (rl_keystore_open_field(e2e.keys, sid, path, b64, &plain, NULL) != 0)
        return NULL;
    return plain;
}

/* Sets the opened value of one field; 0, or -1 when it does not open. */
static int open_field(json_t *object, const struct ct_field *f, const char *sid)
{
    char *plain = open_ct(sid, f->kind, json_string_value(json_object_get(object, f->ct)));
    json_t *value = NULL;

    if (plain == NULL)
        return -1;
    if (f->form != FORM_TEXT)
        value = json_loads(plain, JSON_DECODE_ANY, NULL);
    if (f->form == FORM_MERGE && json_is_object(value)) {
        json_object_update(object, value);
    } else if (f->form != FORM_MERGE) {
        if (value == NULL)
            value = json_string(plain);
        json_object_set(object, f->plain, value);
    }
    json_decref(value);
    rl_e2e_wipe(plain, strlen(plain));
    free(plain);
    json_object_del(object, f->ct);
    return 0;
}

/* An open message's text: its start and every delta envelope after it (docs/api.md). */
static void open_deltas(json_t *object, const char *sid)
{
    json_t *list = json_object_get(object, "deltas_ct"), *d;
    const char *start = rl_cli_str(object, "text");
    size_t i, len = strlen(start);
    char *text = strdup(start);

    json_array_foreach(list, i, d)
    {
        char *plain = open_ct(sid, "messages", json_string_value(d));
        char *grown;
        if (plain == NULL) {
            free(text);
            return;
        }
        grown = text != NULL ? realloc(text, len + strlen(plain) + 1) : NULL;
        if (grown != NULL) {
            memcpy(grown + len, plain, strlen(plain) + 1);
            len += strlen(plain);
        }
        text = grown;
        free(plain);
    }
    if (text != NULL) {
        json_object_set_new(object, "text", json_string(text));
        json_object_del(object, "deltas_ct");
    }
    free(text);
}

/* An agent file's path and name: keyed by its blind index. */
static void open_agent_file(json_t *object, const char *sid)
{
    char kind[160];
    const char *idx = json_string_value(json_object_get(object, "path_blind_idx"));
    static const char *const fields[][2] = {{"path_ct", "path"}, {"display_name_ct", "display_name"}};
    size_t i;

    if (idx == NULL || sid == NULL || snprintf(kind, sizeof(kind), "agent_files/%s/%s", sid, idx) >= (int)sizeof(kind))
        return;
    for (i = 0; i < 2; i++) {
        char *plain = NULL;
        const char *b64 = json_string_value(json_object_get(object, fields[i][0]));
        if (b64 != NULL && rl_keystore_open_field(e2e.keys, sid, kind, b64, &plain, NULL) == 0) {
            json_object_set_new(object, fields[i][1], json_string(plain));
            json_object_del(object, fields[i][0]);
            free(plain);
        }
    }
}

static void open_tree(json_t *node, const char *sid)
{
    const char *key;
    json_t *child;
    size_t i;

    if (json_is_array(node)) {
        json_array_foreach(node, i, child) open_tree(child, sid);
        return;
    }
    if (!json_is_object(node))
        return;
    if (json_is_string(json_object_get(node, "session_id")))
        sid = json_string_value(json_object_get(node, "session_id"));
    else if (strncmp(rl_cli_str(node, "id"), "ses_", 4) == 0)
        sid = rl_cli_str(node, "id");
    for (i = 0; i < sizeof(ct_fields) / sizeof(ct_fields[0]); i++) {
        if (json_object_get(node, ct_fields[i].ct) == NULL || json_is_null(json_object_get(node, ct_fields[i].ct)))
            continue;
        if (open_field(node, &ct_fields[i], sid) != 0 && ct_fields[i].form == FORM_TEXT &&
            !json_is_string(json_object_get(node, ct_fields[i].plain)))
            json_object_set_new(node, ct_fields[i].plain, json_string(LOCKED));
    }
    if (json_is_array(json_object_get(node, "deltas_ct")))
        open_deltas(node, sid);
    if (json_object_get(node, "path_ct") != NULL)
        open_agent_file(node, sid);
    json_object_foreach(node, key, child)
    {
        if (json_is_object(child) || json_is_array(child))
            open_tree(child, sid);
    }
}

/* Whether a JSON text may hold a ciphertext field at all: most answers and events do not. */
static int has_ct(const char *text, size_t len)
{
    return memmem(text, len, "_ct\"", 4) != NULL;
}

void relay_e2e_open_result(json_t *result)
{
    char *text;

    if (result == NULL || e2e.opening || !load(0))
        return;
    text = json_dumps(result, JSON_COMPACT);
    if (text != NULL && has_ct(text, strlen(text))) {
        if (e2e.device.device_id[0] != '\0' && relay.api != NULL)
            rl_api_set_device(relay.api, e2e.device.device_id);
        sync_keys();
        open_tree(result, NULL);
    }
    free(text);
}

char *relay_e2e_open_event(const char *data, size_t len)
{
    json_t *root;
    char *text;

    if (len == 0 || (!has_ct(data, len) && memmem(data, len, "\"wrapped_session_key\"", 21) == NULL) || !load(0))
        return NULL;
    root = json_loadb(data, len, 0, NULL);
    if (root == NULL)
        return NULL;
    sync_keys();
    open_tree(root, NULL);
    /* A key granted while the stream runs (a new session, a rotation) arrives as an event too. */
    if (!json_is_null(json_object_get(root, "wrapped_session_key")) &&
        strcmp(rl_cli_str(root, "device_id"), e2e.device.device_id) == 0) {
        json_t *devices = NULL;
        rl_api_error_t error;
        if (call("GET", "/v1/me/devices", NULL, &devices, &error) != 0)
            devices = NULL;
        take_grant(devices, root);
        json_decref(devices);
    }
    text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

/* ---- what this device sends ---- */

/* The session as /v1/me shows it (a new reference), or NULL. */
static json_t *find_session(const char *session_id)
{
    const json_t *session;
    json_t *me = NULL, *found = NULL;
    rl_api_error_t error;
    size_t i;

    if (call("GET", "/v1/me", NULL, &me, &error) != 0)
        return NULL;
    json_array_foreach(json_object_get(me, "sessions"), i, session)
    {
        if (strcmp(rl_cli_str(session, "id"), session_id) == 0)
            found = json_incref((json_t *)session);
    }
    json_decref(me);
    return found;
}

int relay_e2e_seal_send(const char *session_id, json_t *body)
{
    const char *text = rl_cli_str(body, "text");
    char *sealed, path[200];
    json_t *session;
    int encrypted;

    if (load(0)) {
        sync_keys();
        if (rl_keystore_key(e2e.keys, session_id, 0) != NULL) {
            rl_e2e_path(path, sizeof(path), "messages", session_id);
            sealed = rl_keystore_seal_field(e2e.keys, session_id, path, text, strlen(text));
            if (sealed == NULL)
                return relay_report(EXIT_RUNTIME, "could not encrypt the message", NULL);
            json_object_set_new(body, "text_ct", json_string(sealed));
            json_object_del(body, "text");
            free(sealed);
            return EXIT_OK;
        }
    }
    /* No key here: say so rather than send the text in clear to an encrypted session. */
    session = find_session(session_id);
    encrypted = json_is_true(json_object_get(session, "encrypted"));
    json_decref(session);
    if (encrypted)
        return relay_report(EXIT_RUNTIME,
                            "this session is encrypted and this terminal holds no key for it: confirm its bridge "
                            "with relay devices confirm ID, on a device that has the session",
                            NULL);
    return EXIT_OK;
}

int relay_e2e_seal_answer(const char *session_id, json_t *body, int require)
{
    const json_t *location = json_object_get(body, "location");
    char *text, *sealed = NULL, path[200];
    json_t *answer;
    int keyed;

    if (location == NULL)
        return EXIT_OK; /* a refusal says nothing to seal */
    keyed = load(0);

    if (keyed) {
        sync_keys();
        keyed = rl_keystore_key(e2e.keys, session_id, 0) != NULL;
    }
    if (!keyed) {
        if (!require)
            return EXIT_OK;
        return relay_report(EXIT_RUNTIME,
                            "this session is encrypted and this terminal holds no key for it: confirm its bridge "
                            "with relay devices confirm ID, on a device that has the session",
                            NULL);
    }
    /* The answer as the bridge opens it (docs/api.md "Device capabilities"): {location} under capabilities/<sid>. */
    answer = json_pack("{s:O}", "location", location);
    text = json_dumps(answer, JSON_COMPACT);
    json_decref(answer);
    if (text != NULL && rl_e2e_path(path, sizeof(path), "capabilities", session_id) == 0)
        sealed = rl_keystore_seal_field(e2e.keys, session_id, path, text, strlen(text));
    if (text != NULL)
        rl_e2e_wipe(text, strlen(text));
    free(text);
    if (sealed == NULL)
        return relay_report(EXIT_RUNTIME, "could not encrypt the answer", NULL);
    json_object_set_new(body, "answer_ct", json_string(sealed));
    json_object_del(body, "location");
    free(sealed);
    return EXIT_OK;
}

/* The bridge device of an installation in a device list, or NULL. */
static const json_t *bridge_of(const json_t *devices, const char *installation_id)
{
    const json_t *d;
    size_t i;

    json_array_foreach(json_object_get(devices, "devices"), i, d)
    {
        if (strcmp(rl_cli_str(d, "platform"), "bridge") == 0 &&
            strcmp(rl_cli_str(d, "installation_id"), installation_id) == 0)
            return d;
    }
    return NULL;
}

static int fetch_devices(json_t **devices)
{
    rl_api_error_t error;

    if (call("GET", "/v1/me/devices", NULL, devices, &error) != 0)
        return relay_report_api(&error);
    return EXIT_OK;
}

int relay_e2e_sign(json_t *body, const char *approval_id, const char *session_id)
{
    json_t *snapshot = NULL, *session = NULL, *devices = NULL;
    const json_t *approval, *bridge;
    char sig[RL_E2E_SIG_SIZE], sid[128] = "";
    uint8_t bridge_pub[RL_E2E_KEY_LEN];
    rl_api_error_t error;
    size_t i;
    int status = EXIT_OK;

    if (session_id != NULL) {
        snprintf(sid, sizeof(sid), "%s", session_id);
    } else {
        if (call("GET", "/v1/me/snapshot", NULL, &snapshot, &error) != 0)
            return relay_report_api(&error);
        json_array_foreach(json_object_get(snapshot, "pending_approvals"), i, approval)
        {
            if (strcmp(rl_cli_str(approval, "approval_id"), approval_id) == 0 ||
                strcmp(rl_cli_str(approval, "id"), approval_id) == 0)
                snprintf(sid, sizeof(sid), "%s", rl_cli_str(approval, "session_id"));
        }
        json_decref(snapshot);
    }
    /* An approval this terminal cannot place is sent unsigned: the relay answers for it (not found, decided). */
    if (sid[0] == '\0')
        return EXIT_OK;
    session = find_session(sid);
    if (!json_is_true(json_object_get(session, "encrypted")))
        goto out;
    status = need_device();
    if (status == EXIT_OK)
        status = fetch_devices(&devices);
    if (status != EXIT_OK)
        goto out;
    bridge = bridge_of(devices, rl_cli_str(session, "installation_id"));
    if (bridge == NULL || rl_e2e_pub_parse(rl_cli_str(bridge, "pubkey"), bridge_pub) != 0) {
        status =
            relay_report(EXIT_RUNTIME, "the session's bridge has no device key: the decision cannot be signed", NULL);
        goto out;
    }
    if (rl_e2e_decision_sig(e2e.device.kp.sec, bridge_pub, approval_id, sid, rl_cli_str(body, "decision"),
                            json_string_value(json_object_get(body, "scope")), e2e.device.device_id, sig) != 0) {
        status = relay_report(EXIT_RUNTIME, "could not sign the decision", NULL);
        goto out;
    }
    json_object_set_new(body, "decision_sig", json_string(sig));
    json_object_set_new(body, "device_id", json_string(e2e.device.device_id));
out:
    json_decref(session);
    json_decref(devices);
    return status;
}

/* Wraps the newest key of session_id for this device and the session's bridge. EXIT_OK, or reported. */
static int share_key(const char *session_id, const json_t *bridge)
{
    const uint8_t *key = rl_keystore_key(e2e.keys, session_id, 0);
    uint8_t bridge_pub[RL_E2E_KEY_LEN];
    char path[512], *mine, *theirs, sig[RL_E2E_SIG_SIZE] = "", own_sig[RL_E2E_SIG_SIZE] = "";
    rl_api_error_t error;
    json_t *body, *result;
    int status = EXIT_OK;

    if (key == NULL || rl_e2e_pub_parse(rl_cli_str(bridge, "pubkey"), bridge_pub) != 0)
        return relay_report(EXIT_RUNTIME, "no key to share, or the bridge's key is malformed", NULL);
    mine = rl_e2e_wrap(e2e.device.kp.pub, key, RL_E2E_KEY_LEN);
    theirs = rl_e2e_wrap(bridge_pub, key, RL_E2E_KEY_LEN);
    /* The bridge takes the key only signed by this device: a sealed box alone could be anybody's. */
    /* Its own wrap too: fetched back, it verifies, so it may be a sealing key again (a lost key store). */
    if (theirs == NULL || mine == NULL ||
        rl_e2e_grant_sig(e2e.device.kp.sec, bridge_pub, session_id, theirs, e2e.device.device_id, sig) != 0 ||
        rl_e2e_grant_sig(e2e.device.kp.sec, e2e.device.kp.pub, session_id, mine, e2e.device.device_id, own_sig) != 0) {
        free(mine);
        free(theirs);
        return relay_report(EXIT_RUNTIME, "could not wrap the session key for the bridge", NULL);
    }
    body = json_pack("{s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}], s:s}", "recipients", "device_id", e2e.device.device_id,
                     "wrapped_session_key", mine, "grant_sig", own_sig, "device_id", rl_cli_str(bridge, "device_id"),
                     "wrapped_session_key", theirs, "grant_sig", sig, "wrapped_by_device_id", e2e.device.device_id);
    free(mine);
    free(theirs);
    rl_api_path(path, sizeof(path), "/v1/me/sessions/%s/recipients", session_id);
    if (call("POST", path, body, &result, &error) != 0)
        status = relay_report_api(&error);
    else
        json_decref(result);
    json_decref(body);
    return status;
}

int relay_e2e_new_session(const char *installation_id, const char *title, int require, const json_t *extra,
                          const json_t *project)
{
    json_t *devices = NULL, *body, *result = NULL;
    const json_t *bridge;
    rl_api_error_t error;
    uint8_t key[RL_E2E_KEY_LEN];
    int status;

    if (relay.api == NULL && relay_connect() != EXIT_OK)
        return EXIT_RUNTIME;
    /*
     * The bridge's device is listed to any caller of the user, confirmed_by_me
     * only to a registered device. A relay without devices (an older relayd)
     * gets a plain session, unless encryption was asked for.
     */
    if (load(0) && e2e.device.device_id[0] != '\0')
        rl_api_set_device(relay.api, e2e.device.device_id);
    if (call("GET", "/v1/me/devices", NULL, &devices, &error) != 0) {
        if (require)
            return relay_report_api(&error);
        return -1;
    }
    bridge = bridge_of(devices, installation_id);
    if (bridge != NULL && e2e.device.device_id[0] == '\0' && need_device() != EXIT_OK) {
        json_decref(devices);
        return require ? EXIT_RUNTIME : -1;
    }
    if (bridge == NULL || !json_is_true(json_object_get(bridge, "confirmed_by_me"))) {
        if (bridge != NULL)
            rl_cli_note(&relay.cli,
                        "relay: this installation's bridge encrypts, but this terminal has not confirmed it: relay "
                        "devices confirm %s",
                        rl_cli_str(bridge, "device_id"));
        json_decref(devices);
        if (require)
            return relay_report(EXIT_RUNTIME, "no confirmed bridge device on that installation: cannot encrypt", NULL);
        return -1;
    }
    /*
     * The title is sealed once the session id is known: a PATCH with title_ct
     * right after. The project goes in the start itself, so it is sealed
     * under a path without the id (issue 36: "session_meta/project", the
     * session key being new to this session).
     */
    rl_e2e_session_key_new(key);
    body = json_pack("{s:s, s:b}", "installation_id", installation_id, "encrypted", 1);
    if (extra != NULL)
        json_object_update(body, (json_t *)extra);
    if (project != NULL) {
        char *text = json_dumps(project, JSON_COMPACT), *sealed;
        sealed = text != NULL ? rl_e2e_seal_field(key, "session_meta/project", text, strlen(text)) : NULL;
        free(text);
        if (sealed == NULL) {
            rl_e2e_wipe(key, sizeof(key));
            json_decref(body);
            json_decref(devices);
            return relay_report(EXIT_RUNTIME, "could not seal the project", NULL);
        }
        json_object_set_new(body, "project_ct", json_string(sealed));
        free(sealed);
    }
    if (call("POST", "/v1/me/sessions", body, &result, &error) != 0) {
        rl_e2e_wipe(key, sizeof(key));
        json_decref(body);
        json_decref(devices);
        return relay_report_api(&error);
    }
    json_decref(body);
    {
        const char *sid = rl_cli_str(json_object_get(result, "session"), "id");
        status = rl_keystore_add(e2e.keys, sid, key) < 0 ? relay_report(EXIT_RUNTIME, "could not save the key", NULL)
                                                         : share_key(sid, bridge);
        rl_e2e_wipe(key, sizeof(key));
        if (status == EXIT_OK && title != NULL) {
            char path[512], kind[200], *sealed;
            json_t *patch, *answer;
            rl_e2e_path(kind, sizeof(kind), "session_meta", sid);
            sealed = rl_keystore_seal_field(e2e.keys, sid, kind, title, strlen(title));
            patch = json_pack("{s:s}", "title_ct", sealed != NULL ? sealed : "");
            rl_api_path(path, sizeof(path), "/v1/me/sessions/%s", sid);
            if (call("PATCH", path, patch, &answer, &error) != 0)
                rl_cli_note(&relay.cli, "relay: the title was not set: %s", error.message);
            else
                json_decref(answer);
            json_decref(patch);
            free(sealed);
            json_object_set_new(json_object_get(result, "session"), "title", json_string(title));
        }
    }
    if (status == EXIT_OK) {
        if (relay.cli.json) {
            relay_print_json(result);
        } else {
            printf("new encrypted session: ");
            relay_show_session(json_object_get(result, "session"));
        }
    }
    json_decref(result);
    json_decref(devices);
    return status;
}

/* ---- relay devices ---- */

static void show_device(const json_t *d)
{
    const char *platform = rl_cli_str(d, "platform");
    int mine = strcmp(rl_cli_str(d, "device_id"), e2e.device.device_id) == 0;

    printf("%s%s%s  %-7s %s%s%s\n", relay_style(RL_TERM_BOLD), rl_cli_str(d, "device_id"), relay_style(RL_TERM_RESET),
           platform, rl_cli_str(d, "label"),
           strcmp(platform, "bridge") != 0                       ? ""
           : json_is_true(json_object_get(d, "confirmed_by_me")) ? "  [confirmed]"
                                                                 : "  [not confirmed: relay devices confirm ID]",
           mine ? "  (this terminal)" : "");
}

/* Rotates the key of every encrypted session this device holds, after a revoke (the revoked device had it). */
static size_t rotate_keys(const json_t *devices)
{
    json_t *me = NULL;
    const json_t *session, *bridge;
    rl_api_error_t error;
    size_t i, rotated = 0;

    if (call("GET", "/v1/me", NULL, &me, &error) != 0)
        return 0;
    json_array_foreach(json_object_get(me, "sessions"), i, session)
    {
        const char *sid = rl_cli_str(session, "id");
        uint8_t key[RL_E2E_KEY_LEN];
        if (!json_is_true(json_object_get(session, "encrypted")) || rl_keystore_key(e2e.keys, sid, 0) == NULL)
            continue;
        bridge = bridge_of(devices, rl_cli_str(session, "installation_id"));
        if (bridge == NULL)
            continue;
        rl_e2e_session_key_new(key);
        if (rl_keystore_add(e2e.keys, sid, key) >= 0 && share_key(sid, bridge) == EXIT_OK)
            rotated++;
        rl_e2e_wipe(key, sizeof(key));
    }
    json_decref(me);
    return rotated;
}

static int confirm(const json_t *devices, const char *id, int yes, const char *code)
{
    const json_t *d, *bridge = NULL;
    uint8_t pub[RL_E2E_KEY_LEN], sas[RL_E2E_SAS_LEN];
    char text[RL_E2E_SAS_TEXT_SIZE], path[512], answer[16] = "";
    rl_api_error_t error;
    json_t *body, *result;
    size_t i;

    json_array_foreach(json_object_get(devices, "devices"), i, d)
    {
        if (strcmp(rl_cli_str(d, "platform"), "bridge") == 0 &&
            (strcmp(rl_cli_str(d, "device_id"), id) == 0 || strcmp(rl_cli_str(d, "installation_id"), id) == 0))
            bridge = d;
    }
    if (bridge == NULL)
        return relay_report(EXIT_USAGE, "no bridge device with that id (relay devices lists them)", NULL);
    if (rl_e2e_pub_parse(rl_cli_str(bridge, "pubkey"), pub) != 0 || rl_e2e_sas(e2e.device.kp.sec, pub, sas) != 0)
        return relay_report(EXIT_RUNTIME, "the bridge's key is malformed", NULL);
    rl_e2e_sas_text(sas, text);
    if (!yes) {
        if (!relay.cli.out.tty || !isatty(STDIN_FILENO)) {
            json_t *extra = json_pack("{s:s, s:s}", "sas", text, "bridge_device_id", rl_cli_str(bridge, "device_id"));
            return relay_report(EXIT_USAGE, "compare the emoji with the bridge's, then confirm with --yes", extra);
        }
        printf("The bridge \"%s\" must show: %s\nThe same four, in this order? [y/N] ", rl_cli_str(bridge, "label"),
               text);
        fflush(stdout);
        if (fgets(answer, sizeof(answer), stdin) == NULL || (answer[0] != 'y' && answer[0] != 'Y')) {
            printf("not confirmed\n");
            return EXIT_RUNTIME;
        }
    }
    body = json_pack("{s:s}", "bridge_device_id", rl_cli_str(bridge, "device_id"));
    if (code != NULL) {
        /* ours (docs/api.md, "A device the machine accepted"): the code stays here; only the proof travels. */
        uint8_t key[RL_E2E_KEY_LEN];
        char pubhex[RL_E2E_PUBHEX_SIZE], proof[RL_E2E_SIG_SIZE];
        rl_e2e_pub_hex(e2e.device.kp.pub, pubhex);
        if (rl_e2e_enrol_key(code, key) != 0) {
            json_decref(body);
            return relay_report(
                EXIT_USAGE, "--code takes the 20-character code relay-bridge showed (relay-bridge devices add)", NULL);
        }
        if (rl_e2e_enrol_proof(key, rl_cli_str(bridge, "device_id"), e2e.device.device_id, pubhex, proof) == 0)
            json_object_set_new(body, "enrol_proof", json_string(proof));
        rl_e2e_wipe(key, sizeof(key));
    }
    rl_api_path(path, sizeof(path), "/v1/me/devices/%s/confirm", e2e.device.device_id);
    if (call("POST", path, body, &result, &error) != 0) {
        json_decref(body);
        return relay_report_api(&error);
    }
    json_decref(body);
    if (relay.cli.json) {
        json_object_set_new(result, "sas", json_string(text));
        relay_print_json(result);
    } else {
        if (code != NULL)
            printf("confirmed %s (%s) with its code: it shares its session keys with this terminal now\n",
                   rl_cli_str(bridge, "device_id"), text);
        else
            printf("confirmed %s (%s). The bridge shares its keys with this terminal once its owner confirms it "
                   "there too:\n  relay-bridge devices confirm %s\n(or confirm again here with --code and a code "
                   "from relay-bridge devices add)\n",
                   rl_cli_str(bridge, "device_id"), text, e2e.device.device_id);
    }
    json_decref(result);
    return EXIT_OK;
}

int relay_run_devices(const rl_cli_args_t *args)
{
    const char *verb = args->npositional > 0 ? args->positional[0] : "list";
    const char *id = args->npositional > 1 ? args->positional[1] : NULL;
    json_t *devices = NULL;
    const json_t *d;
    size_t i;
    int status = relay_need_login();

    if (status == EXIT_OK)
        status = need_device();
    if (status == EXIT_OK)
        status = fetch_devices(&devices);
    if (status != EXIT_OK)
        return status;
    if (strcmp(verb, "list") == 0) {
        if (relay.cli.json) {
            json_object_set_new(devices, "this_device_id", json_string(e2e.device.device_id));
            relay_print_json(devices);
        } else {
            json_array_foreach(json_object_get(devices, "devices"), i, d) show_device(d);
        }
    } else if (strcmp(verb, "confirm") == 0 && id != NULL) {
        status = confirm(devices, id, rl_cli_value(args, "yes") != NULL, rl_cli_value(args, "code"));
    } else if (strcmp(verb, "revoke") == 0 && id != NULL) {
        char path[512];
        rl_api_error_t error;
        json_t *result;
        rl_api_path(path, sizeof(path), "/v1/me/devices/%s", id);
        if (call("DELETE", path, NULL, &result, &error) != 0) {
            status = relay_report_api(&error);
        } else {
            /* The revoked device held the keys of the sessions it could read: new messages get new keys. */
            size_t rotated = strcmp(id, e2e.device.device_id) != 0 ? rotate_keys(devices) : 0;
            if (relay.cli.json) {
                json_object_set_new(result, "rotated_sessions", json_integer((json_int_t)rotated));
                relay_print_json(result);
            } else {
                printf("revoked %s; new keys for %zu encrypted sessions\n", id, rotated);
            }
            json_decref(result);
        }
    } else {
        status = relay_report(EXIT_USAGE, "devices takes list, confirm ID or revoke ID", NULL);
    }
    json_decref(devices);
    return status;
}

/* ---- lists the bridge seals to this terminal (issue 36: relay projects, relay agent-sessions) ---- */

int relay_e2e_list_device(const char *installation_id, char *out, size_t outsz, json_t **devices)
{
    rl_api_error_t error;
    const json_t *bridge;

    *devices = NULL;
    out[0] = '\0';
    if (relay.api == NULL && relay_connect() != EXIT_OK)
        return EXIT_RUNTIME;
    if (!load(0) || e2e.device.device_id[0] == '\0')
        return EXIT_OK;
    rl_api_set_device(relay.api, e2e.device.device_id);
    /* A relay without devices: the list is asked in clear (the bridge may refuse it). */
    if (call("GET", "/v1/me/devices", NULL, devices, &error) != 0)
        return EXIT_OK;
    bridge = bridge_of(*devices, installation_id);
    if (bridge != NULL && json_is_true(json_object_get(bridge, "confirmed_by_me")))
        snprintf(out, outsz, "%s", e2e.device.device_id);
    return EXIT_OK;
}

json_t *relay_e2e_open_list(const json_t *answer, const json_t *devices, const char *installation_id)
{
    const json_t *bridge = devices != NULL ? bridge_of(devices, installation_id) : NULL;
    uint8_t pub[RL_E2E_KEY_LEN];
    char *plain = NULL;
    size_t len = 0;
    json_t *opened;

    /* Only this terminal's, and only from this installation's own bridge: a box from another is not its list. */
    if (!e2e.active || bridge == NULL || strcmp(rl_cli_str(answer, "to_device_id"), e2e.device.device_id) != 0 ||
        strcmp(rl_cli_str(answer, "from_device_id"), rl_cli_str(bridge, "device_id")) != 0 ||
        rl_e2e_pub_parse(rl_cli_str(bridge, "pubkey"), pub) != 0)
        return NULL;
    if (rl_e2e_box_open(e2e.device.kp.sec, pub, rl_cli_str(answer, "sealed"), &plain, &len) != 0)
        return NULL;
    opened = json_loadb(plain, len, 0, NULL);
    rl_e2e_wipe(plain, len);
    free(plain);
    if (!json_is_object(opened)) {
        json_decref(opened);
        opened = NULL;
    }
    return opened;
}
