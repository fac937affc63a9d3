#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "common/base64.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/rand.h"
#include "relay/keys.h"
#include "relay/core/ops.h"

#define KEY_FILE_MAX 8192

/* A key: its name in the store and in the folder, and how to make a new one. */
struct key {
    const char *name;
    int (*make)(unsigned char *out, size_t *len);
};

/* key as unencrypted PEM PKCS#8 into out (*len bytes; set to the text's length), and freed. */
static int write_pem(EVP_PKEY *key, unsigned char *out, size_t *len)
{
    BIO *pem = BIO_new(BIO_s_secmem());
    char *text;
    long text_len;
    int result = -1;

    if (key != NULL && pem != NULL && PEM_write_bio_PrivateKey(pem, key, NULL, NULL, 0, NULL, NULL)) {
        text_len = BIO_get_mem_data(pem, &text);
        if (text_len > 0 && (size_t)text_len <= *len) {
            memcpy(out, text, (size_t)text_len);
            *len = (size_t)text_len;
            result = 0;
        }
    }
    EVP_PKEY_free(key);
    BIO_free(pem);
    return result;
}

/* An Ed25519 private key (what jwt.c loads). */
static int make_issuer_key(unsigned char *out, size_t *len)
{
    return write_pem(EVP_PKEY_Q_keygen(NULL, NULL, "ED25519"), out, len);
}

/* A P-256 private key: Web Push's VAPID key (webpush.c loads it). */
static int make_vapid_key(unsigned char *out, size_t *len)
{
    return write_pem(EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256"), out, len);
}

static int make_url_key(unsigned char *out, size_t *len)
{
    rl_rand_bytes(out, 32);
    *len = 32;
    return 0;
}

static const struct key keys[] = {
    {"issuer.key", make_issuer_key},
    {"url.key", make_url_key},
    /* Browsers' push subscriptions are bound to it: every node must push with the same one (docs/web.md). */
    {"vapid.key", make_vapid_key},
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* The file's bytes: 1 read, 0 absent, -1 unreadable (logged). */
static int read_key_file(const char *path, unsigned char *out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    ssize_t got;

    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        rl_log_error("cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    got = read(fd, out, KEY_FILE_MAX);
    close(fd);
    if (got <= 0 || got >= KEY_FILE_MAX) {
        rl_log_error("%s is empty or too large to be a key", path);
        return -1;
    }
    *len = (size_t)got;
    return 1;
}

/* Publishes bytes at path (0600) without a partial file ever showing; EEXIST when another process was first. */
static int write_key_file(const char *path, const unsigned char *bytes, size_t len)
{
    char tmp[1200], suffix[17];
    size_t done = 0;
    int fd, result = -1;

    rl_rand_hex(suffix, sizeof(suffix) - 1);
    snprintf(tmp, sizeof(tmp), "%s.%s.tmp", path, suffix);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    while (done < len) {
        ssize_t put = write(fd, bytes + done, len - done);
        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0)
            break;
        done += (size_t)put;
    }
    if (done == len && fsync(fd) == 0)
        result = link(tmp, path);
    close(fd);
    unlink(tmp);
    return result;
}

struct keys_op {
    rl_op_t op;
    int64_t now;
    const char *candidates[NKEYS]; /* base64url of each key, offered to the store */
    const char *values[NKEYS];     /* results: what the store holds */
};

/* Each key the store lacks takes the offered one; the first node to offer wins. */
static int keys_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct keys_op *op = (void *)base;
    size_t i;
    int result;

    for (i = 0; i < NKEYS; ++i) {
        result = RL_TXN(txn, secret_get, keys[i].name, &op->values[i]);
        if (result == RL_E_NOT_FOUND &&
            (result = RL_TXN(txn, secret_insert_ignore, keys[i].name, op->candidates[i], op->now)) == 0)
            result = RL_TXN(txn, secret_get, keys[i].name, &op->values[i]);
        if (result != 0)
            return result;
    }
    return 0;
}

/* The keys pass through the operation's arena: wiped before it is freed. */
static void keys_dispose(rl_store_op_t *base)
{
    struct keys_op *op = (void *)base;
    size_t i;

    for (i = 0; i < NKEYS; ++i) {
        if (op->candidates[i] != NULL)
            OPENSSL_cleanse((void *)op->candidates[i], strlen(op->candidates[i]));
        if (op->values[i] != NULL)
            OPENSSL_cleanse((void *)op->values[i], strlen(op->values[i]));
    }
    rl_op_dispose(base);
}

static const rl_store_op_type_t keys_type = {"keys_sync", 1, keys_run, keys_dispose};

/* What the sync knows of the folder before, and how it ended. */
struct sync {
    const char *data_dir;
    int had[NKEYS];
    int result;
};

/* Makes each folder key the store's value: written where absent, refused where it differs. */
static void on_keys(rl_store_op_t *base)
{
    struct keys_op *op = (void *)base;
    struct sync *sync = base->arg;
    unsigned char bytes[KEY_FILE_MAX];
    char path[1100];
    size_t i;

    sync->result = base->result;
    if (base->result != 0) {
        rl_log_error("cannot read or store the signing keys: %s", rl_error_code(base->result));
        return;
    }
    for (i = 0; i < NKEYS && sync->result == 0; ++i) {
        size_t encoded_len = strlen(op->values[i]);
        long len;
        if (strcmp(op->values[i], op->candidates[i]) == 0 && sync->had[i])
            continue;
        snprintf(path, sizeof(path), "%s/%s", sync->data_dir, keys[i].name);
        if (sync->had[i]) {
            /* The folder had a key of its own, and the relay's nodes share another one. */
            rl_log_error("%s differs from the %s this relay's store holds (the key every node shares); move it "
                         "away to take the shared one, or point this node at the store it belongs to",
                         path, keys[i].name);
            sync->result = RL_E_CONFLICT;
            break;
        }
        if (encoded_len * 3 / 4 + 3 > sizeof(bytes) ||
            (len = rl_base64url_decode(op->values[i], encoded_len, bytes)) <= 0) {
            rl_log_error("the store's %s is damaged", keys[i].name);
            sync->result = RL_E_INTERNAL;
            break;
        }
        if (write_key_file(path, bytes, (size_t)len) != 0) {
            rl_log_error("cannot write %s: %s", path, strerror(errno));
            sync->result = RL_E_INTERNAL;
        }
        OPENSSL_cleanse(bytes, sizeof(bytes));
    }
}

int rl_keys_sync(rl_store_t *store, const char *data_dir)
{
    struct keys_op *op = rl_op_new(&keys_type, sizeof(*op));
    struct sync sync = {.data_dir = data_dir, .result = RL_E_INTERNAL};
    unsigned char bytes[KEY_FILE_MAX];
    char path[1100], encoded[RL_BASE64URL_ENCODED_SIZE(KEY_FILE_MAX)];
    size_t i, len;

    for (i = 0; i < NKEYS; ++i) {
        snprintf(path, sizeof(path), "%s/%s", data_dir, keys[i].name);
        len = sizeof(bytes);
        sync.had[i] = read_key_file(path, bytes, &len);
        if (sync.had[i] < 0 || (sync.had[i] == 0 && keys[i].make(bytes, &len) != 0)) {
            if (sync.had[i] == 0)
                rl_log_error("cannot make a new %s", keys[i].name);
            rl_store_op_free(&op->op.base);
            return -1;
        }
        rl_base64url_encode(bytes, len, encoded);
        op->candidates[i] = rl_op_str(op, encoded);
        OPENSSL_cleanse(bytes, sizeof(bytes));
        OPENSSL_cleanse(encoded, sizeof(encoded));
    }
    op->now = rl_clock_now_ms();
    rl_store_submit(store, &op->op.base, on_keys, &sync);
    rl_store_drain(store);
    return sync.result == 0 ? 0 : -1;
}
