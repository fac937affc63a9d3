/*
 * `setup`: pairs installations the way a bridge and a phone do (start from
 * the bridge's address, claim with the user's token, poll), then gives the
 * first few a session, an interaction and an open agent message to stream
 * into. `warm`: one GET /v1/me per user, so that users exist before wrk
 * measures (the first sight of a user writes it to the store).
 *
 * The pairing routes are limited per source address (20 burst, 1/s) and the
 * claim per user (5 burst) and per source address (10 burst): each
 * installation has its own user, and every `--per-ip` pairings move to the
 * next loopback address, the claims with them (a phone is not on the bridge's
 * address, but neither are a thousand phones on one), so the whole setup
 * stays inside the bursts instead of waiting on them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

/* A call that waits out 429s (the limits are part of the product, not an error of the setup). */
static int call(loop_t *loop, conn_t **cp, const struct sockaddr_in *dst, const struct in_addr *src,
                const char *method, const char *path, const char *bearer, const char *body, char **resp)
{
    int status, tries;

    for (tries = 0; tries < 50; ++tries) {
        char wait[32];
        long ms = 1000;

        status = sync_call(loop, cp, dst, src, method, path, bearer, body, resp);
        if (status != 429)
            return status;
        if (json_find_string(*resp, "retry_after_ms", wait, sizeof(wait)) == 0)
            ms = atol(wait);
        else if (*resp != NULL && strstr(*resp, "\"retry_after_ms\":") != NULL)
            ms = atol(strstr(*resp, "\"retry_after_ms\":") + 17);
        free(*resp);
        *resp = NULL;
        usleep((useconds_t)((ms > 0 ? ms : 100) + 20) * 1000);
    }
    return status;
}

static void need(int status, const char *resp, const char *what)
{
    if (status != 200)
        die("%s failed: HTTP %d %s", what, status, resp != NULL ? resp : "");
}

int mode_setup(int argc, char **argv)
{
    const char *url = opt_str(argc, argv, "url", NULL), *users_path = opt_str(argc, argv, "users", NULL);
    const char *out_path = opt_str(argc, argv, "out", NULL), *src_base = opt_str(argc, argv, "src-base", "127.1.0.1");
    long count = opt_long(argc, argv, "count", 0), streaming = opt_long(argc, argv, "streaming", 0);
    long per_ip = opt_long(argc, argv, "per-ip", 8);
    struct sockaddr_in dst;
    inst_rec_t *recs;
    loop_t *loop = loop_new();
    conn_t *user_conn = NULL, *pair_conn = NULL, *claim_conn = NULL;
    struct in_addr src;
    int n;
    long i;
    FILE *out;
    uint64_t t0 = now_ns();

    if (url == NULL || users_path == NULL || out_path == NULL || parse_hostport(url, &dst) != 0)
        die("setup needs --url HOST:PORT --users FILE --count N --out FILE");
    n = state_read(users_path, &recs);
    if (n < count)
        die("%s has %d users, %ld needed", users_path, n, count);
    out = fopen(out_path, "w");
    if (out == NULL)
        die("cannot write %s", out_path);
    for (i = 0; i < count; ++i) {
        inst_rec_t *r = &recs[i];
        char body[512], path[256], code[16], poll_token[64], *resp = NULL;
        int status;

        if (i % per_ip == 0) {
            conn_free(pair_conn);
            conn_free(claim_conn);
            pair_conn = claim_conn = NULL;
            src = addr_plus(src_base, (unsigned)(i / per_ip));
        }
        snprintf(body, sizeof(body), "{\"connector_type\":\"bench\",\"host_label\":\"bench-%ld\"}", i);
        status = call(loop, &pair_conn, &dst, &src, "POST", "/v1/pairing/start", NULL, body, &resp);
        need(status, resp, "pairing/start");
        if (json_find_string(resp, "code", code, sizeof(code)) != 0 ||
            json_find_string(resp, "poll_token", poll_token, sizeof(poll_token)) != 0)
            die("pairing/start: unexpected answer %s", resp);
        free(resp);
        snprintf(body, sizeof(body), "{\"code\":\"%s\"}", code);
        status = call(loop, &claim_conn, &dst, &src, "POST", "/v1/me/pairing/claim", r->user_token, body, &resp);
        need(status, resp, "pairing/claim");
        free(resp);
        snprintf(body, sizeof(body), "{\"poll_token\":\"%s\"}", poll_token);
        status = call(loop, &pair_conn, &dst, &src, "POST", "/v1/pairing/poll", NULL, body, &resp);
        need(status, resp, "pairing/poll");
        if (json_find_string(resp, "token", r->bridge_token, sizeof(r->bridge_token)) != 0 ||
            json_find_string(resp, "installation_id", r->installation_id, sizeof(r->installation_id)) != 0)
            die("pairing/poll: not paired: %s", resp);
        free(resp);
        if (i < streaming) {
            snprintf(body, sizeof(body), "{\"installation_id\":\"%s\"}", r->installation_id);
            status = call(loop, &user_conn, &dst, NULL, "POST", "/v1/me/sessions", r->user_token, body, &resp);
            need(status, resp, "POST /v1/me/sessions");
            if (json_find_string(resp, "session_id", r->session_id, sizeof(r->session_id)) != 0)
                die("sessions: %s", resp);
            free(resp);
            snprintf(path, sizeof(path), "/v1/me/sessions/%s/send", r->session_id);
            status = call(loop, &user_conn, &dst, NULL, "POST", path, r->user_token, "{\"text\":\"benchmark\"}",
                          &resp);
            need(status, resp, "send");
            if (json_find_string(resp, "interaction_id", r->interaction_id, sizeof(r->interaction_id)) != 0)
                die("send: %s", resp);
            free(resp);
            snprintf(body, sizeof(body),
                     "{\"session_id\":\"%s\",\"interaction_id\":\"%s\",\"text\":\"\",\"idempotency_key\":\"open\"}",
                     r->session_id, r->interaction_id);
            status = call(loop, &user_conn, &dst, NULL, "POST", "/v1/bridge/sendMessage", r->bridge_token, body,
                          &resp);
            need(status, resp, "sendMessage");
            if (json_find_string(resp, "message_id", r->message_id, sizeof(r->message_id)) != 0)
                die("sendMessage: %s", resp);
            free(resp);
            /* The bridge token travels on the user's connection here; reset it so it is not kept for a user. */
        }
        state_write_line(out, r);
    }
    fclose(out);
    fprintf(stderr, "setup: %ld installations (%ld streaming) in %.1f s\n", count, streaming < count ? streaming : count,
            (double)(now_ns() - t0) / 1e9);
    return 0;
}

int mode_warm(int argc, char **argv)
{
    const char *url = opt_str(argc, argv, "url", NULL), *users_path = opt_str(argc, argv, "users", NULL);
    struct sockaddr_in dst;
    inst_rec_t *recs;
    loop_t *loop = loop_new();
    conn_t *c = NULL;
    size_t body_bytes = 0;
    int n, i, bad = 0;
    uint64_t t0 = now_ns();

    if (url == NULL || users_path == NULL || parse_hostport(url, &dst) != 0)
        die("warm needs --url HOST:PORT --users FILE");
    n = state_read(users_path, &recs);
    for (i = 0; i < n; ++i) {
        char *resp = NULL;
        int status = call(loop, &c, &dst, NULL, "GET", "/v1/me", recs[i].user_token, NULL, &resp);

        if (status != 200)
            ++bad;
        else if (body_bytes == 0 && resp != NULL)
            body_bytes = strlen(resp);
        free(resp);
    }
    if (bad > 0)
        die("warm: %d of %d users did not answer 200", bad, n);
    fprintf(stderr, "warm: %d users in %.1f s\n", n, (double)(now_ns() - t0) / 1e9);
    printf("%zu\n", body_bytes);
    return 0;
}
