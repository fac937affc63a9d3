#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base64.h"
#include "common/hex.h"
#include "e2e/keystore.h"

/* A session's keys, newest first. */
typedef struct entry {
    char *session_id;
    uint8_t (*keys)[RL_E2E_KEY_LEN];
    size_t nkeys;
} entry_t;

struct rl_keystore {
    char *path;
    entry_t *entries;
    size_t count, cap;
};

/* Writes text to path through path.tmp: 0600, fsync'd, renamed over path. 0 or RL_E2E_E_IO. */
static int replace_file(const char *path, const char *text)
{
    size_t len = strlen(text), done = 0;
    char tmp[4096];
    int fd, result = RL_E2E_E_IO;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
        return RL_E2E_E_IO;
    unlink(tmp);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return RL_E2E_E_IO;
    while (done < len) {
        ssize_t n = write(fd, text + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            goto out;
        done += (size_t)n;
    }
    if (fsync(fd) != 0)
        goto out;
    result = 0;
out:
    close(fd);
    if (result == 0 && rename(tmp, path) != 0)
        result = RL_E2E_E_IO;
    if (result != 0)
        unlink(tmp);
    return result;
}

/* Reads a key file: the JSON, or NULL with *result set (RL_E2E_E_IO when missing or unreadable). */
static json_t *read_private_json(const char *path, int *result)
{
    struct stat st;
    json_t *root;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    *result = RL_E2E_E_IO;
    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return NULL;
    }
    if ((st.st_mode & 077) != 0) {
        close(fd);
        *result = RL_E2E_E_FORMAT;
        return NULL;
    }
    root = json_loadfd(fd, 0, NULL);
    close(fd);
    if (!json_is_object(root)) {
        json_decref(root);
        *result = RL_E2E_E_FORMAT;
        return NULL;
    }
    *result = 0;
    return root;
}

/* Wipes the text of a JSON dump that held keys, then frees it. */
static void free_secret_text(char *text)
{
    if (text != NULL)
        rl_e2e_wipe(text, strlen(text));
    free(text);
}

int rl_device_key_load(const char *path, int create, rl_device_key_t *dk)
{
    json_t *root;
    const char *sec, *id, *label;
    uint8_t secret[RL_E2E_KEY_LEN];
    int result;

    memset(dk, 0, sizeof(*dk));
    root = read_private_json(path, &result);
    if (root == NULL) {
        if (result != RL_E2E_E_IO || !create || access(path, F_OK) == 0)
            return result;
        if (rl_e2e_keypair_new(&dk->kp) != 0)
            return RL_E2E_E_CRYPTO;
        result = rl_device_key_save(path, dk);
        if (result != 0)
            rl_device_key_wipe(dk);
        return result == 0 ? 1 : result;
    }
    sec = json_string_value(json_object_get(root, "secret_key"));
    id = json_string_value(json_object_get(root, "device_id"));
    label = json_string_value(json_object_get(root, "label"));
    result = RL_E2E_E_FORMAT;
    if (sec == NULL || rl_hex_decode(sec, strlen(sec), secret, sizeof(secret)) != 0 ||
        rl_e2e_keypair_from_secret(&dk->kp, secret) != 0)
        goto out;
    snprintf(dk->device_id, sizeof(dk->device_id), "%s", id != NULL ? id : "");
    snprintf(dk->label, sizeof(dk->label), "%s", label != NULL ? label : "");
    result = 0;
out:
    rl_e2e_wipe(secret, sizeof(secret));
    /* jansson keeps the secret's hex in the tree: wipe it before the tree goes. */
    if (sec != NULL)
        rl_e2e_wipe((char *)sec, strlen(sec));
    json_decref(root);
    if (result != 0)
        rl_device_key_wipe(dk);
    return result;
}

int rl_device_key_save(const char *path, const rl_device_key_t *dk)
{
    char sec[2 * RL_E2E_KEY_LEN + 1], pub[RL_E2E_PUBHEX_SIZE];
    json_t *root;
    char *text;
    int result = RL_E2E_E_IO;

    rl_hex_encode(dk->kp.sec, RL_E2E_KEY_LEN, sec);
    rl_e2e_pub_hex(dk->kp.pub, pub);
    root = json_pack("{s:s, s:s, s:s, s:s}", "public_key", pub, "secret_key", sec, "device_id", dk->device_id, "label",
                     dk->label);
    text = root != NULL ? json_dumps(root, JSON_INDENT(2)) : NULL;
    if (text != NULL)
        result = replace_file(path, text);
    free_secret_text(text);
    if (root != NULL)
        rl_e2e_wipe((char *)json_string_value(json_object_get(root, "secret_key")), sizeof(sec) - 1);
    json_decref(root);
    rl_e2e_wipe(sec, sizeof(sec));
    return result;
}

void rl_device_key_wipe(rl_device_key_t *dk)
{
    rl_e2e_wipe(dk, sizeof(*dk));
}

/* ---- the session key store -------------------------------------------------------------------------- */

static entry_t *find(const rl_keystore_t *ks, const char *session_id)
{
    size_t i;

    for (i = 0; i < ks->count; i++)
        if (strcmp(ks->entries[i].session_id, session_id) == 0)
            return &ks->entries[i];
    return NULL;
}

static void entry_wipe(entry_t *e)
{
    rl_e2e_wipe(e->keys, e->nkeys * RL_E2E_KEY_LEN);
    free(e->keys);
    free(e->session_id);
}

/* Appends key as the oldest of session_id's keys (loading keeps the file's order). -1 out of memory. */
static int append(rl_keystore_t *ks, const char *session_id, const uint8_t key[RL_E2E_KEY_LEN], int newest)
{
    entry_t *e = find(ks, session_id);
    uint8_t(*keys)[RL_E2E_KEY_LEN];

    if (e == NULL) {
        if (ks->count == ks->cap) {
            size_t cap = ks->cap != 0 ? ks->cap * 2 : 16;
            entry_t *grown = realloc(ks->entries, cap * sizeof(*grown));
            if (grown == NULL)
                return -1;
            ks->entries = grown;
            ks->cap = cap;
        }
        e = &ks->entries[ks->count];
        memset(e, 0, sizeof(*e));
        e->session_id = strdup(session_id);
        if (e->session_id == NULL)
            return -1;
        ks->count++;
    }
    /* A fresh array rather than realloc: realloc could leave a copy of the keys behind, unwiped. */
    keys = malloc((e->nkeys + 1) * RL_E2E_KEY_LEN);
    if (keys == NULL)
        return -1;
    if (e->nkeys > 0)
        memcpy(newest ? keys + 1 : keys, e->keys, e->nkeys * RL_E2E_KEY_LEN);
    memcpy(newest ? keys[0] : keys[e->nkeys], key, RL_E2E_KEY_LEN);
    rl_e2e_wipe(e->keys, e->nkeys * RL_E2E_KEY_LEN);
    free(e->keys);
    e->keys = keys;
    e->nkeys++;
    return 0;
}

rl_keystore_t *rl_keystore_load(const char *path)
{
    rl_keystore_t *ks = calloc(1, sizeof(*ks));
    json_t *root = NULL, *sessions, *keys;
    const char *sid;
    int result;

    if (ks == NULL)
        return NULL;
    ks->path = strdup(path);
    if (ks->path == NULL)
        goto fail;
    root = read_private_json(path, &result);
    if (root == NULL) {
        if (result == RL_E2E_E_IO && access(path, F_OK) != 0)
            return ks;
        goto fail;
    }
    sessions = json_object_get(root, "sessions");
    if (!json_is_object(sessions))
        goto fail;
    json_object_foreach(sessions, sid, keys)
    {
        size_t i;
        json_t *hex;
        json_array_foreach(keys, i, hex)
        {
            uint8_t key[RL_E2E_KEY_LEN];
            const char *text = json_string_value(hex);
            int bad = text == NULL || rl_hex_decode(text, strlen(text), key, sizeof(key)) != 0 ||
                      append(ks, sid, key, 0) != 0;
            rl_e2e_wipe(key, sizeof(key));
            if (text != NULL)
                rl_e2e_wipe((char *)text, strlen(text));
            if (bad)
                goto fail;
        }
    }
    json_decref(root);
    return ks;
fail:
    json_decref(root);
    rl_keystore_free(ks);
    return NULL;
}

void rl_keystore_free(rl_keystore_t *ks)
{
    size_t i;

    if (ks == NULL)
        return;
    for (i = 0; i < ks->count; i++)
        entry_wipe(&ks->entries[i]);
    free(ks->entries);
    free(ks->path);
    free(ks);
}

static int save(const rl_keystore_t *ks)
{
    json_t *root = json_object(), *sessions = json_object();
    char hex[2 * RL_E2E_KEY_LEN + 1];
    char *text = NULL;
    size_t i, k;
    int result = RL_E2E_E_IO;

    if (root == NULL || sessions == NULL)
        goto out;
    json_object_set(root, "sessions", sessions);
    for (i = 0; i < ks->count; i++) {
        json_t *keys = json_array();
        for (k = 0; k < ks->entries[i].nkeys; k++) {
            rl_hex_encode(ks->entries[i].keys[k], RL_E2E_KEY_LEN, hex);
            json_array_append_new(keys, json_string(hex));
        }
        json_object_set_new(sessions, ks->entries[i].session_id, keys);
    }
    text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
    if (text != NULL)
        result = replace_file(ks->path, text);
    /* The tree's strings held the keys too. */
    for (i = 0; i < ks->count; i++) {
        json_t *keys = json_object_get(sessions, ks->entries[i].session_id), *v;
        json_array_foreach(keys, k, v) rl_e2e_wipe((char *)json_string_value(v), json_string_length(v));
    }
out:
    rl_e2e_wipe(hex, sizeof(hex));
    free_secret_text(text);
    json_decref(sessions);
    json_decref(root);
    return result;
}

int rl_keystore_add(rl_keystore_t *ks, const char *session_id, const uint8_t key[RL_E2E_KEY_LEN])
{
    entry_t *e = find(ks, session_id);
    size_t i;

    for (i = 0; e != NULL && i < e->nkeys; i++)
        if (memcmp(e->keys[i], key, RL_E2E_KEY_LEN) == 0)
            return 0;
    if (append(ks, session_id, key, 1) != 0)
        return RL_E2E_E_IO;
    return save(ks) == 0 ? 1 : RL_E2E_E_IO;
}

int rl_keystore_take_grant(rl_keystore_t *ks, const char *session_id, const uint8_t key[RL_E2E_KEY_LEN],
                           rl_grant_trust_t trust)
{
    entry_t *e = find(ks, session_id);
    size_t i;
    int held = e != NULL && e->nkeys > 0, result;

    for (i = 0; held && i < e->nkeys; i++)
        if (memcmp(e->keys[i], key, RL_E2E_KEY_LEN) == 0)
            return 0;
    if (trust == RL_GRANT_FORGED || (held && trust == RL_GRANT_UNSIGNED))
        return RL_E2E_E_AUTH;
    if (trust == RL_GRANT_SIGNED || !held) {
        result = 1;
        if (append(ks, session_id, key, 1) != 0)
            return RL_E2E_E_IO;
    } else {
        /* The oldest key: it opens what was sealed with it, and never seals. */
        result = 2;
        if (append(ks, session_id, key, 0) != 0)
            return RL_E2E_E_IO;
    }
    return save(ks) == 0 ? result : RL_E2E_E_IO;
}

const uint8_t *rl_keystore_key(const rl_keystore_t *ks, const char *session_id, size_t i)
{
    entry_t *e = session_id != NULL ? find(ks, session_id) : NULL;

    return e != NULL && i < e->nkeys ? e->keys[i] : NULL;
}

size_t rl_keystore_count(const rl_keystore_t *ks)
{
    return ks->count;
}

const char *rl_keystore_session(const rl_keystore_t *ks, size_t i)
{
    return i < ks->count ? ks->entries[i].session_id : NULL;
}

int rl_keystore_forget(rl_keystore_t *ks, const char *session_id)
{
    entry_t *e = find(ks, session_id);

    if (e == NULL)
        return 0;
    entry_wipe(e);
    *e = ks->entries[--ks->count];
    return save(ks);
}

char *rl_keystore_seal_field(const rl_keystore_t *ks, const char *session_id, const char *path, const void *plain,
                             size_t len)
{
    const uint8_t *key = rl_keystore_key(ks, session_id, 0);

    return key != NULL ? rl_e2e_seal_field(key, path, plain, len) : NULL;
}

int rl_keystore_open_field(const rl_keystore_t *ks, const char *session_id, const char *path, const char *b64,
                           char **out, size_t *outlen)
{
    const uint8_t *key;
    size_t i;
    int result = RL_E2E_E_AUTH;

    *out = NULL;
    for (i = 0; (key = rl_keystore_key(ks, session_id, i)) != NULL; i++) {
        result = rl_e2e_open_field(key, path, b64, out, outlen);
        if (result != RL_E2E_E_AUTH)
            break;
    }
    return result;
}

int rl_e2e_path(char *out, size_t outsz, const char *kind, const char *session_id)
{
    int n = snprintf(out, outsz, "%s/%s", kind, session_id);

    return n < 0 || (size_t)n >= outsz ? -1 : 0;
}
