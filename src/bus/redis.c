/*
 * The Redis client: hiredis for the protocol, h2o's loop for the bytes.
 * See redis.h for what it promises.
 *
 * A connection goes DOWN -> CONNECTING (the socket's connect is under way)
 * -> HANDSHAKE (AUTH, SELECT and SCRIPT LOAD sent, their replies awaited)
 * -> READY, and back to DOWN when anything fails. Commands queued while
 * CONNECTING wait in the output buffer and follow the handshake on the wire;
 * the server answers in order, so the first replies are the handshake's
 * (counted, not in the FIFO) and the rest pop the FIFO one by one.
 */
#include <errno.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "bus/redis.h"
#include "common/buf.h"
#include "common/error.h"
#include "common/hex.h"
#include "common/log.h"
#include "common/percent.h"

#define TICK_MS         50
#define BACKOFF_FIRST   100
#define BACKOFF_MAX     5000
#define ADDRESSES_MAX   4
#define ARRAY_MAX       (4 * 1024 * 1024) /* elements of one array in a reply */
#define KEEP_BUFFER_MAX (1024 * 1024)     /* an emptied output buffer larger than this is given back */

enum state { DOWN, CONNECTING, HANDSHAKE, READY };

struct pending {
    rl_redis_reply_cb cb;
    void *arg;
    uint64_t queued_at;
    const rl_redis_script_t *script; /* EVALSHA: command is kept to be sent again as EVAL */
    char *command;
    size_t command_len;
};

struct rl_redis {
    h2o_loop_t *loop;
    rl_redis_location_t location;
    rl_redis_config_t config;
    struct sockaddr_storage addresses[ADDRESSES_MAX];
    socklen_t address_lens[ADDRESSES_MAX];
    size_t naddresses, next_address;

    enum state state;
    h2o_socket_t *sock;
    redisReader *reader;
    size_t partial; /* bytes fed to the reader since the end of the last complete reply */
    unsigned handshake_left;
    uint64_t connection; /* increases with each connection: a callback can tell whether its connection ended */
    /*
     * Encoded commands not yet handed to the socket, and what the socket is
     * writing now. Uncapped here: rl_redis_command bounds the two together
     * (and what is held back) by max_queued_bytes.
     */
    rl_buf_t queued, writing;
    int write_in_flight;
    size_t held_bytes; /* script commands kept until their reply */

    struct pending *fifo;
    size_t fifo_cap, fifo_head, fifo_count;

    uint64_t attempt_started, retry_at, backoff, last_activity, down_since;
    int logged_down; /* the loss (or the failure to connect) was logged; log the return */
    h2o_timeout_entry_t tick;

    unsigned dispatching; /* inside the client's callbacks */
    int free_requested;
};

static redisReplyObjectFunctions capped_functions, *hiredis_functions;

/* ---- locations ------------------------------------------------------------------------------- */

/* Copies text[0..len) into out, undoing %-encoding; -1 when it does not fit or is malformed. */
static int decode(const char *text, size_t len, char *out, size_t size)
{
    return rl_percent_decode(text, len, out, size, 0) >= 0 ? 0 : -1;
}

static int parse_db(const char *text, size_t len, int *db)
{
    int value = 0;
    size_t i;

    if (len == 0 || len > 5)
        return -1;
    for (i = 0; i < len; ++i) {
        if (text[i] < '0' || text[i] > '9')
            return -1;
        value = value * 10 + (text[i] - '0');
    }
    *db = value;
    return 0;
}

/* user:password in [text, end): both optional, "" when absent. */
static int parse_credentials(const char *text, const char *end, rl_redis_location_t *out)
{
    const char *colon = memchr(text, ':', (size_t)(end - text));

    if (colon == NULL)
        return decode(text, (size_t)(end - text), out->password, sizeof(out->password));
    if (decode(text, (size_t)(colon - text), out->user, sizeof(out->user)) != 0)
        return -1;
    return decode(colon + 1, (size_t)(end - colon - 1), out->password, sizeof(out->password));
}

static int parse_tcp(const char *text, rl_redis_location_t *out, const char **why)
{
    const char *authority = text + strlen("redis://"), *end, *at, *host, *host_end, *port = NULL;
    size_t host_len;

    end = authority + strcspn(authority, "/?#");
    at = memchr(authority, '@', (size_t)(end - authority));
    if (at != NULL) {
        if (parse_credentials(authority, at, out) != 0) {
            *why = "the user or password of the location is malformed or too long";
            return -1;
        }
        host = at + 1;
    } else {
        host = authority;
    }
    if (*host == '[') {
        host_end = memchr(host, ']', (size_t)(end - host));
        if (host_end == NULL) {
            *why = "an IPv6 address in the location lacks its closing bracket";
            return -1;
        }
        ++host;
        if (host_end + 1 < end) {
            if (host_end[1] != ':') {
                *why = "unexpected text after the IPv6 address";
                return -1;
            }
            port = host_end + 2;
        }
    } else {
        host_end = memchr(host, ':', (size_t)(end - host));
        if (host_end != NULL)
            port = host_end + 1;
        else
            host_end = end;
    }
    host_len = (size_t)(host_end - host);
    if (host_len == 0 || host_len >= sizeof(out->host)) {
        *why = "the location names no host (redis://HOST:PORT/DB)";
        return -1;
    }
    memcpy(out->host, host, host_len);
    out->host[host_len] = '\0';
    out->port = 6379;
    if (port != NULL) {
        char *tail;
        long value = strtol(port, &tail, 10);
        if (port == end || tail != end || value < 1 || value > 65535) {
            *why = "the port of the location is not a number from 1 to 65535";
            return -1;
        }
        out->port = (unsigned)value;
    }
    if (*end == '/' && end[1] != '\0') {
        if (parse_db(end + 1, strlen(end + 1), &out->db) != 0) {
            *why = "the database of the location is not a number (redis://HOST:PORT/N)";
            return -1;
        }
    } else if (*end != '\0' && strcmp(end, "/") != 0) {
        *why = "unexpected text after the host of the location";
        return -1;
    }
    {
        int v6 = strchr(out->host, ':') != NULL;
        snprintf(out->display, sizeof(out->display), "redis://%s%s%s%s%s%s:%u/%d", out->user,
                 out->password[0] ? ":***" : "", out->user[0] || out->password[0] ? "@" : "", v6 ? "[" : "", out->host,
                 v6 ? "]" : "", out->port, out->db);
    }
    return 0;
}

static int parse_unix(const char *text, rl_redis_location_t *out, const char **why)
{
    const char *path = text + strlen("unix://"), *query = strchr(path, '?'), *p;
    size_t path_len = query != NULL ? (size_t)(query - path) : strlen(path);

    out->is_unix = 1;
    if (path_len == 0 || path[0] != '/') {
        *why = "a unix location needs an absolute path (unix:///PATH?db=N)";
        return -1;
    }
    if (path_len >= sizeof(out->path)) {
        *why = "the socket path of the location is too long";
        return -1;
    }
    memcpy(out->path, path, path_len);
    out->path[path_len] = '\0';
    for (p = query; p != NULL && *p != '\0';) {
        const char *name = p + 1, *amp = strchr(name, '&'), *eq;
        size_t len = amp != NULL ? (size_t)(amp - name) : strlen(name);
        eq = memchr(name, '=', len);
        if (eq == NULL) {
            *why = "a parameter of the location has no value (db=N, password=P, user=U)";
            return -1;
        }
        if ((size_t)(eq - name) == 2 && strncmp(name, "db", 2) == 0) {
            if (parse_db(eq + 1, len - 3, &out->db) != 0) {
                *why = "the db parameter of the location is not a number";
                return -1;
            }
        } else if ((size_t)(eq - name) == 8 && strncmp(name, "password", 8) == 0) {
            if (decode(eq + 1, len - 9, out->password, sizeof(out->password)) != 0) {
                *why = "the password of the location is malformed or too long";
                return -1;
            }
        } else if ((size_t)(eq - name) == 4 && strncmp(name, "user", 4) == 0) {
            if (decode(eq + 1, len - 5, out->user, sizeof(out->user)) != 0) {
                *why = "the user of the location is malformed or too long";
                return -1;
            }
        } else {
            *why = "unknown parameter in the location (db, password and user are known)";
            return -1;
        }
        p = amp;
    }
    snprintf(out->display, sizeof(out->display), "unix://%s?db=%d%s%s%s", out->path, out->db,
             out->user[0] ? "&user=" : "", out->user, out->password[0] ? "&password=***" : "");
    return 0;
}

int rl_redis_parse_location(const char *text, rl_redis_location_t *out, const char **why)
{
    memset(out, 0, sizeof(*out));
    if (strncmp(text, "redis://", 8) == 0)
        return parse_tcp(text, out, why);
    if (strncmp(text, "unix://", 7) == 0)
        return parse_unix(text, out, why);
    *why = "a Redis location starts with redis:// or unix:// (TLS, rediss://, is not supported)";
    return -1;
}

void rl_redis_script_init(rl_redis_script_t *script)
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned len = 0;

    EVP_Digest(script->source, strlen(script->source), digest, &len, EVP_sha1(), NULL);
    rl_hex_encode(digest, len < 20 ? len : 20, script->sha);
}

/* ---- buffers and the FIFO -------------------------------------------------------------------- */

/* Empties an output buffer, giving back the memory of a burst. */
static void outbuf_reset(rl_buf_t *b)
{
    if (b->alloc > KEEP_BUFFER_MAX)
        rl_buf_free(b);
    else
        rl_buf_reset(b);
}

static struct pending *fifo_push(rl_redis_t *r)
{
    struct pending *slot;

    if (r->fifo_count == r->fifo_cap) {
        size_t cap = r->fifo_cap > 0 ? r->fifo_cap * 2 : 64, i;
        struct pending *grown = malloc(cap * sizeof(*grown));
        if (grown == NULL)
            return NULL;
        for (i = 0; i < r->fifo_count; ++i)
            grown[i] = r->fifo[(r->fifo_head + i) % r->fifo_cap];
        free(r->fifo);
        r->fifo = grown;
        r->fifo_cap = cap;
        r->fifo_head = 0;
    }
    slot = &r->fifo[(r->fifo_head + r->fifo_count) % r->fifo_cap];
    ++r->fifo_count;
    memset(slot, 0, sizeof(*slot));
    return slot;
}

static struct pending fifo_pop(rl_redis_t *r)
{
    struct pending head = r->fifo[r->fifo_head];

    r->fifo_head = (r->fifo_head + 1) % r->fifo_cap;
    --r->fifo_count;
    return head;
}

static void release_pending(rl_redis_t *r, struct pending *p)
{
    if (p->command != NULL) {
        r->held_bytes -= p->command_len;
        free(p->command);
        p->command = NULL;
    }
}

/* ---- timers ---------------------------------------------------------------------------------- */

/*
 * h2o walks its list of timeouts while it runs their entries, so a timeout
 * disposed from inside one of them would pull the list from under it. The
 * client's timeouts are therefore shared by every client of a loop and live
 * as long as the thread: freeing a client (from anywhere, even a callback)
 * only unlinks its entries.
 */
h2o_timeout_t *rl_redis__loop_timeout(h2o_loop_t *loop, uint64_t ms)
{
    static __thread struct {
        h2o_loop_t *loop;
        uint64_t ms;
        h2o_timeout_t timeout;
    } timeouts[8];
    static __thread size_t count;
    size_t i;

    for (i = 0; i < count; ++i) {
        if (timeouts[i].loop == loop && timeouts[i].ms == ms)
            return &timeouts[i].timeout;
    }
    if (count == sizeof(timeouts) / sizeof(timeouts[0])) {
        rl_log_error("redis: too many loops or timer periods in one thread");
        abort();
    }
    timeouts[count].loop = loop;
    timeouts[count].ms = ms;
    h2o_timeout_init(loop, &timeouts[count].timeout, ms);
    return &timeouts[count++].timeout;
}

/*
 * A socket is closed on the loop's next turn, not at once: h2o frees a
 * closed socket when it next updates its sockets, and one closed outside a
 * callback (rl_redis_free from the caller) may still sit in its list of
 * sockets whose completions are pending, which it walks afterwards. Until
 * then the socket's data is NULL, so that a completion still delivered finds
 * no client.
 */
struct retired {
    h2o_timeout_entry_t entry;
    h2o_socket_t *sock;
};

static void on_retired(h2o_timeout_entry_t *entry)
{
    struct retired *retired = H2O_STRUCT_FROM_MEMBER(struct retired, entry, entry);

    h2o_socket_close(retired->sock);
    free(retired);
}

static void retire(h2o_loop_t *loop, h2o_socket_t *sock)
{
    struct retired *retired = calloc(1, sizeof(*retired));

    sock->data = NULL;
    if (h2o_socket_is_reading(sock))
        h2o_socket_read_stop(sock);
    if (retired == NULL) {
        h2o_socket_close(sock);
        return;
    }
    retired->sock = sock;
    retired->entry.cb = on_retired;
    h2o_timeout_link(loop, rl_redis__loop_timeout(loop, 0), &retired->entry);
}

/* ---- callbacks into the caller --------------------------------------------------------------- */

static void destroy(rl_redis_t *r);

/*
 * Every way into the client from the loop (socket and timer callbacks) and
 * from the caller (rl_redis_free) goes through enter and leave: a free
 * requested by a callback meanwhile only marks the client, and the
 * outermost leave frees it, once nothing below it on the stack uses it.
 */
static void enter(rl_redis_t *r)
{
    ++r->dispatching;
}

static void leave(rl_redis_t *r)
{
    if (--r->dispatching == 0 && r->free_requested)
        destroy(r);
}

/* Fails every waiting callback: their replies will not come. */
static void fail_pending(rl_redis_t *r)
{
    while (r->fifo_count > 0) {
        struct pending p = fifo_pop(r);
        release_pending(r, &p);
        if (p.cb != NULL)
            p.cb(NULL, p.arg);
    }
}

/* ---- the connection -------------------------------------------------------------------------- */

static void *create_capped_array(const redisReadTask *task, int elements)
{
    /* A count from the peer is not an allocation size: a huge one is a broken stream. */
    if (elements < 0 || elements > ARRAY_MAX)
        return NULL;
    return hiredis_functions->createArray(task, elements);
}

static redisReader *reader_new(void)
{
    redisReader *reader = redisReaderCreate();

    if (reader == NULL)
        return NULL;
    if (hiredis_functions == NULL) {
        hiredis_functions = reader->fn;
        capped_functions = *reader->fn;
        capped_functions.createArray = create_capped_array;
    }
    reader->fn = &capped_functions;
    return reader;
}

/* The connection failed or was lost: everything waiting fails, and the next attempt is scheduled. */
static void drop(rl_redis_t *r, const char *why)
{
    uint64_t now = h2o_now(r->loop);
    int was_ready = r->state == READY;

    if (r->state == DOWN)
        return;
    if (r->sock != NULL) {
        retire(r->loop, r->sock);
        r->sock = NULL;
    }
    r->state = DOWN;
    ++r->connection;
    r->write_in_flight = 0;
    r->handshake_left = 0;
    r->partial = 0;
    outbuf_reset(&r->queued);
    outbuf_reset(&r->writing);
    redisReaderFree(r->reader);
    r->reader = reader_new();
    r->retry_at = now + r->backoff;
    /* Logged once per episode, with the back-off the attempts follow; the attempts themselves are quiet. */
    if (!r->logged_down) {
        if (was_ready)
            rl_log_warn("redis (%s) at %s: connection lost (%s); reconnecting in %llu ms, the back-off doubling to "
                        "%d ms while it fails",
                        r->config.name, r->location.display, why, (unsigned long long)r->backoff, BACKOFF_MAX);
        else
            rl_log_warn("redis (%s) at %s: cannot connect (%s); retrying in %llu ms, the back-off doubling to %d ms "
                        "while it fails",
                        r->config.name, r->location.display, why, (unsigned long long)r->backoff, BACKOFF_MAX);
        r->logged_down = 1;
        r->down_since = now;
    }
    r->backoff = r->backoff * 2 < BACKOFF_MAX ? r->backoff * 2 : BACKOFF_MAX;
    fail_pending(r);
    if (was_ready && !r->free_requested && r->config.on_lost != NULL)
        r->config.on_lost(r, r->config.ctx);
}

static void on_written(h2o_socket_t *sock, const char *err);

static void flush(rl_redis_t *r)
{
    rl_buf_t swap;
    h2o_iovec_t vec;

    if ((r->state != HANDSHAKE && r->state != READY) || r->write_in_flight || r->queued.len == 0)
        return;
    swap = r->writing;
    r->writing = r->queued;
    r->queued = swap;
    rl_buf_reset(&r->queued);
    r->write_in_flight = 1;
    vec = h2o_iovec_init(r->writing.bytes, r->writing.len);
    h2o_socket_write(r->sock, &vec, 1, on_written);
}

static void on_written(h2o_socket_t *sock, const char *err)
{
    rl_redis_t *r = sock->data;

    if (r == NULL)
        return;
    enter(r);
    r->write_in_flight = 0;
    outbuf_reset(&r->writing);
    if (err != NULL)
        drop(r, err);
    else
        flush(r);
    leave(r);
}

static void ready(rl_redis_t *r)
{
    uint64_t now = h2o_now(r->loop);

    r->state = READY;
    r->backoff = BACKOFF_FIRST;
    r->last_activity = now;
    if (r->logged_down)
        rl_log_info("redis (%s) at %s: connected again after %llu ms", r->config.name, r->location.display,
                    (unsigned long long)(now - r->down_since));
    else
        rl_log_info("redis (%s) at %s: connected", r->config.name, r->location.display);
    r->logged_down = 0;
    if (r->config.on_ready != NULL)
        r->config.on_ready(r, r->config.ctx);
}

static int is_push(const redisReply *reply)
{
    static const char *const kinds[] = {"message",     "pmessage",   "subscribe",
                                        "unsubscribe", "psubscribe", "punsubscribe"};
    const redisReply *kind;
    size_t i;

    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 1)
        return 0;
    kind = reply->element[0];
    if (kind->type != REDIS_REPLY_STRING)
        return 0;
    for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); ++i) {
        if (strcmp(kind->str, kinds[i]) == 0)
            return 1;
    }
    return 0;
}

static int queue_command(rl_redis_t *r, char *command, size_t len, rl_redis_reply_cb cb, void *arg,
                         const rl_redis_script_t *script, int expects_reply);

/* The server lost its script cache: send the same call again as EVAL, which loads the script. */
static void retry_as_eval(rl_redis_t *r, struct pending *p)
{
    const char *rest = p->command;
    char head[64], *command;
    size_t source_len = strlen(p->script->source), rest_len, len;
    int argc, head_len;

    /* The command is *N\r\n $7\r\nEVALSHA\r\n $40\r\n<sha>\r\n and then the call's own arguments. */
    argc = atoi(rest + 1);
    rest = strchr(rest, '\n') + 1;
    rest += strlen("$7\r\nEVALSHA\r\n") + strlen("$40\r\n") + 40 + 2;
    rest_len = p->command_len - (size_t)(rest - p->command);
    head_len = snprintf(head, sizeof(head), "*%d\r\n$4\r\nEVAL\r\n$%zu\r\n", argc, source_len);
    len = (size_t)head_len + source_len + 2 + rest_len;
    command = malloc(len);
    if (command != NULL) {
        memcpy(command, head, (size_t)head_len);
        memcpy(command + head_len, p->script->source, source_len);
        memcpy(command + head_len + source_len, "\r\n", 2);
        memcpy(command + head_len + source_len + 2, rest, rest_len);
        if (queue_command(r, command, len, p->cb, p->arg, NULL, 1) == 0)
            return;
    }
    if (p->cb != NULL)
        p->cb(NULL, p->arg);
}

/* Hands one reply to whom it belongs. 1 when reading must stop: the connection changed, or the client is going. */
static int dispatch(rl_redis_t *r, redisReply *reply)
{
    uint64_t connection = r->connection;
    struct pending p;

    if (r->handshake_left > 0) {
        if (reply->type == REDIS_REPLY_ERROR) {
            char why[160];
            /* The server's words (WRONGPASS, NOAUTH, DB index is out of range) never repeat the password. */
            snprintf(why, sizeof(why), "the server refused the handshake: %.120s", reply->str);
            drop(r, why);
            return 1;
        }
        if (--r->handshake_left == 0)
            ready(r);
    } else if (r->config.on_push != NULL && is_push(reply)) {
        r->config.on_push(r, reply, r->config.ctx);
    } else if (r->fifo_count == 0) {
        drop(r, "a reply nobody asked for");
        return 1;
    } else {
        p = fifo_pop(r);
        if (p.script != NULL && reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "NOSCRIPT", 8) == 0)
            retry_as_eval(r, &p);
        else if (p.cb != NULL)
            p.cb(reply, p.arg);
        release_pending(r, &p);
    }
    return r->free_requested || connection != r->connection;
}

static void read_replies(rl_redis_t *r, h2o_socket_t *sock, const char *err)
{
    void *reply;
    size_t left;
    int stop;

    if (err != NULL) {
        drop(r, err == h2o_socket_error_closed ? "closed by the server" : err);
        return;
    }
    if (sock->input->size == 0)
        return;
    r->last_activity = h2o_now(r->loop);
    if (redisReaderFeed(r->reader, sock->input->bytes, sock->input->size) != REDIS_OK) {
        drop(r, "out of memory reading a reply");
        return;
    }
    r->partial += sock->input->size;
    h2o_buffer_consume(&sock->input, sock->input->size);
    for (;;) {
        if (redisReaderGetReply(r->reader, &reply) != REDIS_OK) {
            char why[160];
            snprintf(why, sizeof(why), "unreadable reply: %s", r->reader->errstr);
            drop(r, why);
            return;
        }
        if (reply == NULL)
            break;
        /* What is left in the reader belongs to the replies after this one; the rest was this one. */
        left = r->reader->len - r->reader->pos;
        if (r->partial - left > r->config.max_reply_bytes) {
            freeReplyObject(reply);
            drop(r, "a reply larger than the cap");
            return;
        }
        r->partial = left;
        stop = dispatch(r, reply);
        freeReplyObject(reply);
        if (stop)
            return;
    }
    if (r->partial > r->config.max_reply_bytes)
        drop(r, "a reply larger than the cap");
}

static void on_read(h2o_socket_t *sock, const char *err)
{
    rl_redis_t *r = sock->data;

    if (r == NULL)
        return;
    enter(r);
    read_replies(r, sock, err);
    leave(r);
}

/*
 * Commands and script calls queued for a server, by every client of the
 * process (handshakes and keep-alive PINGs included): relay_bus_calls_total.
 */
static uint64_t calls_sent;

uint64_t rl_redis_calls(void)
{
    return calls_sent;
}

static int append_command(rl_buf_t *b, int argc, const char **argv)
{
    size_t lens[4];
    char *command;
    int i, len, result;

    for (i = 0; i < argc; ++i)
        lens[i] = strlen(argv[i]);
    if ((len = redisFormatCommandArgv(&command, argc, argv, lens)) < 0)
        return -1;
    result = rl_buf_append(b, command, (size_t)len);
    redisFreeCommand(command);
    if (result == 0)
        ++calls_sent;
    return result;
}

static int append_handshake(rl_redis_t *r, rl_buf_t *b)
{
    const char *argv[3];
    char db[16];
    size_t i;

    if (r->location.password[0] != '\0') {
        int argc = 0;
        argv[argc++] = "AUTH";
        if (r->location.user[0] != '\0')
            argv[argc++] = r->location.user;
        argv[argc++] = r->location.password;
        if (append_command(b, argc, argv) != 0)
            return -1;
        ++r->handshake_left;
    }
    if (r->location.db != 0) {
        snprintf(db, sizeof(db), "%d", r->location.db);
        argv[0] = "SELECT", argv[1] = db;
        if (append_command(b, 2, argv) != 0)
            return -1;
        ++r->handshake_left;
    }
    for (i = 0; i < r->config.nscripts; ++i) {
        argv[0] = "SCRIPT", argv[1] = "LOAD", argv[2] = r->config.scripts[i]->source;
        if (append_command(b, 3, argv) != 0)
            return -1;
        ++r->handshake_left;
    }
    /* A PING ends the handshake, so that a connection with nothing to set up is confirmed too. */
    argv[0] = "PING";
    if (append_command(b, 1, argv) != 0)
        return -1;
    ++r->handshake_left;
    return 0;
}

static void on_connect(h2o_socket_t *sock, const char *err)
{
    rl_redis_t *r = sock->data;
    rl_buf_t first;

    if (r == NULL)
        return;
    rl_buf_init(&first, SIZE_MAX);
    enter(r);
    if (err != NULL) {
        drop(r, err);
        goto out;
    }
    r->state = HANDSHAKE;
    r->handshake_left = 0;
    /* The handshake goes first on the wire, then whatever was queued while connecting. */
    if (append_handshake(r, &first) != 0 || rl_buf_append(&first, r->queued.bytes, r->queued.len) != 0) {
        rl_buf_free(&first);
        drop(r, "out of memory");
        goto out;
    }
    rl_buf_free(&r->queued);
    r->queued = first;
    h2o_socket_read_start(sock, on_read);
    flush(r);
out:
    leave(r);
}

static void attempt(rl_redis_t *r)
{
    size_t at = r->next_address++ % r->naddresses;

    r->attempt_started = h2o_now(r->loop);
    r->state = CONNECTING;
    r->sock = h2o_socket_connect(r->loop, (struct sockaddr *)&r->addresses[at], r->address_lens[at], on_connect);
    if (r->sock == NULL) {
        char why[128];
        snprintf(why, sizeof(why), "%s", strerror(errno));
        drop(r, why);
        return;
    }
    r->sock->data = r;
}

static void on_tick(h2o_timeout_entry_t *entry)
{
    rl_redis_t *r = H2O_STRUCT_FROM_MEMBER(rl_redis_t, tick, entry);
    uint64_t now = h2o_now(r->loop);
    char why[96];

    enter(r);
    h2o_timeout_link(r->loop, rl_redis__loop_timeout(r->loop, TICK_MS), &r->tick);
    switch (r->state) {
    case DOWN:
        if (now >= r->retry_at)
            attempt(r);
        break;
    case CONNECTING:
    case HANDSHAKE:
        if (now - r->attempt_started > r->config.reply_timeout_ms) {
            snprintf(why, sizeof(why), "no answer in %llu ms", (unsigned long long)r->config.reply_timeout_ms);
            drop(r, why);
        }
        break;
    case READY:
        if (r->fifo_count > 0 && now - r->fifo[r->fifo_head].queued_at > r->config.reply_timeout_ms) {
            snprintf(why, sizeof(why), "no reply in %llu ms", (unsigned long long)r->config.reply_timeout_ms);
            drop(r, why);
        } else if (r->fifo_count == 0 && now - r->last_activity >= r->config.keepalive_ms) {
            const char *argv[] = {"PING"};
            size_t lens[] = {4};
            r->last_activity = now;
            rl_redis_command(r, 1, argv, lens, NULL, NULL);
        }
        break;
    }
    leave(r);
}

static int resolve(rl_redis_t *r)
{
    struct addrinfo hints = {0}, *found = NULL, *ai;
    char port[8];
    int result;

    if (r->location.is_unix) {
        struct sockaddr_un *sun = (struct sockaddr_un *)&r->addresses[0];
        sun->sun_family = AF_UNIX;
        memcpy(sun->sun_path, r->location.path, strlen(r->location.path) + 1);
        r->address_lens[0] = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(r->location.path) + 1);
        r->naddresses = 1;
        return 0;
    }
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(port, sizeof(port), "%u", r->location.port);
    if ((result = getaddrinfo(r->location.host, port, &hints, &found)) != 0) {
        rl_log_error("redis at %s: cannot resolve %s: %s", r->location.display, r->location.host, gai_strerror(result));
        return -1;
    }
    for (ai = found; ai != NULL && r->naddresses < ADDRESSES_MAX; ai = ai->ai_next) {
        memcpy(&r->addresses[r->naddresses], ai->ai_addr, ai->ai_addrlen);
        r->address_lens[r->naddresses++] = ai->ai_addrlen;
    }
    freeaddrinfo(found);
    return r->naddresses > 0 ? 0 : -1;
}

int rl_redis_new(h2o_loop_t *loop, const rl_redis_location_t *location, const rl_redis_config_t *config,
                 rl_redis_t **out)
{
    rl_redis_t *r = calloc(1, sizeof(*r));

    if (r == NULL)
        return RL_E_INTERNAL;
    r->loop = loop;
    r->location = *location;
    r->config = *config;
    r->backoff = BACKOFF_FIRST;
    rl_buf_init(&r->queued, SIZE_MAX);
    rl_buf_init(&r->writing, SIZE_MAX);
    r->reader = reader_new();
    if (r->reader == NULL || resolve(r) != 0) {
        if (r->reader != NULL)
            redisReaderFree(r->reader);
        free(r);
        return RL_E_UNAVAILABLE;
    }
    r->tick.cb = on_tick;
    h2o_timeout_link(loop, rl_redis__loop_timeout(loop, TICK_MS), &r->tick);
    *out = r;
    attempt(r);
    return 0;
}

static void destroy(rl_redis_t *r)
{
    if (h2o_timeout_is_linked(&r->tick))
        h2o_timeout_unlink(&r->tick);
    if (r->sock != NULL)
        retire(r->loop, r->sock);
    redisReaderFree(r->reader);
    rl_buf_free(&r->queued);
    rl_buf_free(&r->writing);
    free(r->fifo);
    OPENSSL_cleanse(r->location.password, sizeof(r->location.password));
    free(r);
}

void rl_redis_free(rl_redis_t *r)
{
    if (r == NULL || r->free_requested)
        return;
    enter(r);
    r->free_requested = 1;
    /* Callbacks learn that their replies will not come; nothing runs afterwards. */
    fail_pending(r);
    leave(r);
}

int rl_redis_ready(const rl_redis_t *r)
{
    return r->state == READY;
}

/* Takes command (from malloc) and frees it whatever happens. */
static int queue_command(rl_redis_t *r, char *command, size_t len, rl_redis_reply_cb cb, void *arg,
                         const rl_redis_script_t *script, int expects_reply)
{
    struct pending *p;

    if (r->state == DOWN || r->free_requested || (expects_reply && r->fifo_count >= r->config.max_pending) ||
        r->queued.len + r->writing.len + r->held_bytes + len > r->config.max_queued_bytes) {
        free(command);
        return RL_E_UNAVAILABLE;
    }
    p = expects_reply ? fifo_push(r) : NULL;
    if ((expects_reply && p == NULL) || rl_buf_append(&r->queued, command, len) != 0) {
        if (p != NULL)
            --r->fifo_count;
        free(command);
        return RL_E_UNAVAILABLE;
    }
    if (p != NULL) {
        p->cb = cb;
        p->arg = arg;
        p->queued_at = h2o_now(r->loop);
        if (script != NULL) {
            p->script = script;
            p->command = command;
            p->command_len = len;
            r->held_bytes += len;
            command = NULL;
        }
    }
    free(command);
    ++calls_sent;
    flush(r);
    return 0;
}

int rl_redis_command(rl_redis_t *r, int argc, const char **argv, const size_t *argvlen, rl_redis_reply_cb cb, void *arg)
{
    char *command;
    int len;

    if (r->state == DOWN)
        return RL_E_UNAVAILABLE;
    if ((len = redisFormatCommandArgv(&command, argc, argv, argvlen)) < 0)
        return RL_E_UNAVAILABLE;
    return queue_command(r, command, (size_t)len, cb, arg, NULL, 1);
}

int rl_redis_eval(rl_redis_t *r, const rl_redis_script_t *script, int nkeys, int argc, const char **argv,
                  const size_t *argvlen, rl_redis_reply_cb cb, void *arg)
{
    const char *small_argv[16], **all = small_argv;
    size_t small_lens[16], *lens = small_lens;
    char count[16], *command;
    int len, i, result;

    if (r->state == DOWN)
        return RL_E_UNAVAILABLE;
    if (argc + 3 > 16) {
        all = malloc((size_t)(argc + 3) * sizeof(*all));
        lens = malloc((size_t)(argc + 3) * sizeof(*lens));
        if (all == NULL || lens == NULL) {
            result = RL_E_UNAVAILABLE;
            goto out;
        }
    }
    snprintf(count, sizeof(count), "%d", nkeys);
    all[0] = "EVALSHA", lens[0] = 7;
    all[1] = script->sha, lens[1] = 40;
    all[2] = count, lens[2] = strlen(count);
    for (i = 0; i < argc; ++i) {
        all[3 + i] = argv[i];
        lens[3 + i] = argvlen[i];
    }
    if ((len = redisFormatCommandArgv(&command, argc + 3, all, lens)) < 0) {
        result = RL_E_UNAVAILABLE;
        goto out;
    }
    result = queue_command(r, command, (size_t)len, cb, arg, script, 1);
out:
    if (all != small_argv)
        free(all);
    if (lens != small_lens)
        free(lens);
    return result;
}

int rl_redis_subscription(rl_redis_t *r, int argc, const char **argv, const size_t *argvlen)
{
    char *command;
    int len;

    if (r->state == DOWN)
        return RL_E_UNAVAILABLE;
    if ((len = redisFormatCommandArgv(&command, argc, argv, argvlen)) < 0)
        return RL_E_UNAVAILABLE;
    return queue_command(r, command, (size_t)len, NULL, NULL, NULL, 0);
}
