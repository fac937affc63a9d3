/* The SQLite store's delta log (deltalog.h): its codec, its file, and its fold into message_deltas. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/json_flat.h"
#include "common/log.h"
#include "store/deltalog.h"

#define HEADER      8 /* u32 length, u32 CRC-32 */
#define VERSION     1
#define PAYLOAD_MAX (64u * 1024 * 1024)

/* ---- codec ---- */

/* CRC-32 (IEEE): zlib's, which relayd links already and which is several times faster than a bytewise table. */
static uint32_t crc32_of(const unsigned char *p, size_t n)
{
    return (uint32_t)crc32_z(0, p, n);
}

static unsigned char *put_le(unsigned char *p, uint64_t v, int bytes)
{
    int i;

    for (i = 0; i < bytes; ++i)
        *p++ = (unsigned char)(v >> (8 * i));
    return p;
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    int i;

    for (i = 0; i < bytes; ++i)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static unsigned char *put_field(unsigned char *p, const char *text, size_t len, int bytes)
{
    p = put_le(p, len, bytes);
    memcpy(p, text, len);
    return p + len;
}

int rl_deltalog_encode(rl_deltalog_buf_t *buf, const char *message_id, int64_t seq, const char *key,
                       const char *body_hash, const char *delta, size_t delta_len)
{
    size_t lens[3] = {strlen(message_id), strlen(key), strlen(body_hash)};
    size_t payload = 1 + 8 + 2 + lens[0] + 2 + lens[1] + 2 + lens[2] + 4 + delta_len, need;
    unsigned char *start, *p;

    if (lens[0] > 0xFFFF || lens[1] > 0xFFFF || lens[2] > 0xFFFF || payload > PAYLOAD_MAX)
        return -1;
    need = buf->len + HEADER + payload;
    if (need > buf->cap) {
        size_t cap = buf->cap > 0 ? buf->cap : 4096;
        char *grown;
        while (cap < need)
            cap *= 2;
        if ((grown = realloc(buf->data, cap)) == NULL)
            return -1;
        buf->data = grown;
        buf->cap = cap;
    }
    start = (unsigned char *)buf->data + buf->len;
    p = start + HEADER;
    *p++ = VERSION;
    p = put_le(p, (uint64_t)seq, 8);
    p = put_field(p, message_id, lens[0], 2);
    p = put_field(p, key, lens[1], 2);
    p = put_field(p, body_hash, lens[2], 2);
    p = put_field(p, delta, delta_len, 4);
    put_le(start, payload, 4);
    put_le(start + 4, crc32_of(start + HEADER, payload), 4);
    buf->len = need;
    return 0;
}

int rl_store_deltas_put(rl_store_deltas_t *sink, const char *message_id, int64_t seq, const char *key,
                        const char *body_hash, const char *delta, size_t delta_len)
{
    return rl_deltalog_encode(sink, message_id, seq, key, body_hash, delta, delta_len);
}

void rl_deltalog_buf_free(rl_deltalog_buf_t *buf)
{
    free(buf->data);
    buf->data = NULL;
    buf->len = buf->cap = 0;
}

/* Reads a length-prefixed field at *p within end: 0, or -1 when it does not fit. */
static int take_field(const unsigned char **p, const unsigned char *end, int bytes, const char **text, size_t *len)
{
    if (end - *p < bytes)
        return -1;
    *len = (size_t)get_le(*p, bytes);
    *p += bytes;
    if ((size_t)(end - *p) < *len)
        return -1;
    *text = (const char *)*p;
    *p += *len;
    return 0;
}

static size_t decode(const char *data, size_t len, int verify, rl_deltalog_record_t *out)
{
    const unsigned char *start = (const unsigned char *)data, *p, *end;
    size_t payload;

    if (len < HEADER)
        return 0;
    payload = (size_t)get_le(start, 4);
    if (payload < 1 + 8 || payload > PAYLOAD_MAX || payload > len - HEADER ||
        (verify && crc32_of(start + HEADER, payload) != (uint32_t)get_le(start + 4, 4)))
        return 0;
    p = start + HEADER;
    end = p + payload;
    if (*p++ != VERSION)
        return 0;
    out->seq = (int64_t)get_le(p, 8);
    p += 8;
    if (take_field(&p, end, 2, &out->message_id, &out->message_id_len) != 0 ||
        take_field(&p, end, 2, &out->key, &out->key_len) != 0 ||
        take_field(&p, end, 2, &out->body_hash, &out->body_hash_len) != 0 ||
        take_field(&p, end, 4, &out->delta, &out->delta_len) != 0 || p != end)
        return 0;
    return HEADER + payload;
}

size_t rl_deltalog_decode(const char *data, size_t len, rl_deltalog_record_t *out)
{
    return decode(data, len, 1, out);
}

/* ---- the files ---- */

/*
 * One of the two files. Every record in it was written by this process
 * since it was last emptied (it was empty at open, or a truncation
 * succeeded since): own_records. The bytes are then known whole, and each
 * message's records follow what the store holds of it (deltas.c took their
 * seqs from its record, which is the truth while the folder is this
 * relayd's): such a fold checks no checksum and reads no next seq. After a
 * crash, or a truncation that failed, a file may hold records stored
 * already: those are checked.
 */
struct log_file {
    int fd;
    char *path;
    size_t size; /* bytes of whole records: where the next write goes */
    int own_records;
    int64_t since_ms; /* when it got its first record since it was last emptied (rl_clock_mono_ms) */
};

/*
 * Two files that take turns (deltalog.h): appends go to the active one,
 * from any thread, under lock; a fold makes the other (empty) one active
 * and reads the one it left, which nobody writes any more, without the
 * lock. Only the worker folds and truncates.
 */
struct rl_deltalog {
    pthread_mutex_t lock; /* active, and every file's size, own_records, since_ms */
    struct log_file files[2];
    int nfiles; /* 2 for the writer, 1 for a relayd that holds the first for its shared lock */
    int active;
    int folded;    /* the files the fold in progress read (bit per file): emptied by truncate */
    int left_over; /* the files held records at open (the last run was killed): the first fold reads both */
};

int rl_deltalog_read_file(const char *path, char **data, size_t *len)
{
    struct stat st;
    size_t got = 0;
    char *bytes;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    *data = NULL;
    *len = 0;
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    if (fstat(fd, &st) != 0 || (bytes = malloc((size_t)st.st_size + 1)) == NULL) {
        close(fd);
        return -1;
    }
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, bytes + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    *data = bytes;
    *len = got;
    return 0;
}

void rl_deltalog_second_path(const char *path, char *out, size_t outsz)
{
    snprintf(out, outsz, "%s.b", path);
}

static int open_file(struct log_file *file, const char *path)
{
    struct stat st;

    if ((file->path = strdup(path)) == NULL)
        return -1;
    file->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (file->fd < 0 || fstat(file->fd, &st) != 0) {
        rl_log_error("cannot open the delta log %s: %s", path, strerror(errno));
        return -1;
    }
    /* Whatever it holds is folded at start-up (left_over), torn tail and all; new records go after it. */
    file->size = (size_t)st.st_size;
    file->own_records = file->size == 0;
    file->since_ms = rl_clock_mono_ms();
    return 0;
}

rl_deltalog_t *rl_deltalog_open(const char *path, int exclusive)
{
    rl_deltalog_t *log = calloc(1, sizeof(*log));
    char second[4200];
    int i;

    if (log == NULL)
        return NULL;
    pthread_mutex_init(&log->lock, NULL);
    log->files[0].fd = log->files[1].fd = -1;
    log->nfiles = exclusive ? 2 : 1;
    if (open_file(&log->files[0], path) != 0) {
        rl_deltalog_close(log);
        return NULL;
    }
    /* The first file carries the lock that keeps a writer and a relayd sharing the database apart. */
    if (flock(log->files[0].fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
        rl_log_error("%s is locked by another relayd: %s", path,
                     exclusive ? "the store of this data folder is in use as sqlite:PATH by a relayd that shares it"
                               : "this SQLite file is the data folder store of a relayd that writes it alone; "
                                 "share a file of its own (sqlite:PATH) between nodes instead");
        rl_deltalog_close(log);
        return NULL;
    }
    rl_deltalog_second_path(path, second, sizeof(second));
    if (exclusive && open_file(&log->files[1], second) != 0) {
        rl_deltalog_close(log);
        return NULL;
    }
    for (i = 0; i < log->nfiles; ++i)
        if (log->files[i].size > 0)
            log->left_over |= 1 << i;
    /* New records go to an empty file when there is one: the other may be the one a fold was reading. */
    log->active = log->nfiles == 2 && log->files[0].size > 0 && log->files[1].size == 0;
    return log;
}

void rl_deltalog_close(rl_deltalog_t *log)
{
    int i;

    if (log == NULL)
        return;
    for (i = 0; i < 2; ++i) {
        if (log->files[i].fd >= 0)
            close(log->files[i].fd);
        free(log->files[i].path);
    }
    pthread_mutex_destroy(&log->lock);
    free(log);
}

size_t rl_deltalog_pending(rl_deltalog_t *log, int64_t *since_ms, int *left_over)
{
    size_t size = 0;
    int64_t since = 0;
    int i;

    pthread_mutex_lock(&log->lock);
    for (i = 0; i < log->nfiles; ++i) {
        if (log->files[i].size == 0)
            continue;
        if (size == 0 || log->files[i].since_ms < since)
            since = log->files[i].since_ms;
        size += log->files[i].size;
    }
    if (left_over != NULL)
        *left_over = log->left_over != 0;
    pthread_mutex_unlock(&log->lock);
    if (since_ms != NULL)
        *since_ms = since;
    return size;
}

size_t rl_deltalog_size(rl_deltalog_t *log)
{
    return rl_deltalog_pending(log, NULL, NULL);
}

static int append_to(struct log_file *file, const rl_deltalog_buf_t *buf)
{
    size_t done = 0;

    while (done < buf->len) {
        ssize_t n = pwrite(file->fd, buf->data + done, buf->len - done, (off_t)(file->size + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            /* A full disk is an episode the store reports once (worker.c, note_full), not per batch. */
            int full = n < 0 && (errno == ENOSPC || errno == EDQUOT);
            if (!full)
                rl_log_error("cannot write the delta log %s: %s", file->path, n < 0 ? strerror(errno) : "short write");
            /* A part of the batch left behind would end the log there for every later record (a torn tail). */
            if (ftruncate(file->fd, (off_t)file->size) != 0)
                rl_log_error("cannot cut the delta log %s back: %s", file->path, strerror(errno));
            return full ? RL_E_STORAGE_FULL : RL_E_INTERNAL;
        }
        done += (size_t)n;
    }
    if (file->size == 0)
        file->since_ms = rl_clock_mono_ms();
    file->size += buf->len;
    return 0;
}

int rl_deltalog_append(rl_deltalog_t *log, const rl_deltalog_buf_t *buf, size_t max, int *was_empty)
{
    size_t held = 0;
    int result, i;

    pthread_mutex_lock(&log->lock);
    for (i = 0; i < log->nfiles; ++i)
        held += log->files[i].size;
    result = max > 0 && held >= max ? RL_DELTALOG_FULL : append_to(&log->files[log->active], buf);
    pthread_mutex_unlock(&log->lock);
    if (was_empty != NULL)
        *was_empty = held == 0 && result == 0;
    return result;
}

static int read_whole(const struct log_file *file, size_t size, char **out)
{
    char *data = malloc(size > 0 ? size : 1);
    size_t len = 0;

    if (data == NULL)
        return RL_E_INTERNAL;
    while (len < size) {
        ssize_t n = pread(file->fd, data + len, size - len, (off_t)len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    *out = data;
    return len == size ? 0 : RL_E_INTERNAL;
}

/* The records of the files a fold reads, sorted together (below). */
struct entry {
    rl_deltalog_record_t record;
    size_t order; /* position in the files: a stable sort */
};

struct entries {
    struct entry *items;
    size_t count, cap;
};

static int collect(struct entries *set, const char *data, size_t len, const char *what, int verify);
static int fold_entries(rl_txn_t *txn, struct entries *set, int own);

int rl_deltalog_fold(rl_deltalog_t *log, rl_txn_t *txn)
{
    struct entries set = {NULL, 0, 0};
    char *data[2] = {NULL, NULL};
    size_t sizes[2] = {0, 0};
    int mask, own = 1, result = 0, i;

    pthread_mutex_lock(&log->lock);
    if (log->left_over != 0) {
        /* The last run's files, both, as one set: which was written last is not known, and need not be. */
        mask = log->left_over;
    } else if (log->nfiles == 2 && log->files[!log->active].size > 0) {
        /* A fold that failed left the other file full: it is folded again, alone; appends go on meanwhile. */
        mask = 1 << !log->active;
    } else {
        /* The usual turn: appends move to the empty file, and the one they leave is folded. */
        mask = 1 << log->active;
        if (log->nfiles == 2)
            log->active = !log->active;
    }
    for (i = 0; i < log->nfiles; ++i)
        if (mask & (1 << i)) {
            sizes[i] = log->files[i].size;
            own &= log->files[i].own_records && log->left_over == 0;
        }
    pthread_mutex_unlock(&log->lock);
    log->folded = 0;
    /* Nobody writes the files folded now (at start-up, nobody writes at all): they are read without the lock. */
    for (i = 0; i < log->nfiles && result == 0; ++i)
        if (mask & (1 << i) && sizes[i] > 0 && (result = read_whole(&log->files[i], sizes[i], &data[i])) == 0)
            result = collect(&set, data[i], sizes[i], log->files[i].path, !own);
    if (result == 0)
        result = fold_entries(txn, &set, own);
    free(set.items);
    free(data[0]);
    free(data[1]);
    if (result == 0)
        log->folded = mask;
    return result;
}

void rl_deltalog_truncate(rl_deltalog_t *log)
{
    int i;

    /*
     * Cut to zero: a crash before this leaves the records behind, and the
     * next fold finds them stored already (their seqs are below the next).
     */
    pthread_mutex_lock(&log->lock);
    for (i = 0; i < log->nfiles; ++i) {
        struct log_file *file = &log->files[i];
        if ((log->folded & (1 << i)) == 0)
            continue;
        if (ftruncate(file->fd, 0) != 0) {
            rl_log_error("cannot empty the delta log %s: %s", file->path, strerror(errno));
            file->own_records = 0;
            continue;
        }
        file->size = 0;
        file->own_records = 1;
        log->left_over &= ~(1 << i);
    }
    log->folded = 0;
    pthread_mutex_unlock(&log->lock);
}

/* ---- the fold ---- */

static int by_message_then_seq(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    size_t n =
        x->record.message_id_len < y->record.message_id_len ? x->record.message_id_len : y->record.message_id_len;
    int order = memcmp(x->record.message_id, y->record.message_id, n);

    if (order == 0)
        order = (x->record.message_id_len > y->record.message_id_len) -
                (x->record.message_id_len < y->record.message_id_len);
    if (order == 0)
        order = (x->record.seq > y->record.seq) - (x->record.seq < y->record.seq);
    return order != 0 ? order : (x->order > y->order) - (x->order < y->order);
}

/*
 * Writes entries[0..n) (one message, consecutive seqs) as one run, keys as
 * deltas.c writes them: [["key","hash"],...], the bytes json_dumps(JSON_COMPACT)
 * gives, written by the flat writer rather than a jansson tree per record (the
 * fold's largest cost). keys is the caller's writer, reused across runs.
 */
static int write_run(rl_txn_t *txn, const char *message_id, const struct entry *entries, size_t n, rl_json_out_t *keys)
{
    rl_delta_run_row_t run = {message_id, entries[0].record.seq, entries[n - 1].record.seq, NULL, 0, NULL};
    char *text = NULL;
    size_t len = 0, i;
    int result = RL_E_INTERNAL;

    for (i = 0; i < n; ++i)
        len += entries[i].record.delta_len;
    if ((text = malloc(len + 1)) == NULL)
        goto out;
    keys->len = 0;
    rl_json_out_raw(keys, "[", 1);
    for (len = 0, i = 0; i < n; ++i) {
        const rl_deltalog_record_t *r = &entries[i].record;
        memcpy(text + len, r->delta, r->delta_len);
        len += r->delta_len;
        rl_json_out_raw(keys, i == 0 ? "[" : ",[", i == 0 ? 1 : 2);
        rl_json_out_string(keys, r->key, r->key_len);
        rl_json_out_raw(keys, ",", 1);
        rl_json_out_string(keys, r->body_hash, r->body_hash_len);
        rl_json_out_raw(keys, "]", 1);
    }
    rl_json_out_raw(keys, "]", 2); /* with its NUL: the row takes a C string */
    if (keys->failed)
        goto out;
    run.text = text;
    run.text_len = len;
    run.keys = keys->bytes;
    result = RL_TXN(txn, delta_run_insert, &run);
out:
    free(text);
    return result;
}

/*
 * The records of one message, entries[0..n): those after its stored ones, in
 * runs of consecutive seqs. own: they all follow what is stored (own_records).
 */
static int fold_message(rl_txn_t *txn, const struct entry *entries, size_t n, int own, rl_json_out_t *keys)
{
    char *message_id = strndup(entries[0].record.message_id, entries[0].record.message_id_len);
    rl_message_row_t message;
    int64_t next = 0;
    size_t start, end;
    int result;

    if (message_id == NULL)
        return RL_E_INTERNAL;
    result = RL_TXN(txn, message_get, message_id, &message);
    /* Ended or gone: what the log held of it was folded before its end, or never answered. */
    if (result == RL_E_NOT_FOUND || (result == 0 && strcmp(message.state, "streaming") != 0)) {
        result = 0;
        goto out;
    }
    if (result != 0 || (!own && (result = RL_TXN(txn, delta_next_seq, message_id, &next)) != 0))
        goto out;
    for (start = 0; start < n && entries[start].record.seq < next; ++start) {
    }
    for (; start < n && result == 0; start = end) {
        for (end = start + 1; end < n && entries[end].record.seq == entries[end - 1].record.seq + 1; ++end) {
        }
        result = write_run(txn, message_id, entries + start, end - start, keys);
        /* The same seq twice (never written so): the first is kept. */
        while (end < n && entries[end].record.seq == entries[end - 1].record.seq)
            ++end;
    }
out:
    free(message_id);
    return result;
}

/* Adds the whole records of data[0..len) to set; a torn tail ends them, with a log line naming what. */
static int collect(struct entries *set, const char *data, size_t len, const char *what, int verify)
{
    size_t at = 0, step;

    while (at < len) {
        rl_deltalog_record_t record;
        if ((step = decode(data + at, len - at, verify, &record)) == 0) {
            rl_log_warn("%s: ignoring %zu bytes at offset %zu: a record cut short or failing its checksum (a write "
                        "interrupted by a crash, never answered)",
                        what, len - at, at);
            break;
        }
        if (set->count == set->cap) {
            size_t cap = set->cap > 0 ? set->cap * 2 : 256;
            struct entry *grown = realloc(set->items, cap * sizeof(*grown));
            if (grown == NULL)
                return RL_E_INTERNAL;
            set->items = grown;
            set->cap = cap;
        }
        set->items[set->count].record = record;
        set->items[set->count].order = set->count;
        ++set->count;
        at += step;
    }
    return 0;
}

/* The records of set into message_deltas, message by message (sorted here). own: as own_records. */
static int fold_entries(rl_txn_t *txn, struct entries *set, int own)
{
    struct entry *entries = set->items;
    size_t count = set->count, start, end;
    rl_arena_t arena = {0};
    rl_arena_t *was_arena = txn->arena;
    rl_json_out_t keys;
    int was_writing = txn->writing, result = 0;

    /* No whole record (a torn tail alone): entries is NULL, which qsort may not be given. */
    if (count == 0)
        return 0;
    qsort(entries, count, sizeof(*entries), by_message_then_seq);
    rl_json_out_init(&keys);
    /* Rows read here live until the fold ends: it is no operation of its own. */
    txn->arena = &arena;
    txn->writing = 1;
    for (start = 0; start < count && result == 0; start = end) {
        for (end = start + 1;
             end < count && entries[end].record.message_id_len == entries[start].record.message_id_len &&
             memcmp(entries[end].record.message_id, entries[start].record.message_id,
                    entries[start].record.message_id_len) == 0;
             ++end) {
        }
        result = fold_message(txn, entries + start, end - start, own, &keys);
    }
    rl_json_out_free(&keys);
    txn->arena = was_arena;
    txn->writing = was_writing;
    rl_arena_free(&arena);
    return result;
}

int rl_deltalog_read_files(const char *path, rl_deltalog_files_t *out)
{
    int i;

    memset(out, 0, sizeof(*out));
    snprintf(out->path[0], sizeof(out->path[0]), "%s", path);
    rl_deltalog_second_path(path, out->path[1], sizeof(out->path[1]));
    for (i = 0; i < 2; ++i)
        if (rl_deltalog_read_file(out->path[i], &out->data[i], &out->len[i]) != 0) {
            int saved = errno;
            rl_deltalog_files_free(out);
            errno = saved;
            return -1;
        }
    return 0;
}

void rl_deltalog_files_free(rl_deltalog_files_t *files)
{
    free(files->data[0]);
    free(files->data[1]);
    files->data[0] = files->data[1] = NULL;
    files->len[0] = files->len[1] = 0;
}

int rl_deltalog_fold_files(rl_txn_t *txn, const rl_deltalog_files_t *files, size_t *records)
{
    struct entries set = {NULL, 0, 0};
    int result = 0, i;

    for (i = 0; i < 2 && result == 0; ++i)
        result = collect(&set, files->data[i], files->len[i], files->path[i], 1);
    if (records != NULL)
        *records = set.count;
    if (result == 0)
        result = fold_entries(txn, &set, 0);
    free(set.items);
    return result;
}
