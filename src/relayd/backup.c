/*
 * Backup and restore of a single-node relay. The order of a backup matters:
 * the store first (one consistent snapshot, SQLite's backup API), then the
 * key files, then the attachments. An attachment's file is complete and
 * renamed into place before its row is committed (attachments.c), so every
 * attachment the snapshot knows is on disk by the time the folder is
 * copied; files uploaded meanwhile come along too and are harmless.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "common/clock.h"
#include "relayd/backup.h"
#include "relay/core/datalock.h"
#include "rl_version.h"
#include "store/sqlite.h"

#define PATH_SIZE 4200

/* The reason of a failure, for the command's one message. */
static void say(char *why, size_t whysz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t whysz, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, whysz, fmt, ap);
    va_end(ap);
}

/* DIR/NAME into out; -1 when it does not fit (paths are checked to be short long before that). */
static int join(char *out, size_t outsz, const char *dir, const char *name)
{
    size_t dir_len = strlen(dir), name_len = strlen(name);

    if (dir_len + name_len + 2 > outsz)
        return -1;
    memcpy(out, dir, dir_len);
    out[dir_len] = '/';
    memcpy(out + dir_len + 1, name, name_len + 1);
    return 0;
}

/* The data folder's key files (keys.c); a backup carries those that exist. */
static const char *const key_files[] = {"issuer.key", "url.key", "vapid.key"};
#define NKEY_FILES (sizeof(key_files) / sizeof(key_files[0]))

struct options {
    const char *folder; /* DEST or SRC */
    const char *data, *store, *attachments;
};

static const char *env_or(const char *name, const char *fallback)
{
    const char *value = getenv(name);

    return value != NULL && value[0] != '\0' ? value : fallback;
}

/* FOLDER [--data DIR] [--store URL] [--attachments DIR], with the environment under the flags. 0 or -1. */
static int parse(int argc, char **argv, int with_store, struct options *o)
{
    static const struct {
        const char *flag;
        size_t offset;
    } flags[] = {
        {"--data", offsetof(struct options, data)},
        {"--store", offsetof(struct options, store)},
        {"--attachments", offsetof(struct options, attachments)},
    };
    int i;
    size_t f;

    o->folder = NULL;
    o->data = env_or("RELAY_DATA", "data");
    o->store = with_store ? env_or("RELAY_STORE", "") : "";
    o->attachments = env_or("RELAY_ATTACHMENTS", "");
    for (i = 2; i < argc; ++i) {
        int matched = 0;
        for (f = 0; f < sizeof(flags) / sizeof(flags[0]) && !matched; ++f) {
            size_t len = strlen(flags[f].flag);
            const char **slot = (const char **)((char *)o + flags[f].offset);
            if (!with_store && strcmp(flags[f].flag, "--store") == 0)
                continue;
            if (strcmp(argv[i], flags[f].flag) == 0 && i + 1 < argc) {
                *slot = argv[++i];
                matched = 1;
            } else if (strncmp(argv[i], flags[f].flag, len) == 0 && argv[i][len] == '=') {
                *slot = argv[i] + len + 1;
                matched = 1;
            }
        }
        if (matched)
            continue;
        if (argv[i][0] == '-' || o->folder != NULL)
            return -1;
        o->folder = argv[i];
    }
    /* "backup/" names the folder "backup": the work folder is made beside it, not inside. */
    if (o->folder != NULL) {
        static char trimmed[1024];
        size_t len = strlen(o->folder);
        while (len > 1 && o->folder[len - 1] == '/')
            --len;
        if (len < sizeof(trimmed)) {
            memcpy(trimmed, o->folder, len);
            trimmed[len] = '\0';
            o->folder = trimmed;
        }
    }
    /* Short enough that every path made from them fits PATH_SIZE. */
    if (o->folder == NULL || o->folder[0] == '\0' || strlen(o->folder) > 1000 || strlen(o->data) > 1000 ||
        strlen(o->store) > 1000 || strlen(o->attachments) > 1000)
        return -1;
    return 0;
}

/* 1 when path is a folder with nothing in it, 0 when it has something, -1 when it is not a readable folder. */
static int folder_empty(const char *path)
{
    DIR *dir = opendir(path);
    struct dirent *entry;
    int empty = 1;

    if (dir == NULL)
        return -1;
    while ((entry = readdir(dir)) != NULL) {
        if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0) {
            empty = 0;
            break;
        }
    }
    closedir(dir);
    return empty;
}

static int sync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC), result;

    if (fd < 0)
        return -1;
    result = fsync(fd);
    close(fd);
    return result;
}

/* Copies a regular file into a new file (mode 0600), flushed to disk. 0, or -1 with errno set. */
static int copy_file(const char *from, const char *to, long long *bytes)
{
    char buf[65536];
    int in = open(from, O_RDONLY | O_CLOEXEC), out = -1, saved;
    ssize_t n;

    if (in < 0)
        return -1;
    out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0)
        goto fail;
    while ((n = read(in, buf, sizeof(buf))) != 0) {
        ssize_t done = 0;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            goto fail;
        }
        while (done < n) {
            ssize_t w = write(out, buf + done, (size_t)(n - done));
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                goto fail;
            }
            done += w;
        }
        *bytes += n;
    }
    if (fsync(out) != 0)
        goto fail;
    close(in);
    return close(out);
fail:
    saved = errno;
    close(in);
    if (out >= 0) {
        close(out);
        unlink(to);
    }
    errno = saved;
    return -1;
}

/*
 * Copies the regular files of one folder into another that exists, leaving
 * out uploads still being written (NAME.part). Counts files and bytes.
 */
static int copy_folder(const char *from, const char *to, long *files, long long *bytes, char *why, size_t whysz)
{
    char src[PATH_SIZE], dst[PATH_SIZE];
    DIR *dir = opendir(from);
    struct dirent *entry;
    struct stat st;
    size_t len;
    int result = 0;

    if (dir == NULL) {
        if (errno == ENOENT)
            return 0;
        say(why, whysz, "cannot read %s: %s", from, strerror(errno));
        return -1;
    }
    while ((entry = readdir(dir)) != NULL) {
        len = strlen(entry->d_name);
        if (entry->d_name[0] == '.' || (len > 5 && strcmp(entry->d_name + len - 5, ".part") == 0))
            continue;
        join(src, sizeof(src), from, entry->d_name);
        join(dst, sizeof(dst), to, entry->d_name);
        /* A file removed since the listing (an attachment deleted meanwhile) is simply not part of the copy. */
        if (lstat(src, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (copy_file(src, dst, bytes) != 0) {
            if (errno == ENOENT)
                continue;
            say(why, whysz, "cannot copy %s to %s: %s", src, dst, strerror(errno));
            result = -1;
            break;
        }
        ++*files;
    }
    closedir(dir);
    if (result == 0 && sync_path(to) != 0) {
        say(why, whysz, "cannot flush %s: %s", to, strerror(errno));
        result = -1;
    }
    return result;
}

static void remove_tree(const char *path);

/* Removes what a folder holds (this command's own writes: files, and attachments/ under a backup). */
static void empty_tree(const char *path)
{
    char child[PATH_SIZE];
    DIR *dir = opendir(path);
    struct dirent *entry;
    struct stat st;

    if (dir == NULL)
        return;
    while ((entry = readdir(dir)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
            continue;
        join(child, sizeof(child), path, entry->d_name);
        if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(child);
        else
            unlink(child);
    }
    closedir(dir);
}

/* Removes a folder this command made, with everything in it. */
static void remove_tree(const char *path)
{
    empty_tree(path);
    rmdir(path);
}

/* The SQLite file behind a store location: "" (the data folder's relay.db) or sqlite:PATH. NULL for others. */
static int store_file(const struct options *o, char *path, size_t pathsz)
{
    if (o->store[0] == '\0')
        return (size_t)snprintf(path, pathsz, "%s/relay.db", o->data) < pathsz ? 0 : -1;
    if (strncmp(o->store, "sqlite:", 7) == 0 && o->store[7] != '\0')
        return (size_t)snprintf(path, pathsz, "%s", o->store + 7) < pathsz ? 0 : -1;
    return -1;
}

static void attachments_folder(const struct options *o, char *path, size_t pathsz)
{
    if (o->attachments[0] != '\0' && strlen(o->attachments) < pathsz)
        memcpy(path, o->attachments, strlen(o->attachments) + 1);
    else
        join(path, pathsz, o->data, "attachments");
}

/*
 * path with every symbolic link and dot segment resolved, also when path
 * itself does not exist yet (its parent must). 0 or -1.
 */
static int resolve(const char *path, char *out)
{
    char parent[PATH_SIZE], *slash;
    const char *base;

    if (realpath(path, out) != NULL)
        return 0;
    if (strlen(path) >= sizeof(parent))
        return -1;
    memcpy(parent, path, strlen(path) + 1);
    slash = strrchr(parent, '/');
    if (slash == NULL) {
        base = path;
        memcpy(parent, ".", 2);
    } else {
        base = path + (slash - parent) + 1;
        if (slash == parent)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0 || realpath(parent, out) == NULL ||
        strlen(out) + strlen(base) + 2 > PATH_MAX)
        return -1;
    if (strcmp(out, "/") != 0)
        strcat(out, "/");
    strcat(out, base);
    return 0;
}

/* 1 when folder is root or lies under it (both resolved); a root that does not exist holds nothing. */
static int inside(const char *folder, const char *root)
{
    char a[PATH_MAX + 1], b[PATH_MAX + 1];
    size_t len;

    if (resolve(folder, a) != 0 || realpath(root, b) == NULL)
        return 0;
    len = strlen(b);
    return strncmp(a, b, len) == 0 && (a[len] == '\0' || a[len] == '/' || strcmp(b, "/") == 0);
}

static int write_manifest(const char *folder, json_t *manifest, char *why, size_t whysz)
{
    char path[PATH_SIZE];
    int fd;

    join(path, sizeof(path), folder, RL_BACKUP_MANIFEST);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || json_dumpfd(manifest, fd, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0 || write(fd, "\n", 1) != 1 ||
        fsync(fd) != 0) {
        say(why, whysz, "cannot write %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return close(fd);
}

static void say_megabytes(char *out, size_t outsz, long long bytes)
{
    snprintf(out, outsz, "%.1f MB", (double)bytes / 1e6);
}

#define BACKUP_USAGE "usage: relayd backup DEST [--data DIR] [--store sqlite:PATH] [--attachments DIR]\n"

int rl_backup_command(int argc, char **argv)
{
    char db[PATH_SIZE], partial[PATH_SIZE], path[PATH_SIZE], from[PATH_SIZE], why[PATH_SIZE + 200], when[40], size[32];
    struct options o;
    json_t *manifest, *keys;
    size_t nkeys;
    long attachments = 0;
    long long bytes = 0, key_bytes = 0;
    int version = 0, empty;
    size_t i;

    if (parse(argc, argv, 1, &o) != 0) {
        fputs(BACKUP_USAGE, stderr);
        return 2;
    }
    if (store_file(&o, db, sizeof(db)) != 0) {
        fprintf(stderr,
                "relayd backup: the store %.*s is not SQLite: back PostgreSQL up with pg_dump, and copy the "
                "attachments folder (docs/operations.md, \"Backups\")\n",
                (int)strcspn(o.store, ":"), o.store);
        return 2;
    }
    /*
     * A backup inside the data folder (or the attachments folder) would be
     * copied into the next backup, and the one after, each one holding all
     * the earlier ones; and it would share the fate of the disk it is meant
     * to outlive.
     */
    attachments_folder(&o, from, sizeof(from));
    if (inside(o.folder, o.data) || inside(o.folder, from)) {
        fprintf(stderr,
                "relayd backup: %s is inside the data folder or the attachments folder; give a folder outside "
                "both\n",
                o.folder);
        return 2;
    }
    /* Everything a backup holds is secret or personal: it is the service user's alone. */
    umask(077);
    empty = folder_empty(o.folder);
    if (empty == 0 || (empty < 0 && access(o.folder, F_OK) == 0)) {
        fprintf(stderr, "relayd backup: %s already exists and is not an empty folder; give a new one\n", o.folder);
        return 1;
    }
    if ((size_t)snprintf(partial, sizeof(partial), "%s.partial-%ld", o.folder, (long)getpid()) >= sizeof(partial) ||
        mkdir(partial, 0700) != 0) {
        fprintf(stderr, "relayd backup: cannot create %s: %s\n", partial, strerror(errno));
        return 1;
    }
    join(path, sizeof(path), partial, "relay.db");
    if (rl_store_sqlite_copy(db, path, &version, why, sizeof(why)) != 0)
        goto fail;
    keys = json_array();
    for (i = 0; i < NKEY_FILES; ++i) {
        join(from, sizeof(from), o.data, key_files[i]);
        join(path, sizeof(path), partial, key_files[i]);
        if (copy_file(from, path, &key_bytes) == 0) {
            json_array_append_new(keys, json_string(key_files[i]));
        } else if (errno != ENOENT) {
            say(why, sizeof(why), "cannot copy %s: %s", from, strerror(errno));
            json_decref(keys);
            goto fail;
        }
    }
    attachments_folder(&o, from, sizeof(from));
    join(path, sizeof(path), partial, "attachments");
    if (mkdir(path, 0700) != 0) {
        say(why, sizeof(why), "cannot create %s: %s", path, strerror(errno));
        json_decref(keys);
        goto fail;
    }
    if (copy_folder(from, path, &attachments, &bytes, why, sizeof(why)) != 0) {
        json_decref(keys);
        goto fail;
    }
    rl_clock_iso8601(rl_clock_now_ms(), when);
    nkeys = json_array_size(keys);
    manifest = json_pack("{s:s, s:s, s:s, s:i, s:s, s:o, s:i, s:I}", "format", "relay-backup-1", "relayd_version",
                         RL_VERSION, "store", "sqlite", "schema_version", version, "created_at", when, "keys", keys,
                         "attachments", (int)attachments, "attachment_bytes", (json_int_t)bytes);
    if (manifest == NULL || write_manifest(partial, manifest, why, sizeof(why)) != 0) {
        json_decref(manifest);
        goto fail;
    }
    json_decref(manifest);
    if (sync_path(partial) != 0 || (empty == 1 && rmdir(o.folder) != 0) || rename(partial, o.folder) != 0) {
        say(why, sizeof(why), "cannot move the backup into place at %s: %s", o.folder, strerror(errno));
        goto fail;
    }
    say_megabytes(size, sizeof(size), bytes);
    printf("backup written to %s: relay.db (schema version %d), %zu key file%s, %ld attachment%s (%s)\n", o.folder,
           version, nkeys, nkeys == 1 ? "" : "s", attachments, attachments == 1 ? "" : "s", size);
    return 0;
fail:
    fprintf(stderr, "relayd backup: %s\n", why);
    remove_tree(partial);
    return 1;
}

#define RESTORE_USAGE "usage: relayd restore SRC [--data DIR] [--attachments DIR]\n"

/* The manifest of a backup folder, checked against this relayd; NULL with the reason in why. */
static json_t *read_manifest(const char *folder, int *version, char *why, size_t whysz)
{
    char path[PATH_SIZE];
    json_error_t error;
    json_t *manifest;

    join(path, sizeof(path), folder, RL_BACKUP_MANIFEST);
    manifest = json_load_file(path, JSON_REJECT_DUPLICATES, &error);
    if (manifest == NULL) {
        say(why, whysz, "%s is not a backup of relayd backup (%s: %s)", folder, path, error.text);
        return NULL;
    }
    if (strcmp(json_string_value(json_object_get(manifest, "format")) != NULL
                   ? json_string_value(json_object_get(manifest, "format"))
                   : "",
               "relay-backup-1") != 0 ||
        !json_is_integer(json_object_get(manifest, "schema_version"))) {
        say(why, whysz, "%s: not a backup format this relayd reads", path);
        json_decref(manifest);
        return NULL;
    }
    *version = (int)json_integer_value(json_object_get(manifest, "schema_version"));
    return manifest;
}

int rl_restore_command(int argc, char **argv)
{
    char path[PATH_SIZE], from[PATH_SIZE], to[PATH_SIZE], why[PATH_SIZE + 200], size[32];
    struct options o;
    json_t *manifest;
    int version = 0, copied_version = 0, made_data = 0, made_attachments = 0, attachments_were_empty = 0, lock = -1,
        empty;
    long attachments = 0, nkeys = 0;
    long long bytes = 0, key_bytes = 0;
    size_t i;

    if (parse(argc, argv, 0, &o) != 0) {
        fputs(RESTORE_USAGE, stderr);
        return 2;
    }
    umask(077);
    manifest = read_manifest(o.folder, &version, why, sizeof(why));
    if (manifest == NULL) {
        fprintf(stderr, "relayd restore: %s\n", why);
        return 1;
    }
    json_decref(manifest);
    if (version > rl_store_sqlite_target_version()) {
        fprintf(stderr,
                "relayd restore: the backup's store is at schema version %d, newer than this relayd (%d): restore it "
                "with the relayd that made it (%s says which)\n",
                version, rl_store_sqlite_target_version(), RL_BACKUP_MANIFEST);
        return 1;
    }
    empty = folder_empty(o.data);
    if (empty == 0) {
        fprintf(stderr, "relayd restore: the data folder %s is not empty; restore into a new or empty folder\n",
                o.data);
        return 1;
    }
    if (empty < 0) {
        if (mkdir(o.data, 0700) != 0) {
            fprintf(stderr, "relayd restore: cannot create %s: %s\n", o.data, strerror(errno));
            return 1;
        }
        made_data = 1;
    }
    /* A relayd started on the folder meanwhile would see half a store. */
    lock = rl_datalock_take(o.data, why, sizeof(why));
    if (lock < 0)
        goto fail;
    attachments_folder(&o, to, sizeof(to));
    if (o.attachments[0] != '\0') {
        empty = folder_empty(to);
        if (empty == 0) {
            say(why, sizeof(why), "the attachments folder %s is not empty", to);
            goto fail;
        }
        if (empty < 0) {
            if (mkdir(to, 0700) != 0) {
                say(why, sizeof(why), "cannot create %s: %s", to, strerror(errno));
                goto fail;
            }
            made_attachments = 1;
        }
        attachments_were_empty = 1;
    } else if (mkdir(to, 0700) != 0) {
        say(why, sizeof(why), "cannot create %s: %s", to, strerror(errno));
        goto fail;
    }
    join(from, sizeof(from), o.folder, "relay.db");
    join(path, sizeof(path), o.data, "relay.db");
    if (rl_store_sqlite_copy(from, path, &copied_version, why, sizeof(why)) != 0)
        goto fail;
    for (i = 0; i < NKEY_FILES; ++i) {
        join(from, sizeof(from), o.folder, key_files[i]);
        join(path, sizeof(path), o.data, key_files[i]);
        if (copy_file(from, path, &key_bytes) == 0) {
            ++nkeys;
        } else if (errno != ENOENT) {
            say(why, sizeof(why), "cannot copy %s: %s", from, strerror(errno));
            goto fail;
        }
    }
    join(from, sizeof(from), o.folder, "attachments");
    if (copy_folder(from, to, &attachments, &bytes, why, sizeof(why)) != 0 || sync_path(o.data) != 0)
        goto fail;
    say_megabytes(size, sizeof(size), bytes);
    printf("restored %s into %s: relay.db (schema version %d), %ld key file%s, %ld attachment%s (%s)\n", o.folder,
           o.data, copied_version, nkeys, nkeys == 1 ? "" : "s", attachments, attachments == 1 ? "" : "s", size);
    close(lock);
    return 0;
fail:
    fprintf(stderr, "relayd restore: %s\n", why);
    /* Leave the folders as they were: what this command made goes, and only that. */
    if (made_attachments)
        remove_tree(to);
    else if (o.attachments[0] != '\0' && attachments_were_empty)
        empty_tree(to);
    if (made_data) {
        remove_tree(o.data);
    } else {
        static const char *const written[] = {"relay.db", "relay.db-wal", "relay.db-shm",  "issuer.key",
                                              "url.key",  "vapid.key",    RL_DATALOCK_FILE};
        for (i = 0; i < sizeof(written) / sizeof(written[0]); ++i) {
            join(path, sizeof(path), o.data, written[i]);
            unlink(path);
        }
        if (o.attachments[0] == '\0')
            remove_tree(to);
    }
    if (lock >= 0)
        close(lock);
    return 1;
}
