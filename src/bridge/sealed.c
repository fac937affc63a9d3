/* Sealed attachments of encrypted sessions, opened for the agent (sealed.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "bridge/sealed.h"
#include "client/credentials.h"
#include "common/hex.h"
#include "common/log.h"

/* A file name the sealed meta gave, made safe to be one path component: no slash, no leading dot, not empty. */
static void safe_name(const char *name, char *out, size_t outsz)
{
    size_t i, n = 0;

    for (i = 0; name != NULL && name[i] != '\0' && n + 1 < outsz; ++i)
        out[n++] = name[i] == '/' || name[i] == '\\' || (unsigned char)name[i] < 0x20 ? '_' : name[i];
    out[n] = '\0';
    if (n == 0 || out[0] == '.')
        snprintf(out, outsz, "%s", "attachment");
}

/* Writes bytes to <config>/attachments/<key>/<name> (folders 0700, file 0600); 0 with path filled, or -1. */
static int save(const char *key, const char *name, const char *bytes, size_t len, char *path, size_t pathsz)
{
    char dir[3200], file[256];
    size_t n, done = 0;
    int fd, result = -1;

    if (rl_credentials_path("attachments", dir, sizeof(dir)) != 0 || (n = strlen(dir)) < 5)
        return -1;
    dir[n - 5] = '\0'; /* the ".json" the credentials path adds */
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return -1;
    if (strchr(key, '/') != NULL || key[0] == '.' ||
        (size_t)snprintf(dir + strlen(dir), sizeof(dir) - strlen(dir), "/%s", key) >= sizeof(dir) - n)
        return -1;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return -1;
    safe_name(name, file, sizeof(file));
    if ((size_t)snprintf(path, pathsz, "%s/%s", dir, file) >= pathsz)
        return -1;
    if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
        return -1;
    while (done < len) {
        ssize_t w = write(fd, bytes + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            goto out;
        done += (size_t)w;
    }
    result = 0;
out:
    if (close(fd) != 0)
        result = -1;
    return result;
}

/* 1 when the bytes are the ones the sealed meta names (size and SHA-256), so relayd cannot swap two uploads. */
static int matches(json_t *meta, const char *bytes, size_t len)
{
    unsigned char digest[32];
    char hex[65];
    unsigned int dlen = 0;
    const char *want = json_string_value(json_object_get(meta, "sha256"));

    if (json_integer_value(json_object_get(meta, "size")) != (json_int_t)len || want == NULL)
        return 0;
    if (EVP_Digest(bytes, len, digest, &dlen, EVP_sha256(), NULL) != 1 || dlen != sizeof(digest))
        return 0;
    rl_hex_encode(digest, sizeof(digest), hex);
    return strcmp(hex, want) == 0;
}

const char *rl_sealed_attachment_open(const rl_keyring_t *keys, const char *session_id, json_t *item,
                                      json_t *given_meta, const char *sealed, size_t sealed_len)
{
    const char *key = json_string_value(json_object_get(item, "key")), *why = NULL;
    char *meta_text = NULL, *plain = NULL, path[3600], url[3700];
    size_t plain_len = 0;
    json_t *meta = json_incref(given_meta);

    if (key == NULL ||
        (meta == NULL && rl_keyring_open_field(keys, session_id, "attachments",
                                               json_string_value(json_object_get(item, "meta_ct")), &meta_text) != 0) ||
        (meta == NULL && (meta = json_loads(meta_text, 0, NULL)) == NULL) || !json_is_object(meta)) {
        why = "unreadable";
        goto out;
    }
    if (sealed == NULL) {
        why = "download_failed";
        goto out;
    }
    if (rl_keyring_open_bytes(keys, session_id, "attachments", sealed, sealed_len, &plain, &plain_len) != 0 ||
        !matches(meta, plain, plain_len)) {
        why = "unreadable";
        goto out;
    }
    if (save(key, json_string_value(json_object_get(meta, "name")), plain, plain_len, path, sizeof(path)) != 0) {
        why = "not_saved";
        goto out;
    }
    snprintf(url, sizeof(url), "file://%s", path);
    json_object_set(item, "name", json_object_get(meta, "name"));
    json_object_set(item, "mime", json_object_get(meta, "mime"));
    json_object_set_new(item, "size", json_integer((json_int_t)plain_len));
    json_object_set_new(item, "path", json_string(path));
    json_object_set_new(item, "url", json_string(url));
out:
    json_object_del(item, "meta_ct");
    json_object_del(item, "url_expires_at");
    if (why != NULL) {
        rl_log(RL_LOG_WARN, "sealed attachment %s of session %s: %s (the agent gets no file for it)",
               key != NULL ? key : "?", session_id, why);
        json_object_del(item, "url");
        json_object_set_new(item, "error", json_string(why));
    }
    json_decref(meta);
    free(meta_text);
    if (plain != NULL) {
        rl_e2e_wipe(plain, plain_len);
        free(plain);
    }
    return why;
}
