/*
 * A Redis client on h2o's event loop, for the Redis bus (bus_redis*.c).
 *
 * relayd runs h2o's own epoll loop, which reads sockets itself and hands
 * over bytes, not readiness, so hiredis's asynchronous adapters do not fit.
 * hiredis does the protocol only: redisFormatCommandArgv encodes commands
 * and its reply reader parses what arrives; the bytes move over an h2o
 * socket (TCP or Unix).
 *
 * One rl_redis_t is one connection that keeps itself up:
 * - Commands are pipelined: each is written as soon as the socket takes it,
 *   without waiting for earlier replies, and its callback waits in a FIFO.
 * - On every (re)connection it sends AUTH and SELECT (from the location)
 *   and SCRIPT LOAD for its scripts, before any command queued meanwhile.
 * - A lost connection fails every waiting callback (reply NULL) and is
 *   retried with back-off, 100 ms doubling to 5 s; it is logged once when
 *   lost and once when back. A server that does not answer within the reply
 *   timeout counts as lost; an idle connection sends PING now and then so
 *   that a dead peer is noticed.
 * - Between attempts commands are refused at once (RL_E_UNAVAILABLE): the
 *   caller decides what a command that cannot be sent means. During an
 *   attempt they are queued and sent once connected.
 * - Every queue has a cap fixed at creation: commands waiting for a reply,
 *   bytes not yet written, the size of one reply being read.
 *
 * Loop thread only. Callbacks never run inside the call that queued the
 * command. The password of a location is never logged.
 */
#ifndef RL_BUS_REDIS_H
#define RL_BUS_REDIS_H

#include <h2o.h>
#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rl_redis_location {
    int is_unix;
    char host[256]; /* a host name or address (TCP) */
    unsigned port;
    char path[108]; /* the socket's path (Unix) */
    char user[128]; /* an ACL user, "" for the default one */
    char password[256];
    int db;
    char display[512]; /* the location without its password, for logs */
} rl_redis_location_t;

/*
 * Parses redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] (an IPv6 address in
 * brackets; port 6379 and DB 0 by default; USER and PASSWORD may be
 * %-encoded) or unix:///PATH[?db=N][&password=P][&user=U]. 0, or -1 with
 * *why pointing at a static sentence.
 */
int rl_redis_parse_location(const char *text, rl_redis_location_t *out, const char **why);

/* A Lua script run by EVALSHA; loaded on every connection that lists it. */
typedef struct rl_redis_script {
    const char *source;
    char sha[41]; /* filled by rl_redis_script_init */
} rl_redis_script_t;

/* Computes the script's SHA-1, which EVALSHA names it by. */
void rl_redis_script_init(rl_redis_script_t *script);

typedef struct rl_redis rl_redis_t;

/*
 * The reply to a command (borrowed for the call), or NULL when none will
 * come: the connection was lost before it, or the client is being freed.
 * An error reply is a reply (type REDIS_REPLY_ERROR).
 */
typedef void (*rl_redis_reply_cb)(redisReply *reply, void *arg);

typedef struct rl_redis_config {
    const char *name; /* what the connection is for, in logs ("commands", "subscriptions") */
    rl_redis_script_t *const *scripts;
    size_t nscripts;
    size_t max_pending;        /* commands waiting for a reply */
    size_t max_queued_bytes;   /* encoded commands not yet written, or kept for a retry */
    size_t max_reply_bytes;    /* one reply being read; a larger one drops the connection */
    uint64_t reply_timeout_ms; /* a reply or a connection attempt slower than this drops the connection */
    uint64_t keepalive_ms;     /* an idle connection sends PING this often */
    /* Connected, authenticated, DB selected, scripts loaded: subscribe again here. */
    void (*on_ready)(rl_redis_t *redis, void *ctx);
    /* The connection was lost (its waiting callbacks have been failed). */
    void (*on_lost)(rl_redis_t *redis, void *ctx);
    /*
     * A subscription message or confirmation (message, subscribe,
     * unsubscribe, ...), which no command's callback owns. Only for a
     * connection that subscribes; NULL on a command connection, where such
     * an array is an ordinary reply.
     */
    void (*on_push)(rl_redis_t *redis, redisReply *reply, void *ctx);
    void *ctx;
} rl_redis_config_t;

/*
 * Creates the client and starts connecting. The host name is resolved here,
 * once (a blocking lookup: call it at start-up); reconnections use the
 * addresses found then. 0, or a negative RL_E_* error with the cause logged
 * (the location cannot be resolved, or out of memory).
 */
int rl_redis_new(h2o_loop_t *loop, const rl_redis_location_t *location, const rl_redis_config_t *config,
                 rl_redis_t **out);

/*
 * Closes the connection; every waiting callback is called with NULL first.
 * From inside one of the client's callbacks, the client is freed once that
 * callback returns.
 */
void rl_redis_free(rl_redis_t *redis);

/* Whether the connection is up and ready (handshake done). */
int rl_redis_ready(const rl_redis_t *redis);

/*
 * Queues a command (argv copied); cb (may be NULL) gets its reply. 0, or
 * RL_E_UNAVAILABLE when the server is down between two attempts or a cap is
 * reached (cb is then never called).
 */
int rl_redis_command(rl_redis_t *redis, int argc, const char **argv, const size_t *argvlen, rl_redis_reply_cb cb,
                     void *arg);

/*
 * EVALSHA of script with nkeys keys among its argc arguments. Should the
 * server not know the script (its cache was flushed), the command is sent
 * again as EVAL, which also loads it. Errors as rl_redis_command.
 */
int rl_redis_eval(rl_redis_t *redis, const rl_redis_script_t *script, int nkeys, int argc, const char **argv,
                  const size_t *argvlen, rl_redis_reply_cb cb, void *arg);

/*
 * Queues SUBSCRIBE or UNSUBSCRIBE (or their pattern forms), whose answers
 * are push messages (on_push), not a callback's reply. Errors as
 * rl_redis_command.
 */
int rl_redis_subscription(rl_redis_t *redis, int argc, const char **argv, const size_t *argvlen);

/*
 * Commands and script calls this process has queued for any server since it
 * started (each command of a pipeline counts; handshakes and PINGs too).
 * Loop thread only.
 */
uint64_t rl_redis_calls(void);

/*
 * A timeout of ms on loop that lives as long as the thread, shared by every
 * user of the same period: entries can be unlinked from inside any callback,
 * which disposing of a timeout there could not (h2o walks the list).
 */
h2o_timeout_t *rl_redis__loop_timeout(h2o_loop_t *loop, uint64_t ms);

#endif
