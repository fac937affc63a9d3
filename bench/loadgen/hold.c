/*
 * `hold`: opens many idle connections and keeps them — Server-Sent Events
 * streams for users and WebSockets for bridges — answering the relay's
 * pings, until SIGTERM. Connections come from a spread of loopback source
 * addresses and open a bounded number at a time. When every connection is up
 * (or refused) it writes a JSON summary to --ready; on SIGTERM it prints how
 * many the relay closed meanwhile.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static volatile sig_atomic_t stop;
static long opened, established, failed, closed_later, pings, ready_frames;
static long pending;

static void on_term(int signo)
{
    stop = 1;
}

static void on_open(conn_t *c, int status)
{
    int want = c->mode == CONN_WS ? 101 : 200;

    pending--;
    if (status == want) {
        established++;
        c->seq = 1;
    } else {
        failed++;
        if (failed < 5)
            fprintf(stderr, "hold: connection %ld got HTTP %d\n", c->idx, status);
        conn_close(c);
    }
}

static void on_close(conn_t *c, int err)
{
    if (c->seq == 1) {
        closed_later++;
        c->seq = 2;
    } else if (c->seq == 0) {
        pending--;
        failed++;
    }
}

static void on_ws_message(conn_t *c, const char *data, size_t len, uint64_t at)
{
    static const char pong[] = "{\"type\":\"pong\"}";

    if (memmem(data, len, "\"type\":\"ping\"", 13) != NULL) {
        conn_ws_send(c, 0x1, pong, sizeof(pong) - 1);
        pings++;
    } else if (memmem(data, len, "\"type\":\"ready\"", 14) != NULL) {
        ready_frames++;
    }
}

int mode_hold(int argc, char **argv)
{
    const char *url = opt_str(argc, argv, "url", NULL), *state = opt_str(argc, argv, "state", NULL);
    const char *ready_path = opt_str(argc, argv, "ready", NULL),
               *src_base = opt_str(argc, argv, "src-base", "127.2.0.1");
    long src_count = opt_long(argc, argv, "src-count", 32), nsse = opt_long(argc, argv, "sse", 0);
    long concurrency = opt_long(argc, argv, "concurrency", 200);
    long ua = 0, ub = 0, wa = 0, wb = 0, total;
    struct sockaddr_in dst;
    inst_rec_t *recs;
    int nrecs;
    conn_t **conns;
    loop_t *loop = loop_new();
    uint64_t t0 = now_ns();
    FILE *f;

    if (url == NULL || state == NULL || ready_path == NULL || parse_hostport(url, &dst) != 0)
        die("hold needs --url HOST:PORT --state FILE --ready FILE [--sse N --sse-users A:B] [--ws A:B]");
    opt_range(argc, argv, "sse-users", &ua, &ub);
    opt_range(argc, argv, "ws", &wa, &wb);
    nrecs = state_read(state, &recs);
    if (nsse > 0 && (ub <= ua || ub > nrecs))
        die("--sse-users must name lines of the state file");
    if (wb > nrecs)
        die("--ws names lines beyond the state file");
    total = nsse + (wb - wa);
    conns = calloc((size_t)total + 1, sizeof(conn_t *));
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    signal(SIGPIPE, SIG_IGN);
    while (!stop && (opened < total || pending > 0)) {
        while (opened < total && pending < concurrency) {
            struct in_addr src = addr_plus(src_base, (unsigned)(opened % src_count));
            char req[2048];
            int len;
            conn_t *c;

            if (opened < nsse) {
                const inst_rec_t *r = &recs[ua + opened % (ub - ua)];
                c = conn_new(loop, CONN_SSE, &dst, &src);
                len = snprintf(req, sizeof(req),
                               "GET /v1/me/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
                               "Authorization: Bearer %s\r\n\r\n",
                               r->user_token);
            } else {
                const inst_rec_t *r = &recs[wa + (opened - nsse)];
                c = conn_new(loop, CONN_WS, &dst, &src);
                len = snprintf(req, sizeof(req),
                               "GET /v1/bridge/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                               "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                               "Sec-WebSocket-Key: cmVsYXliZW5jaGtleTAwMA==\r\nAuthorization: Bearer %s\r\n\r\n",
                               r->bridge_token);
                if (c != NULL)
                    c->on_data = on_ws_message;
            }
            if (c == NULL) {
                failed++;
                opened++;
                continue;
            }
            c->idx = opened;
            c->on_open = on_open;
            c->on_close = on_close;
            conns[opened++] = c;
            pending++;
            conn_send(c, req, (size_t)len);
        }
        loop_poll(loop, 10000000);
    }
    f = fopen(ready_path, "w");
    if (f == NULL)
        die("cannot write %s", ready_path);
    fprintf(f, "{\"sse\":%ld,\"ws\":%ld,\"established\":%ld,\"failed\":%ld,\"seconds\":%.2f}\n", nsse, wb - wa,
            established, failed, (double)(now_ns() - t0) / 1e9);
    fclose(f);
    while (!stop)
        loop_poll(loop, 100000000);
    printf(
        "{\"established\":%ld,\"failed\":%ld,\"closed_by_server\":%ld,\"pings_answered\":%ld,\"ready_frames\":%ld}\n",
        established, failed, closed_later, pings, ready_frames);
    fflush(stdout);
    return 0;
}
