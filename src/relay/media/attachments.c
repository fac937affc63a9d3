/*
 * Attachments (brief): a raw upload of at most 25 MB, referenced by key, and
 * a signed, expiring URL that every delivery of a message hydrates.
 *
 * An upload's body arrives in h2o's socket buffer, which is file-backed once
 * it grows past a few megabytes. It is copied into --attachments one
 * slice per loop turn, so that a large upload never holds the loop for long;
 * the file is written under a temporary name and renamed once complete.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/hex.h"
#include "common/log.h"
#include "common/percent.h"
#include "common/rand.h"
#include "common/strmap.h"
#include "http/query.h"
#include "relay/media/attachments.h"
#include "relay/media/media.h"
#include "relay/turn/deltas.h"
#include "relay/core/auth.h"
#include "relay/e2e/e2e.h"
#include "relay/core/feature.h"
#include "relay/core/ops.h"
#include "relay/core/target.h"

#define SLICE          (1024 * 1024)
#define KEY_CHARS      24
#define URL_KEY_FILE   "url.key"
#define NAME_MAX_BYTES 255
#define MIME_MAX_BYTES 255
/* A sealed {name, mime, size, sha256}: a 255-byte name and type and the rest fit in 2 KiB of base64. */
#define META_CT_MAX  2048
#define SEALED_MIME  "application/octet-stream"
#define LINK_REFUSED "no such file, or the link is wrong or has expired"
/*
 * What this node learns of a user's attachment bytes (each upload's
 * transaction counts them) is trusted to refuse an upload from its declared
 * length. Another node's uploads only make the real count higher, which the
 * transaction still catches; removals make it lower, and they happen only in
 * the sweeps: this node's own forget every entry, and with other nodes (whose
 * sweeps this one does not see) an entry is trusted for a minute only.
 */
#define USAGE_KNOWN_MAX 100000
#define USAGE_TTL_MS    (60 * 1000)

struct known_usage {
    int64_t bytes;
    int64_t until_ms;
};

static const rl_field_t attachment_ref_fields[] = {
    RL_FIELD_STRING("key", RL_F_REQUIRED, 1, 128),
    RL_FIELD_STRING("mime", 0, 1, 255),
    RL_FIELD_INTEGER_RANGE("size", 0, 0, RL_ATTACHMENT_MAX),
    RL_FIELD_STRING("name", RL_F_NULLABLE, 0, 255),
    /* issue 26: the real name, type, size and SHA-256 of a sealed upload, sealed (attachments/<sid>). */
    RL_FIELD_CT("meta_ct", 0, META_CT_MAX),
    RL_FIELD_END,
};
static const rl_schema_t attachment_ref_schema = RL_SCHEMA(attachment_ref_fields);
const rl_field_t rl_attachment_ref_item = RL_FIELD_OBJECT(NULL, RL_F_REQUIRED, &attachment_ref_schema);

/* The folder, DATA/tmp and the URL key of rl_media_open. 0 or -1 with the cause logged. */
static int media_files(rl_media_t *media)
{
    const rl_config_t *config = media->ctx.config;
    char path[1200];
    unsigned char key[32];
    int fd;
    ssize_t got;

    /* Several nodes must share one folder (--attachments): each serves what any of them stored. */
    if (config->attachments[0] != '\0')
        snprintf(media->folder, sizeof(media->folder), "%s", config->attachments);
    else if ((size_t)snprintf(media->folder, sizeof(media->folder), "%s/attachments", config->data) >=
             sizeof(media->folder)) {
        rl_log_error("the data folder path is too long");
        return -1;
    }
    snprintf(path, sizeof(path), "%s", media->folder);
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        rl_log_error("cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    /*
     * Request bodies past a few megabytes live in h2o's file-backed buffers:
     * keep those files in the data folder, on its disk, rather than in a /tmp
     * that may be memory. h2o unlinks each one as soon as it is created.
     */
    snprintf(path, sizeof(path), "%s/tmp", config->data);
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        rl_log_error("cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    if ((size_t)snprintf(h2o_socket_buffer_mmap_settings.fn_template,
                         sizeof(h2o_socket_buffer_mmap_settings.fn_template), "%s/upload.XXXXXX",
                         path) >= sizeof(h2o_socket_buffer_mmap_settings.fn_template)) {
        rl_log_error("the data folder path is too long");
        return -1;
    }
    /* The key that signs download URLs: random, made once, never leaves the data folder. */
    snprintf(path, sizeof(path), "%s/%s", config->data, URL_KEY_FILE);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        rl_rand_bytes(key, sizeof(key));
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0 && (write(fd, key, sizeof(key)) != (ssize_t)sizeof(key) || fsync(fd) != 0)) {
            close(fd);
            unlink(path);
            fd = -1;
        }
        if (fd >= 0) {
            close(fd);
            fd = open(path, O_RDONLY | O_CLOEXEC);
        }
    }
    if (fd < 0) {
        rl_log_error("cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    got = read(fd, media->url_key, sizeof(media->url_key));
    close(fd);
    OPENSSL_cleanse(key, sizeof(key));
    if (got != (ssize_t)sizeof(media->url_key)) {
        rl_log_error("%s is damaged: delete it to make a new one (outstanding download links stop working)", path);
        return -1;
    }
    return 0;
}

int rl_media_open(const rl_media_ctx_t *ctx, rl_media_t **out)
{
    rl_media_t *media = calloc(1, sizeof(*media));

    *out = NULL;
    if (media == NULL)
        return -1;
    media->ctx = *ctx;
    if (media_files(media) != 0) {
        rl_media_close(media);
        return -1;
    }
    *out = media;
    return 0;
}

void rl_media_close(rl_media_t *media)
{
    if (media == NULL)
        return;
    rl_strmap_free(media->usage, free);
    OPENSSL_cleanse(media->url_key, sizeof(media->url_key));
    free(media);
}

int rl_media_disk_full(const rl_media_t *media, uint64_t *refusals)
{
    *refusals = media != NULL ? media->full_refusals : 0;
    return media != NULL && media->full;
}

static int usage_lapsed(const char *key, void *value, void *arg)
{
    return ((const struct known_usage *)value)->until_ms <= *(const int64_t *)arg;
}

static void usage_learn(rl_media_t *media, const char *user_id, int64_t bytes)
{
    struct known_usage *known;
    int64_t now = rl_clock_now_ms();

    if (media->usage == NULL && (media->usage = rl_strmap_new(USAGE_KNOWN_MAX)) == NULL)
        return;
    known = rl_strmap_get(media->usage, user_id);
    if (known == NULL) {
        if (rl_strmap_size(media->usage) >= USAGE_KNOWN_MAX)
            rl_strmap_sweep(media->usage, usage_lapsed, &now, free);
        known = malloc(sizeof(*known));
        if (known == NULL || rl_strmap_put(media->usage, user_id, known) != 0) {
            free(known);
            return;
        }
    }
    known->bytes = bytes;
    known->until_ms = media->ctx.shared ? now + USAGE_TTL_MS : INT64_MAX;
}

int rl_attachments_head_limit(rl_media_t *media, const rl_route_t *route, const char *authorization, size_t len,
                              rl_http_head_limit_t *limit)
{
    char user[RL_PRINCIPAL_MAX + 1];
    const struct known_usage *known;
    int64_t quota;

    if (media == NULL || media->usage == NULL || rl_strmap_size(media->usage) == 0 ||
        rl_auth_known_owner(media->ctx.auth, authorization, len, user, sizeof(user)) != 0)
        return 0;
    quota = media->ctx.config->attachment_quota;
    known = rl_strmap_get(media->usage, user);
    if (known == NULL || known->until_ms <= rl_clock_now_ms())
        return 0;
    limit->limit = known->bytes >= quota ? 0 : (size_t)(quota - known->bytes);
    limit->err = RL_E_QUOTA_EXCEEDED;
    limit->details = json_pack("{s:I}", "quota_bytes", (json_int_t)quota);
    return 1;
}

static int valid_key(const char *key)
{
    size_t i, len = strlen(key);

    if (len != 4 + KEY_CHARS || memcmp(key, "att_", 4) != 0)
        return 0;
    for (i = 4; i < len; ++i) {
        char c = key[i];
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')))
            return 0;
    }
    return 1;
}

static void sign(const rl_media_t *media, const char *key, long long expires, char *out)
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    char message[96];
    int len = snprintf(message, sizeof(message), "%s.%lld", key, expires);

    HMAC(EVP_sha256(), media->url_key, sizeof(media->url_key), (const unsigned char *)message, (size_t)len, mac,
         &mac_len);
    rl_hex_encode(mac, 16, out);
}

void rl_attachments_sign(const rl_media_t *media, json_t *attachments)
{
    long long expires = (long long)((rl_clock_now_ms() + media->ctx.config->attachment_url_ttl) / 1000);
    json_t *item;
    size_t i;

    json_array_foreach(attachments, i, item)
    {
        const char *key = json_string_value(json_object_get(item, "key"));
        char signature[33], url[1024];
        if (key == NULL)
            continue;
        sign(media, key, expires, signature);
        snprintf(url, sizeof(url), "%s/v1/files/%s?exp=%lld&sig=%s", media->ctx.config->public_url, key, expires,
                 signature);
        json_object_set_new(item, "url", json_string(url));
        json_object_set_new(item, "url_expires_at", json_integer(expires * 1000));
    }
}

/*
 * issue 26: what an attachment of a session must look like. In an encrypted
 * session the bytes were sealed before upload, so the upload says nothing
 * of them (application/octet-stream, no name), and a message's entry says
 * the rest sealed (meta_ct); a plain session takes no meta_ct. A refusal's
 * message, or NULL.
 */
static const char *sealing_problem(const json_t *ref, const rl_attachment_row_t *row, rl_attachment_sealing_t sealing)
{
    const json_t *name = json_object_get(ref, "name");
    const char *mime = json_string_value(json_object_get(ref, "mime"));

    if (sealing == RL_ATTACHMENTS_PLAIN)
        return json_object_get(ref, "meta_ct") != NULL
                   ? "This session is not encrypted: meta_ct is refused (send the plain name)"
                   : NULL;
    if (strcmp(row->mime, SEALED_MIME) != 0 || (row->name != NULL && row->name[0] != '\0'))
        return "This session is end-to-end encrypted: upload the sealed bytes as " SEALED_MIME " with no name";
    if (name != NULL && !json_is_null(name))
        return "This session is end-to-end encrypted: the name goes sealed in meta_ct, not name";
    if (mime != NULL && strcmp(mime, SEALED_MIME) != 0)
        return "This session is end-to-end encrypted: the type goes sealed in meta_ct, not mime";
    if (sealing == RL_ATTACHMENTS_SEALED && json_object_get(ref, "meta_ct") == NULL)
        return "This session is end-to-end encrypted: each attachment carries meta_ct";
    return NULL;
}

int rl_attachments_resolve(rl_txn_t *txn, const char *user_id, json_t *refs, rl_attachment_sealing_t sealing,
                           json_t **resolved, const char **problem)
{
    json_t *items = json_array(), *ref, *item;
    const char *given;
    rl_attachment_row_t row;
    size_t i;
    int result;

    json_array_foreach(refs, i, ref)
    {
        result = RL_TXN(txn, attachment_get, json_string_value(json_object_get(ref, "key")), &row);
        /* Someone else's upload, or one on its way out, is not there. */
        if (result == 0 && (strcmp(row.user_id, user_id) != 0 || row.doomed_at != RL_NO_TIME))
            result = RL_E_NOT_FOUND;
        if (result == 0 && (*problem = sealing_problem(ref, &row, sealing)) != NULL)
            result = RL_E_INVALID_REQUEST;
        if (result != 0) {
            json_decref(items);
            return result;
        }
        /* The name a message gives wins over the upload's (null or absent keeps it); mime and size are the file's. */
        given = json_string_value(json_object_get(ref, "name"));
        item = json_pack("{s:s, s:s, s:I, s:s?}", "key", row.key, "mime", row.mime, "size", (json_int_t)row.size,
                         "name", given != NULL ? given : row.name);
        if (json_object_get(ref, "meta_ct") != NULL)
            json_object_set(item, "meta_ct", json_object_get(ref, "meta_ct"));
        json_array_append_new(items, item);
    }
    *resolved = items;
    return 0;
}

int rl_attachments_use(rl_txn_t *txn, json_t *resolved, const char *session_id, int64_t now)
{
    json_t *item;
    size_t i;
    int result;

    json_array_foreach(resolved, i, item)
    {
        if ((result = RL_TXN(txn, attachment_use, json_string_value(json_object_get(item, "key")), session_id, now)) !=
            0)
            return result;
    }
    return 0;
}

/* ---- removal ---- */

/* At most this many attachments are marked, and this many removed, per sweep (one a second). */
#define SWEEP_BATCH 256

struct sweep {
    rl_op_t op; /* value: the keys whose files go, then their rows */
    int64_t now, delete_grace, unused_ttl;
    int64_t sessions; /* result: sessions purged */
};

/*
 * An attachment lives as long as a session references it; one never
 * referenced, --unused-attachment-ttl after its upload. Removal has two
 * steps so that a crash loses nothing and leaves nothing: the row is marked
 * doomed (from then on it cannot be sent, downloaded or counted), the file
 * is unlinked on the loop, and only then is the row deleted. A doomed row
 * left by a crash is found by the next sweep and finished.
 */
static int sweep_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct sweep *op = (void *)base;
    rl_attachment_row_t *rows;
    size_t count, i;
    int result;

    /* brief: after the delete grace a session is purged, with its messages and what they reference. */
    if ((result = RL_TXN(txn, sessions_purge, op->now - op->delete_grace, &op->sessions)) != 0 ||
        (result = RL_TXN(txn, attachments_unreferenced, op->now - op->unused_ttl, SWEEP_BATCH, &rows, &count)) != 0)
        return result;
    for (i = 0; i < count; ++i) {
        if ((result = RL_TXN(txn, attachment_doom, rows[i].key, op->now)) != 0 && result != RL_E_NOT_FOUND)
            return result;
    }
    if ((result = RL_TXN(txn, attachments_doomed, SWEEP_BATCH, &rows, &count)) != 0)
        return result;
    op->op.value = json_array();
    for (i = 0; i < count; ++i)
        json_array_append_new(op->op.value, json_string(rows[i].key));
    return 0;
}

static const rl_store_op_type_t sweep_type = RL_OP_TYPE(attachments_sweep, 1, sweep_run);

rl_store_op_t *rl_attachments_sweep(rl_media_t *media, int64_t now)
{
    struct sweep *op = rl_op_new(&sweep_type, sizeof(*op));

    op->now = now;
    op->delete_grace = media->ctx.config->delete_grace;
    op->unused_ttl = media->ctx.config->unused_attachment_ttl;
    return &op->op.base;
}

struct forget {
    rl_op_t op;
    json_t *keys;
};

static int forget_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct forget *op = (void *)base;
    json_t *key;
    size_t i;
    int result;

    json_array_foreach(op->keys, i, key)
    {
        if ((result = RL_TXN(txn, attachment_delete, json_string_value(key))) != 0 && result != RL_E_NOT_FOUND)
            return result;
    }
    return 0;
}

static void forget_dispose(rl_store_op_t *base)
{
    json_decref(((struct forget *)base)->keys);
    rl_op_dispose(base);
}

static const rl_store_op_type_t forget_type = {"attachments_forget", 1, forget_run, forget_dispose};

static void on_forgotten(rl_store_op_t *base)
{
    if (base->result != 0)
        rl_log_warn("removed attachment files whose rows could not be deleted; the next sweep finishes them");
}

void rl_attachments_swept(rl_media_t *media, rl_store_op_t *base)
{
    struct sweep *op = (void *)base;
    struct forget *forget;
    char path[1200];
    json_t *key;
    size_t i;

    if (base->result != 0) {
        /* The store logs its own outage once (RL_E_UNAVAILABLE): the sweep meeting it is not news each second. */
        if (base->result == RL_E_UNAVAILABLE)
            rl_log_debug("the sweep of deleted sessions and attachments found the store unavailable; it runs again "
                         "in a second");
        else
            rl_log_warn("the sweep of deleted sessions and attachments failed; it runs again in a second");
        return;
    }
    if (op->sessions > 0) {
        rl_log_info("purged %lld sessions past their delete grace", (long long)op->sessions);
        /* Their messages are gone: a record kept of one answers as the store now does (404). */
        rl_deltas_forget_all(media->ctx.deltas);
    }
    if (json_array_size(op->op.value) == 0)
        return;
    json_array_foreach(op->op.value, i, key)
    {
        snprintf(path, sizeof(path), "%s/%s", media->folder, json_string_value(key));
        if (unlink(path) != 0 && errno != ENOENT)
            rl_log_warn("cannot remove %s: %s", path, strerror(errno));
    }
    rl_log_info("removed %zu attachments no message references", json_array_size(op->op.value));
    /* Whose bytes went is not known here: what this node knew of anyone's usage may now be too high. */
    rl_strmap_free(media->usage, free);
    media->usage = NULL;
    forget = rl_op_new(&forget_type, sizeof(*forget));
    forget->keys = json_incref(op->op.value);
    rl_store_submit(media->ctx.store, &forget->op.base, on_forgotten, media);
}

/* ---- upload ---- */

struct upload {
    rl_call_t *call;
    rl_media_t *media;
    h2o_timeout_entry_t step;
    int fd;
    size_t written;
    char key[4 + KEY_CHARS + 1];
    char mime[MIME_MAX_BYTES + 1];
    char name[NAME_MAX_BYTES + 1];
    int has_name;
    char final_path[1200], part_path[1216];
};

/* A refused or failed upload leaves no file: removed before the answer goes out, not after. */
static void upload_drop_files(struct upload *upload)
{
    if (upload->fd >= 0)
        close(upload->fd);
    upload->fd = -1;
    unlink(upload->part_path);
    unlink(upload->final_path);
}

static void upload_free(struct upload *upload, int keep_file)
{
    if (upload->fd >= 0)
        close(upload->fd);
    if (!keep_file)
        upload_drop_files(upload);
    rl_call_release(upload->call);
    free(upload);
}

struct attachment_op {
    rl_op_t op;
    rl_attachment_row_t row;
    int64_t quota;               /* the user's storage quota (--attachment-quota) */
    int64_t used;                /* result: the user's bytes before this upload */
    const char *installation_id; /* the uploading bridge's, or NULL for a user */
};

static int attachment_insert_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct attachment_op *op = (void *)base;
    int64_t used = 0;
    int result = RL_TXN(txn, attachments_usage, op->row.user_id, &used);

    if (result == 0 && op->installation_id != NULL)
        result = rl_target_installation_check(txn, op->installation_id);
    if (result != 0)
        return result;
    op->used = used;
    /* Counted in the transaction that adds the file, so that concurrent uploads cannot both slip under. */
    if (used + op->row.size > op->quota)
        return RL_E_QUOTA_EXCEEDED;
    return RL_TXN(txn, attachment_insert, &op->row);
}

static int attachment_get_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct attachment_op *op = (void *)base;

    return RL_TXN(txn, attachment_get, op->row.key, &op->row);
}

static const rl_store_op_type_t attachment_insert_type = RL_OP_TYPE(attachment_insert, 1, attachment_insert_run);
static const rl_store_op_type_t attachment_get_type = RL_OP_TYPE(attachment_get, 0, attachment_get_run);

static void on_upload_recorded(rl_store_op_t *base)
{
    struct upload *upload = base->arg;
    rl_call_t *call = upload->call;

    if (base->result == RL_E_QUOTA_EXCEEDED) {
        usage_learn(upload->media, call->owner, ((struct attachment_op *)base)->used);
        upload_drop_files(upload);
        rl_call_fail_full(call, base->result, NULL, NULL,
                          json_pack("{s:I}", "quota_bytes", (json_int_t)((struct attachment_op *)base)->quota));
        upload_free(upload, 0);
        return;
    }
    if (base->result != 0) {
        upload_drop_files(upload);
        rl_call_fail(call, base->result, NULL);
        upload_free(upload, 0);
        return;
    }
    usage_learn(upload->media, call->owner, ((struct attachment_op *)base)->used + (int64_t)upload->written);
    if (upload->media->full) {
        upload->media->full = 0;
        rl_log_info("the attachments folder's disk has room again");
    }
    rl_call_reply(call, json_pack("{s:s, s:s, s:I, s:s?}", "key", upload->key, "mime", upload->mime, "size",
                                  (json_int_t)upload->written, "name", upload->has_name ? upload->name : NULL));
    upload_free(upload, 1);
}

/*
 * An upload the attachments folder could not take (errno err). A full disk
 * (or quota) is an overload the client waits out: 503 storage_full with
 * Retry-After, told in the log once per episode (docs/operations.md, "A full
 * disk") and counted; anything else is an internal error, logged.
 */
static void upload_failed(rl_media_t *media, rl_call_t *call, int err, const char *what)
{
    if (err == ENOSPC || err == EDQUOT) {
        ++media->full_refusals;
        if (!media->full)
            rl_log_warn("the attachments folder's disk is full: uploads are refused (503 storage_full) until "
                        "there is room again");
        media->full = 1;
        rl_call_fail(call, RL_E_STORAGE_FULL,
                     "the relay's disk is full: the attachment could not be stored; retry later");
        return;
    }
    rl_log_error("writing attachment %s: %s", what, strerror(err));
    rl_call_fail(call, RL_E_INTERNAL, "the attachment could not be stored");
}

static void upload_step(h2o_timeout_entry_t *entry)
{
    struct upload *upload = H2O_STRUCT_FROM_MEMBER(struct upload, step, entry);
    rl_call_t *call = upload->call;
    struct attachment_op *op;
    size_t chunk;
    ssize_t done;

    /* The body belongs to the request: once the client has gone it must not be read. */
    if (call->req == NULL) {
        upload_free(upload, 0);
        return;
    }
    chunk = call->req->entity.len - upload->written;
    if (chunk > SLICE)
        chunk = SLICE;
    while (chunk > 0) {
        done = write(upload->fd, call->req->entity.base + upload->written, chunk);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0) {
            int err = done < 0 ? errno : ENOSPC; /* a regular file's short write: no room left */
            upload_drop_files(upload);
            upload_failed(upload->media, call, err, upload->key);
            upload_free(upload, 0);
            return;
        }
        upload->written += (size_t)done;
        chunk -= (size_t)done;
    }
    if (upload->written < call->req->entity.len) {
        h2o_timeout_link(upload->media->ctx.loop, upload->media->ctx.zero_timeout, &upload->step);
        return;
    }
    /* Complete: give it its final name, then record it. Durable against a crash of relayd, like the store. */
    close(upload->fd);
    upload->fd = -1;
    if (rename(upload->part_path, upload->final_path) != 0) {
        upload_drop_files(upload);
        rl_call_fail(call, RL_E_INTERNAL, "the attachment could not be stored");
        upload_free(upload, 0);
        return;
    }
    op = rl_op_new(&attachment_insert_type, sizeof(*op));
    op->row.key = rl_op_str(op, upload->key);
    op->row.user_id = rl_op_str(op, call->owner);
    op->row.mime = rl_op_str(op, upload->mime);
    op->row.name = upload->has_name ? rl_op_str(op, upload->name) : NULL;
    op->row.size = (int64_t)upload->written;
    op->row.created_at = rl_clock_now_ms();
    op->row.used_at = RL_NO_TIME;
    op->row.doomed_at = RL_NO_TIME;
    op->quota = upload->media->ctx.config->attachment_quota;
    if (call->principal_kind == RL_PRINCIPAL_INSTALLATION)
        op->installation_id = rl_op_str(op, call->principal);
    rl_store_submit(upload->media->ctx.store, &op->op.base, on_upload_recorded, upload);
}

static json_t *problem(const char *path, const char *code, const char *message)
{
    return json_pack("[{s:s, s:s, s:s}]", "path", path, "code", code, "message", message);
}

int rl_attachment_upload(rl_call_t *call)
{
    return rl_attachment_upload_for(call, call->principal);
}

int rl_attachment_upload_for(rl_call_t *call, const char *user_id)
{
    rl_media_t *media = rl_feature_of(call, RL_FEATURE_MEDIA);
    h2o_req_t *req = call->req;
    struct upload *upload;
    ssize_t index = h2o_find_header(&req->headers, H2O_TOKEN_CONTENT_TYPE, -1);
    int found;

    /* The owner travels with the call to the completion; a bridge's is already there. */
    if (user_id != call->owner)
        snprintf(call->owner, sizeof(call->owner), "%s", user_id);
    if (req->entity.base == NULL || req->entity.len == 0) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, "the upload is empty",
                          problem("", "too_small", "An attachment needs at least one byte"), NULL);
        return 0;
    }
    upload = calloc(1, sizeof(*upload));
    if (upload == NULL)
        return RL_E_INTERNAL;
    upload->fd = -1;
    if (index >= 0 && req->headers.entries[index].value.len > 0 &&
        req->headers.entries[index].value.len <= MIME_MAX_BYTES) {
        memcpy(upload->mime, req->headers.entries[index].value.base, req->headers.entries[index].value.len);
    } else if (index >= 0) {
        free(upload);
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          problem("content-type", "too_big", "Content-Type must be 1 to 255 bytes"), NULL);
        return 0;
    } else {
        strcpy(upload->mime, "application/octet-stream");
    }
    found = rl_query_param(req, "name", upload->name, sizeof(upload->name));
    if (found == 0 && upload->name[0] != '\0') {
        upload->has_name = 1;
    } else if (found != 1) {
        free(upload);
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          problem("name", "invalid_string", "name must be 1 to 255 bytes, percent-encoded"), NULL);
        return 0;
    }
    upload->call = call;
    upload->media = media;
    rl_rand_id(upload->key, sizeof(upload->key), "att_", KEY_CHARS);
    snprintf(upload->final_path, sizeof(upload->final_path), "%s/%s", media->folder, upload->key);
    snprintf(upload->part_path, sizeof(upload->part_path), "%s.part", upload->final_path);
    upload->fd = open(upload->part_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    rl_call_hold(call);
    if (upload->fd < 0) {
        upload_failed(media, call, errno, upload->part_path);
        upload_free(upload, 0);
        return 0;
    }
    upload->step.cb = upload_step;
    upload_step(&upload->step);
    return 0;
}

/* ---- download ---- */

/*
 * Types a browser shows without running anything: these are served inline,
 * everything else (HTML, SVG, XML, PDF, scripts, styles, wasm, unknown) as a
 * download of type application/octet-stream, so that an upload never becomes
 * a page, a script or a stylesheet on the relay's origin. Every download
 * also carries "Content-Security-Policy: sandbox" (no script, a unique
 * origin) and nosniff, in case a browser renders it anyway.
 */
static const char *const inline_types[] = {
    "image/png", "image/jpeg", "image/gif",  "image/webp", "image/avif", "audio/mpeg",
    "audio/ogg", "audio/wav",  "audio/webm", "audio/mp4",  "audio/aac",  "audio/flac",
    "video/mp4", "video/webm", "video/ogg",  "text/plain", NULL,
};

/* The stored mime, when it is a plain header value (it came from a client); else octet-stream. */
static const char *served_mime(const char *mime)
{
    size_t i;

    if (mime == NULL || mime[0] == '\0')
        return "application/octet-stream";
    for (i = 0; mime[i] != '\0'; ++i) {
        unsigned char c = (unsigned char)mime[i];
        if (c < 0x20 || c > 0x7e)
            return "application/octet-stream";
    }
    return mime;
}

static int shown_inline(const char *mime)
{
    size_t len = strcspn(mime, "; \t"), i;

    for (i = 0; inline_types[i] != NULL; ++i) {
        if (strlen(inline_types[i]) == len && strncasecmp(mime, inline_types[i], len) == 0)
            return 1;
    }
    return 0;
}

/*
 * Content-Disposition with the upload's name, if any: filename*= carries it
 * exactly (RFC 8187, percent-encoded UTF-8) and filename= an ASCII stand-in
 * for old clients. Nothing of the name reaches the header unencoded.
 */
static h2o_iovec_t disposition(h2o_mem_pool_t *pool, int as_inline, const char *name)
{
    static const char quoted_head[] = "; filename=\"", extended_head[] = "\"; filename*=UTF-8''";
    const char *kind = as_inline ? "inline" : "attachment";
    size_t len = strlen(kind), i, name_len = name != NULL ? strlen(name) : 0;
    char *out, *p;

    if (name_len == 0)
        return h2o_strdup(pool, kind, len);
    out = h2o_mem_alloc_pool(pool, len + sizeof(quoted_head) + name_len + sizeof(extended_head) + 3 * name_len);
    p = out;
    memcpy(p, kind, len);
    p += len;
    memcpy(p, quoted_head, sizeof(quoted_head) - 1);
    p += sizeof(quoted_head) - 1;
    for (i = 0; i < name_len; ++i) {
        unsigned char c = (unsigned char)name[i];
        *p++ = (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '%' && c != ';') ? (char)c : '_';
    }
    memcpy(p, extended_head, sizeof(extended_head) - 1);
    p += sizeof(extended_head) - 1;
    /* RFC 8187 attr-char stays as it is. */
    p += rl_percent_encode(name, name_len, p, "!#$&+-.^_`|~");
    return h2o_iovec_init(out, (size_t)(p - out));
}

static void on_file_meta(rl_store_op_t *base)
{
    struct attachment_op *op = (void *)base;
    rl_call_t *call = base->arg;
    const rl_media_t *media = rl_feature_of(call, RL_FEATURE_MEDIA);
    char path[1200];

    /* A file on its way out (its session purged, or never used) is gone already for its links. */
    if (base->result == 0 && op->row.doomed_at != RL_NO_TIME)
        base->result = RL_E_NOT_FOUND;
    if (base->result != 0 || !rl_call_alive(call)) {
        rl_call_fail(call, base->result == 0 ? RL_E_INTERNAL : RL_E_NOT_FOUND, LINK_REFUSED);
    } else {
        h2o_req_t *req = call->req;
        const char *mime = served_mime(op->row.mime);
        int as_inline = shown_inline(mime);
        h2o_iovec_t shown = disposition(&req->pool, as_inline, op->row.name);
        snprintf(path, sizeof(path), "%s/%s", media->folder, op->row.key);
        call->responded = 1;
        call->status = 200;
        rl__call_common_headers(call);
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL,
                       H2O_STRLIT("private, max-age=3600"));
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-content-type-options"), 0, NULL,
                              H2O_STRLIT("nosniff"));
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("content-security-policy"), 0, NULL,
                              H2O_STRLIT("sandbox"));
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_DISPOSITION, NULL, shown.base, shown.len);
        rl__call_log(call);
        /*
         * Anything not shown inline goes out as bytes, whatever type it was
         * uploaded with: the page's script-src 'self' would run an upload
         * served as text/javascript from this origin, and a stylesheet or a
         * wasm module likewise. The type the uploader gave stays in the
         * message's attachment (mime) for clients to show.
         */
        if (!as_inline)
            mime = "application/octet-stream";
        if (h2o_file_send(req, 200, "OK", path, h2o_strdup(&req->pool, mime, SIZE_MAX), 0) != 0) {
            call->responded = 0;
            rl_call_fail(call, RL_E_NOT_FOUND, LINK_REFUSED);
        }
    }
    rl_call_release(call);
}

/*
 * A signed link is served only as it was issued: the path as sent must be
 * /v1/files/<key> exactly, with no trailing slash, escape (%00), dot segment
 * or doubled slash that the router's normalisation would have let through.
 */
static int exact_link(const h2o_req_t *req, const char *key)
{
    static const char prefix[] = "/v1/files/";
    size_t path_len = req->query_at != SIZE_MAX ? req->query_at : req->path.len;
    size_t key_len = strlen(key);

    return path_len == sizeof(prefix) - 1 + key_len && memcmp(req->path.base, prefix, sizeof(prefix) - 1) == 0 &&
           memcmp(req->path.base + sizeof(prefix) - 1, key, key_len) == 0;
}

int rl_attachment_download(rl_call_t *call)
{
    const rl_media_t *media = rl_feature_of(call, RL_FEATURE_MEDIA);
    char key[64], exp_text[24], signature[40], expected[33];
    struct attachment_op *op;
    long long expires;
    char *tail;

    if (rl_call_param(call, 0, key, sizeof(key)) != 0 || !valid_key(key) || !exact_link(call->req, key) ||
        rl_query_param(call->req, "exp", exp_text, sizeof(exp_text)) != 0 ||
        rl_query_param(call->req, "sig", signature, sizeof(signature)) != 0) {
        rl_call_fail(call, RL_E_NOT_FOUND, LINK_REFUSED);
        return 0;
    }
    expires = strtoll(exp_text, &tail, 10);
    sign(media, key, expires, expected);
    /* A wrong signature and an expired link look the same from outside. */
    if (*tail != '\0' || strlen(signature) != 32 || CRYPTO_memcmp(signature, expected, 32) != 0 ||
        expires * 1000 < rl_clock_now_ms()) {
        rl_call_fail(call, RL_E_NOT_FOUND, LINK_REFUSED);
        return 0;
    }
    op = rl_op_new(&attachment_get_type, sizeof(*op));
    op->row.key = rl_op_str(op, key);
    rl_op_submit_for(call, op, on_file_meta);
    return 0;
}
