#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "bridge/enrol.h"
#include "client/credentials.h"
#include "common/hex.h"

#define CODES_FILE "bridge-enrol"
#define OWNER_FILE "bridge-owner"

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The lock both files are written under (read, changed, saved), so that a
 * code spent by relay-bridge run and one made by `devices add` at the same
 * moment are both kept. -1 when the folder does not exist yet: nobody else
 * can be writing then.
 */
static int lock_files(void)
{
    char path[3200];
    size_t len;
    int fd;

    if (rl_credentials_path(CODES_FILE, path, sizeof(path)) != 0)
        return -1;
    len = strlen(path);
    if (len < 5 || len + 1 >= sizeof(path))
        return -1;
    memcpy(path + len - 5, ".lock", 6);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void unlock_files(int fd)
{
    if (fd >= 0)
        close(fd);
}

/* The codes file's list, without the expired ones (a new reference; an empty list when there is no file). */
static json_t *load_codes(long long now)
{
    json_t *doc = rl_credentials_load(CODES_FILE), *codes = json_array(), *item;
    size_t i;

    json_array_foreach(json_object_get(doc, "codes"), i, item)
    {
        if (json_integer_value(json_object_get(item, "expires_at")) > now &&
            json_is_string(json_object_get(item, "key")))
            json_array_append(codes, item);
    }
    json_decref(doc);
    return codes;
}

static int save_codes(json_t *codes)
{
    json_t *doc = json_pack("{s:O}", "codes", codes);
    int result = doc != NULL ? rl_credentials_save(CODES_FILE, doc) : -1;

    json_decref(doc);
    return result;
}

int rl_enrol_code_new(long ttl_ms, char code[RL_E2E_ENROL_TEXT])
{
    uint8_t key[RL_E2E_KEY_LEN];
    char hex[2 * RL_E2E_KEY_LEN + 1];
    long long now = now_ms();
    int lock = lock_files(), result = -1;
    json_t *codes = load_codes(now);

    rl_e2e_enrol_new(code);
    if (rl_e2e_enrol_key(code, key) != 0)
        goto out;
    rl_hex_encode(key, sizeof(key), hex);
    json_array_append_new(codes, json_pack("{s:s, s:I, s:I}", "key", hex, "made_at", (json_int_t)now, "expires_at",
                                           (json_int_t)(now + ttl_ms)));
    result = save_codes(codes);
out:
    rl_e2e_wipe(key, sizeof(key));
    rl_e2e_wipe(hex, sizeof(hex));
    json_decref(codes);
    unlock_files(lock);
    return result;
}

int rl_enrol_code_spend(const char *bridge_device_id, const char *device_id, const char *pubkey, const char *proof)
{
    int lock, result = -1;
    json_t *codes, *item;
    size_t i;

    if (proof == NULL || proof[0] == '\0')
        return -1;
    lock = lock_files();
    codes = load_codes(now_ms());
    json_array_foreach(codes, i, item)
    {
        uint8_t key[RL_E2E_KEY_LEN];
        const char *hex = json_string_value(json_object_get(item, "key"));
        int verified = hex != NULL && rl_hex_decode(hex, strlen(hex), key, sizeof(key)) == 0 &&
                       rl_e2e_enrol_verify(key, bridge_device_id, device_id, pubkey, proof) == 0;
        rl_e2e_wipe(key, sizeof(key));
        if (verified) {
            /* Used once: a second device needs a code of its own. */
            json_array_remove(codes, i);
            result = save_codes(codes) == 0 ? 0 : -1;
            break;
        }
    }
    json_decref(codes);
    unlock_files(lock);
    return result;
}

size_t rl_enrol_codes_live(long long *last_expiry_ms)
{
    json_t *codes = load_codes(now_ms()), *item;
    size_t i, n = json_array_size(codes);

    *last_expiry_ms = 0;
    json_array_foreach(codes, i, item)
    {
        long long at = json_integer_value(json_object_get(item, "expires_at"));
        if (at > *last_expiry_ms)
            *last_expiry_ms = at;
    }
    json_decref(codes);
    return n;
}

json_t *rl_enrol_owner_load(void)
{
    json_t *doc = rl_credentials_load(OWNER_FILE), *owner;

    if (doc == NULL && errno == EPERM)
        return NULL;
    owner = json_pack("{s:o, s:o}", "confirmed", json_object(), "revoked", json_array());
    if (json_is_object(json_object_get(doc, "confirmed")))
        json_object_update(json_object_get(owner, "confirmed"), json_object_get(doc, "confirmed"));
    if (json_is_array(json_object_get(doc, "revoked")))
        json_array_extend(json_object_get(owner, "revoked"), json_object_get(doc, "revoked"));
    json_decref(doc);
    return owner;
}

/* Reads, changes by one device and saves the owner file, under the lock. */
static int owner_change(const char *device_id, const char *pubkey)
{
    int lock = lock_files(), result = -1;
    json_t *owner = rl_enrol_owner_load(), *revoked, *item;
    size_t i;

    if (owner == NULL)
        goto out;
    revoked = json_object_get(owner, "revoked");
    json_array_foreach(revoked, i, item)
    {
        if (strcmp(json_string_value(item), device_id) == 0) {
            json_array_remove(revoked, i);
            break;
        }
    }
    if (pubkey != NULL) {
        json_object_set_new(json_object_get(owner, "confirmed"), device_id, json_string(pubkey));
    } else {
        json_object_del(json_object_get(owner, "confirmed"), device_id);
        json_array_append_new(revoked, json_string(device_id));
    }
    result = rl_credentials_save(OWNER_FILE, owner);
out:
    json_decref(owner);
    unlock_files(lock);
    return result;
}

int rl_enrol_owner_confirm(const char *device_id, const char *pubkey)
{
    return device_id != NULL && pubkey != NULL ? owner_change(device_id, pubkey) : -1;
}

int rl_enrol_owner_revoke(const char *device_id)
{
    return device_id != NULL ? owner_change(device_id, NULL) : -1;
}

int rl_enrol_watch_open(void)
{
    char path[3200];
    char *slash;
    int fd;

    if (rl_credentials_path(OWNER_FILE, path, sizeof(path)) != 0)
        return -1;
    slash = strrchr(path, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    /* The file is replaced by a rename (rl_credentials_save): its folder is what can be watched. */
    if (fd >= 0 && inotify_add_watch(fd, path, IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

int rl_enrol_watch_drain(int fd)
{
    char events[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int changed = 0;
    ssize_t n;

    while ((n = read(fd, events, sizeof(events))) > 0) {
        ssize_t at = 0;
        while (at + (ssize_t)sizeof(struct inotify_event) <= n) {
            const struct inotify_event *ev = (const struct inotify_event *)(events + at);
            if (ev->len > 0 && strcmp(ev->name, OWNER_FILE ".json") == 0)
                changed = 1;
            at += (ssize_t)sizeof(struct inotify_event) + ev->len;
        }
    }
    return changed;
}
