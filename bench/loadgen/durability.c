/*
 * `durability`: a write load of whole conversations — the user sends, the
 * bridge opens a message, streams deltas, ends it, asks for an approval, the
 * user decides — from many installations at once; at --kill-after-ms, at a
 * moment when writes are in flight, it sends SIGKILL to relayd itself and
 * writes a journal of every write it attempted and whether it was answered
 * 200 (acknowledged).
 *
 * `verify` (after relayd was started again on the same folder) reads the
 * journals and checks, through the public API only:
 *   - every acknowledged user message and agent message is in the history,
 *     once, with its exact text; an acknowledged end left a final message
 *     with exactly the expected text; an open message holds exactly the
 *     acknowledged deltas, in order (plus at most the one in flight);
 *   - no interaction has two agent messages, no user text appears twice;
 *   - acknowledged writes replayed with their idempotency key answer
 *     `idempotent: true` with the same result (the idempotency records
 *     survived); an acknowledged approval decision is still the decision (a
 *     contrary one gets the stored one back);
 *   - writes that were in flight at the kill, retried with the same key,
 *     are applied exactly once (checked on the history afterwards).
 *
 * Every text is a function of (round, installation, cycle, delta index), so
 * the journal only needs ids and outcomes.
 */
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "common.h"

enum op { OP_SEND, OP_OPEN, OP_DELTA, OP_END, OP_APPR, OP_DECIDE, OP_IDLE };

#define CYCLES_MAX 64
#define DELTAS_MAX 16

static void user_text(char *out, size_t n, int round, int inst, int cycle)
{
    snprintf(out, n, "user %d.%d.%d", round, inst, cycle);
}

static void delta_text(char *out, size_t n, int round, int inst, int cycle, int j)
{
    snprintf(out, n, "[%d:%d.%d.%d]", j, round, inst, cycle);
}

static int end_has_text(int cycle)
{
    return cycle % 2 == 0;
}

static void end_text(char *out, size_t n, int round, int inst, int cycle)
{
    snprintf(out, n, "final %d.%d.%d", round, inst, cycle);
}

static const char *decision_of(int cycle)
{
    return cycle % 2 == 0 ? "approve" : "deny";
}

static void approval_id(char *out, size_t n, int round, int inst, int cycle)
{
    snprintf(out, n, "apr_bench_%d_%d_%d", round, inst, cycle);
}

/* Request bodies, shared by the load and the retries of verify so that a replay is byte-identical. */
static int body_open(char *out, size_t n, const char *session, const char *interaction, int round, int cycle)
{
    return snprintf(out, n, "{\"session_id\":\"%s\",\"interaction_id\":\"%s\",\"text\":\"\",\"idempotency_key\":\"open-%d-%d\"}",
                    session, interaction, round, cycle);
}

static int body_delta(char *out, size_t n, const char *message, int round, int inst, int cycle, int j)
{
    char d[128];

    delta_text(d, sizeof(d), round, inst, cycle, j);
    return snprintf(out, n, "{\"message_id\":\"%s\",\"delta\":\"%s\",\"idempotency_key\":\"d%d\"}", message, d, j);
}

static int body_end(char *out, size_t n, const char *message, int round, int inst, int cycle)
{
    char t[128];

    if (!end_has_text(cycle))
        return snprintf(out, n, "{\"message_id\":\"%s\",\"finish_reason\":\"stop\",\"idempotency_key\":\"end\"}",
                        message);
    end_text(t, sizeof(t), round, inst, cycle);
    return snprintf(out, n, "{\"message_id\":\"%s\",\"text\":\"%s\",\"finish_reason\":\"stop\",\"idempotency_key\":\"end\"}",
                    message, t);
}

static int body_approval(char *out, size_t n, const char *session, const char *interaction, int round, int inst, int cycle)
{
    char id[96];

    approval_id(id, sizeof(id), round, inst, cycle);
    return snprintf(out, n,
                    "{\"session_id\":\"%s\",\"interaction_id\":\"%s\",\"approval_id\":\"%s\",\"action\":\"exec\","
                    "\"title\":\"run\",\"message\":\"may I?\",\"command\":\"make\",\"severity\":\"low\","
                    "\"idempotency_key\":\"ap\"}",
                    session, interaction, id);
}

/* ---------------- the load ---------------- */

struct cycle_rec {
    int acked[6];            /* per op: 1 acknowledged, 0 attempted and not, -1 not attempted */
    int deltas_acked;        /* deltas 0..deltas_acked-1 acknowledged */
    int delta_inflight;      /* index of a delta sent and not answered, or -1 */
    uint64_t delta_ack_ns[DELTAS_MAX]; /* when each delta was answered 200 */
    char interaction[64], user_msg[64], agent_msg[64];
};

struct dinst {
    int idx;
    const inst_rec_t *rec;
    char session[64];
    conn_t *c;
    enum op step;
    int cycle, j, busy, dead, paused;
    uint64_t next_cycle_at, resume_at;
    struct cycle_rec cycles[CYCLES_MAX];
};

static struct {
    loop_t *loop;
    struct sockaddr_in dst;
    struct dinst *insts;
    int n, round, deltas;
    uint64_t cycle_ns, delta_gap_ns;
    long inflight, acked, attempted, refused, refused_429;
    uint64_t killed_at;
    int killed, last_refusal;
    char last_refusal_body[160];
} D;

static void issue(struct dinst *in);

static void step_done(struct dinst *in, int status, const char *body)
{
    struct cycle_rec *cr = &in->cycles[in->cycle];
    int ok = status == 200;

    in->busy = 0;
    D.inflight--;
    if (ok) {
        D.acked++;
    } else if (status > 0) {
        D.refused++;
        if (status == 429)
            D.refused_429++;
        D.last_refusal = status;
        snprintf(D.last_refusal_body, sizeof(D.last_refusal_body), "%s", body);
    }
    if (in->step == OP_DELTA) {
        if (ok) {
            cr->deltas_acked = in->j + 1;
            cr->delta_inflight = -1;
            cr->delta_ack_ns[in->j] = now_ns();
        }
        cr->acked[OP_DELTA] = ok;
    } else {
        cr->acked[in->step] = ok;
    }
    if (ok && in->step == OP_SEND) {
        json_find_string(body, "interaction_id", cr->interaction, sizeof(cr->interaction));
        json_find_string(body, "message_id", cr->user_msg, sizeof(cr->user_msg));
    } else if (ok && in->step == OP_OPEN) {
        json_find_string(body, "message_id", cr->agent_msg, sizeof(cr->agent_msg));
    }
    if (!ok || D.killed) {
        /* A refused write ends this cycle; the next one starts on schedule. */
        in->step = OP_IDLE;
        if (status < 0)
            in->dead = 1;
        return;
    }
    switch (in->step) {
    case OP_SEND:
        in->step = OP_OPEN;
        break;
    case OP_OPEN:
        in->step = OP_DELTA;
        in->j = 0;
        break;
    case OP_DELTA:
        if (++in->j >= D.deltas) {
            in->step = OP_END;
        } else if (D.delta_gap_ns > 0) {
            /* A model streams its tokens over time: the next delta comes a little later. */
            in->paused = 1;
            in->resume_at = now_ns() + D.delta_gap_ns;
            return;
        }
        break;
    case OP_END:
        in->step = OP_APPR;
        break;
    case OP_APPR:
        in->step = OP_DECIDE;
        break;
    default:
        in->step = OP_IDLE;
        break;
    }
    if (in->step != OP_IDLE)
        issue(in);
}

static void on_response(conn_t *c, int status, const char *body, size_t len)
{
    char copy[1024];

    snprintf(copy, sizeof(copy), "%.*s", (int)(len < sizeof(copy) - 1 ? len : sizeof(copy) - 1), body);
    step_done(c->user, status, copy);
}

static void on_closed(conn_t *c, int err)
{
    struct dinst *in = c->user;

    if (in->busy)
        step_done(in, -1, "");
    in->dead = 1;
}

static void issue(struct dinst *in)
{
    struct cycle_rec *cr = &in->cycles[in->cycle];
    char body[1024], path[256], req[2048];
    const char *method = "POST", *token = in->rec->bridge_token;
    int blen = 0, len;

    switch (in->step) {
    case OP_SEND: {
        char t[96];
        user_text(t, sizeof(t), D.round, in->idx, in->cycle);
        snprintf(path, sizeof(path), "/v1/me/sessions/%s/send", in->session);
        blen = snprintf(body, sizeof(body), "{\"text\":\"%s\"}", t);
        token = in->rec->user_token;
        break;
    }
    case OP_OPEN:
        snprintf(path, sizeof(path), "/v1/bridge/sendMessage");
        blen = body_open(body, sizeof(body), in->session, cr->interaction, D.round, in->cycle);
        break;
    case OP_DELTA:
        snprintf(path, sizeof(path), "/v1/bridge/sendMessageDelta");
        blen = body_delta(body, sizeof(body), cr->agent_msg, D.round, in->idx, in->cycle, in->j);
        cr->delta_inflight = in->j;
        break;
    case OP_END:
        snprintf(path, sizeof(path), "/v1/bridge/sendMessageEnd");
        blen = body_end(body, sizeof(body), cr->agent_msg, D.round, in->idx, in->cycle);
        break;
    case OP_APPR:
        snprintf(path, sizeof(path), "/v1/bridge/requestApproval");
        blen = body_approval(body, sizeof(body), in->session, cr->interaction, D.round, in->idx, in->cycle);
        break;
    case OP_DECIDE: {
        char id[96];
        approval_id(id, sizeof(id), D.round, in->idx, in->cycle);
        snprintf(path, sizeof(path), "/v1/me/approvals/%s", id);
        blen = snprintf(body, sizeof(body), "{\"decision\":\"%s\"}", decision_of(in->cycle));
        token = in->rec->user_token;
        break;
    }
    default:
        return;
    }
    len = snprintf(req, sizeof(req),
                   "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\n\r\n%s",
                   method, path, token, blen, body);
    if (cr->acked[in->step] < 0 || in->step == OP_DELTA)
        cr->acked[in->step] = 0;
    in->busy = 1;
    D.inflight++;
    D.attempted++;
    if (conn_send(in->c, req, (size_t)len) != 0)
        step_done(in, -1, "");
}

static void start_cycle(struct dinst *in, int cycle)
{
    struct cycle_rec *cr = &in->cycles[cycle];
    int k;

    in->cycle = cycle;
    for (k = 0; k < 6; ++k)
        cr->acked[k] = -1;
    cr->deltas_acked = 0;
    cr->delta_inflight = -1;
    in->step = OP_SEND;
    issue(in);
}

static void write_journal(const char *path)
{
    FILE *f = fopen(path, "w");
    int i, c, k;

    if (f == NULL)
        die("cannot write %s", path);
    fprintf(f, "round\t%d\t%d\n", D.round, D.deltas);
    for (i = 0; i < D.n; ++i) {
        struct dinst *in = &D.insts[i];

        fprintf(f, "inst\t%d\t%s\n", in->idx, in->session);
        for (c = 0; c < CYCLES_MAX; ++c) {
            struct cycle_rec *cr = &in->cycles[c];
            if (cr->acked[OP_SEND] < 0)
                continue;
            fprintf(f, "cycle\t%d\t%d", in->idx, c);
            for (k = 0; k < 6; ++k)
                fprintf(f, "\t%d", cr->acked[k]);
            fprintf(f, "\t%d\t%d\t%s\t%s\t%s\t", cr->deltas_acked, cr->delta_inflight,
                    cr->interaction[0] ? cr->interaction : "-", cr->user_msg[0] ? cr->user_msg : "-",
                    cr->agent_msg[0] ? cr->agent_msg : "-");
            /*
             * How long before the kill each delta was acknowledged (ms; negative when its answer was read
             * after the SIGKILL left, i.e. it was sent at the very end), "na" when it was not.
             */
            for (k = 0; k < D.deltas; ++k) {
                if (k < cr->deltas_acked)
                    fprintf(f, "%s%.3f", k ? "," : "", (double)(int64_t)(D.killed_at - cr->delta_ack_ns[k]) / 1e6);
                else
                    fprintf(f, "%sna", k ? "," : "");
            }
            fputc('\n', f);
        }
    }
    fclose(f);
}

int mode_durability(int argc, char **argv)
{
    const char *url = opt_str(argc, argv, "url", NULL), *state = opt_str(argc, argv, "state", NULL);
    const char *journal = opt_str(argc, argv, "journal", NULL);
    long a = 0, b = 0, pid = opt_long(argc, argv, "pid", 0), kill_ms = opt_long(argc, argv, "kill-after-ms", 3000);
    long min_inflight = opt_long(argc, argv, "min-inflight", 8), inflight_at_kill = 0;
    inst_rec_t *recs;
    int nrecs, i;
    uint64_t t0, kill_at, killed_at = 0;
    conn_t *setup_conn = NULL;

    memset(&D, 0, sizeof(D));
    D.round = (int)opt_long(argc, argv, "round", 1);
    D.deltas = (int)opt_long(argc, argv, "deltas", 6);
    if (D.deltas < 1 || D.deltas > DELTAS_MAX)
        die("--deltas must be 1..%d", DELTAS_MAX);
    D.cycle_ns = (uint64_t)opt_long(argc, argv, "cycle-ms", 600) * 1000000ull;
    D.delta_gap_ns = (uint64_t)opt_long(argc, argv, "delta-gap-ms", 40) * 1000000ull;
    if (url == NULL || state == NULL || journal == NULL || pid <= 0 || opt_range(argc, argv, "inst", &a, &b) != 0 ||
        parse_hostport(url, &D.dst) != 0)
        die("durability needs --url --state --inst A:B --pid PID --journal FILE [--round R --kill-after-ms T]");
    nrecs = state_read(state, &recs);
    if (b > nrecs || b <= a)
        die("--inst is outside the state file");
    D.n = (int)(b - a);
    D.insts = calloc((size_t)D.n, sizeof(*D.insts));
    D.loop = loop_new();
    signal(SIGPIPE, SIG_IGN);
    /* One session per installation and round, created before the load. */
    for (i = 0; i < D.n; ++i) {
        struct dinst *in = &D.insts[i];
        char body[256], *resp = NULL;
        int status;

        in->idx = (int)a + i;
        in->rec = &recs[a + i];
        snprintf(body, sizeof(body), "{\"installation_id\":\"%s\",\"title\":\"durability %d\"}",
                 in->rec->installation_id, D.round);
        status = sync_call(D.loop, &setup_conn, &D.dst, NULL, "POST", "/v1/me/sessions", in->rec->user_token, body,
                           &resp);
        if (status != 200 || json_find_string(resp, "session_id", in->session, sizeof(in->session)) != 0)
            die("cannot create a session for installation %d: HTTP %d %s", in->idx, status, resp ? resp : "");
        free(resp);
        in->c = conn_new(D.loop, CONN_HTTP, &D.dst, NULL);
        if (in->c == NULL)
            die("cannot connect");
        in->c->user = in;
        in->c->on_response = on_response;
        in->c->on_close = on_closed;
        in->step = OP_IDLE;
        in->cycle = -1;
    }
    conn_free(setup_conn);
    t0 = now_ns();
    for (i = 0; i < D.n; ++i)
        D.insts[i].next_cycle_at = t0 + (uint64_t)i * D.cycle_ns / (uint64_t)D.n;
    kill_at = t0 + (uint64_t)kill_ms * 1000000ull;
    for (;;) {
        uint64_t now = now_ns();

        /* Kill at a moment with writes in flight: many if that happens soon, at least one otherwise. */
        if (!D.killed && now >= kill_at &&
            (D.inflight >= min_inflight || (D.inflight > 0 && now >= kill_at + 1000000000ull) ||
             now >= kill_at + 2000000000ull)) {
            kill((pid_t)pid, SIGKILL);
            D.killed = 1;
            killed_at = now;
            D.killed_at = now;
            inflight_at_kill = D.inflight;
            fprintf(stderr, "durability round %d: SIGKILL with %ld writes in flight, %ld acknowledged so far\n",
                    D.round, D.inflight, D.acked);
        }
        if (D.killed && (D.inflight == 0 || now > killed_at + 3000000000ull))
            break;
        if (!D.killed) {
            for (i = 0; i < D.n; ++i) {
                struct dinst *in = &D.insts[i];
                if (in->paused && !in->busy && !in->dead && now >= in->resume_at) {
                    in->paused = 0;
                    issue(in);
                    continue;
                }
                if (!in->busy && !in->dead && !in->paused && in->step == OP_IDLE && now >= in->next_cycle_at &&
                    in->cycle + 1 < CYCLES_MAX) {
                    in->next_cycle_at += D.cycle_ns;
                    start_cycle(in, in->cycle + 1);
                }
            }
        }
        loop_poll(D.loop, 200000);
    }
    write_journal(journal);
    printf("{\"round\":%d,\"installations\":%d,\"attempted\":%ld,\"acknowledged\":%ld,\"refused\":%ld,"
           "\"refused_429\":%ld,\"inflight_at_kill\":%ld,\"seconds\":%.2f}\n",
           D.round, D.n, D.attempted, D.acked, D.refused, D.refused_429, inflight_at_kill,
           (double)(killed_at - t0) / 1e9);
    if (D.refused > 0)
        fprintf(stderr, "durability round %d: %ld writes refused, the last HTTP %d %s\n", D.round, D.refused,
                D.last_refusal, D.last_refusal_body);
    return 0;
}

/* ---------------- verification ---------------- */

#define NOT_ACKED (-1e18)

struct vcycle {
    int inst, cycle, acked[6], deltas_acked, delta_inflight;
    char interaction[64], user_msg[64], agent_msg[64];
    double delta_ms[DELTAS_MAX]; /* acknowledged this long before the kill (may be < 0); NOT_ACKED: was not */
    int present_before[DELTAS_MAX], checked_once;
};

struct vjournal {
    int round, deltas;
    struct vcycle *cycles;
    int ncycles;
    char (*sessions)[64]; /* by installation index */
};

static struct {
    loop_t *loop;
    struct sockaddr_in dst;
    conn_t *c;
    inst_rec_t *recs;
    int nrecs;
    long checked, missing, wrong_text, duplicated, not_idempotent, retried, retry_failed, decisions_lost;
    long deltas_acked, deltas_lost_window, deltas_lost_outside, deltas_replayed_again;
    double window_ms, max_lost_ms;
    int first_problems;
} V;

static void problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void problem(const char *fmt, ...)
{
    va_list ap;

    if (V.first_problems++ >= 20)
        return;
    fprintf(stderr, "verify: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static int vcall(const char *method, const char *path, const char *token, const char *body, json_t **out)
{
    int status, tries;
    char *resp = NULL;

    for (tries = 0; tries < 40; ++tries) {
        status = sync_call(V.loop, &V.c, &V.dst, NULL, method, path, token, body, &resp);
        if (status != 429)
            break;
        free(resp);
        resp = NULL;
        usleep(150000);
    }
    *out = resp != NULL ? json_loads(resp, 0, NULL) : NULL;
    free(resp);
    return status;
}

/* The 14th field of a cycle line: ms before the kill at which each delta was acknowledged. */
static void parse_delta_ms(const char *line, struct vcycle *vc)
{
    const char *p = line;
    int tabs = 0, k;

    for (k = 0; k < DELTAS_MAX; ++k)
        vc->delta_ms[k] = NOT_ACKED;
    while (*p != '\0' && tabs < 14)
        if (*p++ == '\t')
            tabs++;
    for (k = 0; k < DELTAS_MAX && *p != '\0' && *p != '\n'; ++k) {
        char *end;
        double ms = strtod(p, &end);
        if (end == p) { /* "na" */
            ms = NOT_ACKED;
            end = strchr(p, ',') != NULL ? strchr(p, ',') : (char *)p + strlen(p);
        }
        vc->delta_ms[k] = ms;
        p = *end == ',' ? end + 1 : end;
    }
}

static int read_journal(const char *path, struct vjournal *j)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int cap = 0;

    if (f == NULL)
        return -1;
    memset(j, 0, sizeof(*j));
    j->sessions = calloc((size_t)V.nrecs, sizeof(*j->sessions));
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "round\t", 6) == 0) {
            sscanf(line + 6, "%d\t%d", &j->round, &j->deltas);
        } else if (strncmp(line, "inst\t", 5) == 0) {
            int idx;
            char sid[64];
            if (sscanf(line + 5, "%d\t%63s", &idx, sid) == 2 && idx >= 0 && idx < V.nrecs)
                snprintf(j->sessions[idx], 64, "%s", sid);
        } else if (strncmp(line, "cycle\t", 6) == 0) {
            struct vcycle *vc;
            if (j->ncycles == cap) {
                cap = cap ? cap * 2 : 1024;
                j->cycles = realloc(j->cycles, (size_t)cap * sizeof(*j->cycles));
            }
            vc = &j->cycles[j->ncycles];
            memset(vc, 0, sizeof(*vc));
            if (sscanf(line + 6, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%63s\t%63s\t%63s", &vc->inst, &vc->cycle,
                       &vc->acked[0], &vc->acked[1], &vc->acked[2], &vc->acked[3], &vc->acked[4], &vc->acked[5],
                       &vc->deltas_acked, &vc->delta_inflight, vc->interaction, vc->user_msg, vc->agent_msg) == 13) {
                if (strcmp(vc->interaction, "-") == 0)
                    vc->interaction[0] = '\0';
                if (strcmp(vc->user_msg, "-") == 0)
                    vc->user_msg[0] = '\0';
                if (strcmp(vc->agent_msg, "-") == 0)
                    vc->agent_msg[0] = '\0';
                parse_delta_ms(line, vc);
                j->ncycles++;
            }
        }
    }
    fclose(f);
    return 0;
}

/* The whole history of a session: an array of message objects (new reference). */
static json_t *history(const char *token, const char *session)
{
    json_t *all = json_array();
    char before[80] = "";

    for (;;) {
        char path[256];
        json_t *resp, *result, *messages;
        int status;

        snprintf(path, sizeof(path), "/v1/me/sessions/%s/messages?limit=100%s%s", session, before[0] ? "&before=" : "",
                 before);
        status = vcall("GET", path, token, NULL, &resp);
        result = json_object_get(resp, "result");
        messages = json_object_get(result, "messages");
        if (status != 200 || !json_is_array(messages)) {
            problem("history of %s: HTTP %d", session, status);
            json_decref(resp);
            break;
        }
        json_array_extend(all, messages);
        if (!json_is_true(json_object_get(result, "has_more")) ||
            !json_is_string(json_object_get(result, "next_cursor"))) {
            json_decref(resp);
            break;
        }
        snprintf(before, sizeof(before), "%s", json_string_value(json_object_get(result, "next_cursor")));
        json_decref(resp);
    }
    return all;
}

static json_t *find_message(json_t *msgs, const char *id)
{
    size_t i;
    json_t *m;

    json_array_foreach(msgs, i, m) {
        if (strcmp(json_string_value(json_object_get(m, "message_id")) ?: "", id) == 0)
            return m;
    }
    return NULL;
}

static int count_messages(json_t *msgs, const char *field, const char *value, const char *role)
{
    size_t i;
    json_t *m;
    int n = 0;

    json_array_foreach(msgs, i, m) {
        if (strcmp(json_string_value(json_object_get(m, "role")) ?: "", role) == 0 &&
            strcmp(json_string_value(json_object_get(m, field)) ?: "", value) == 0)
            n++;
    }
    return n;
}

/* The indices of this cycle's deltas in text, in order; -1 when the text holds anything else. */
static int parse_deltas(const char *text, const struct vjournal *j, const struct vcycle *vc, int *idx, int max)
{
    char suffix[64];
    size_t slen;
    const char *p = text;
    int n = 0;

    if (strcmp(text, " ") == 0)
        return 0; /* the placeholder */
    snprintf(suffix, sizeof(suffix), ":%d.%d.%d]", j->round, vc->inst, vc->cycle);
    slen = strlen(suffix);
    while (*p != '\0') {
        char *end;
        long k;

        if (*p != '[' || n >= max)
            return -1;
        k = strtol(p + 1, &end, 10);
        if (end == p + 1 || strncmp(end, suffix, slen) != 0)
            return -1;
        idx[n++] = (int)k;
        p = end + slen;
    }
    return n;
}

static void streamed(char *out, size_t n, const struct vjournal *j, const struct vcycle *vc, int upto)
{
    int k;
    size_t used = 0;

    out[0] = '\0';
    for (k = 0; k < upto; ++k) {
        char d[128];
        delta_text(d, sizeof(d), j->round, vc->inst, vc->cycle, k);
        used += (size_t)snprintf(out + used, n - used, "%s", d);
    }
}

/* The checks that hold whatever was in flight: acknowledged writes are present, exact, and single. */
/* newest: the journal of the crash just survived (its in-window losses are counted; older ones were, once). */
static void check_cycle(const struct vjournal *j, struct vcycle *vc, json_t *msgs, int newest)
{
    char expect[4096];
    const char *text;
    json_t *m;

    if (vc->acked[OP_SEND] == 1) {
        V.checked++;
        user_text(expect, sizeof(expect), j->round, vc->inst, vc->cycle);
        m = find_message(msgs, vc->user_msg);
        if (m == NULL) {
            V.missing++;
            problem("round %d inst %d cycle %d: acknowledged user message %s is missing", j->round, vc->inst,
                    vc->cycle, vc->user_msg);
        } else if (strcmp(json_string_value(json_object_get(m, "text")) ?: "", expect) != 0) {
            V.wrong_text++;
            problem("user message %s has text '%s', expected '%s'", vc->user_msg,
                    json_string_value(json_object_get(m, "text")), expect);
        }
        if (count_messages(msgs, "text", expect, "user") > 1) {
            V.duplicated++;
            problem("user text '%s' appears more than once", expect);
        }
    }
    if (vc->interaction[0] != '\0' && count_messages(msgs, "interaction_id", vc->interaction, "agent") > 1) {
        V.duplicated++;
        problem("interaction %s has more than one agent message", vc->interaction);
    }
    if (vc->acked[OP_OPEN] != 1)
        return;
    V.checked++;
    m = find_message(msgs, vc->agent_msg);
    if (m == NULL) {
        V.missing++;
        problem("round %d inst %d cycle %d: acknowledged agent message %s is missing", j->round, vc->inst, vc->cycle,
                vc->agent_msg);
        return;
    }
    text = json_string_value(json_object_get(m, "text")) ?: "";
    if (end_has_text(vc->cycle))
        end_text(expect, sizeof(expect), j->round, vc->inst, vc->cycle);
    else
        streamed(expect, sizeof(expect), j, vc, j->deltas);
    if (vc->acked[OP_END] == 1) {
        V.checked++;
        if (strcmp(json_string_value(json_object_get(m, "state")) ?: "", "final") != 0 || strcmp(text, expect) != 0) {
            V.wrong_text++;
            problem("acknowledged end of %s: state %s text '%s', expected final '%s'", vc->agent_msg,
                    json_string_value(json_object_get(m, "state")), text, expect);
        }
        return;
    }
    if (strcmp(json_string_value(json_object_get(m, "state")) ?: "", "final") == 0) {
        /* The end was in flight and landed (or was retried): it must be the right final text. */
        if (vc->acked[OP_END] < 0 || strcmp(text, expect) != 0) {
            V.wrong_text++;
            problem("message %s is final with '%s' though its end was %s", vc->agent_msg, text,
                    vc->acked[OP_END] < 0 ? "never sent" : "unanswered");
        }
        return;
    }
    /*
     * Still streaming. docs/api.md: a delta is answered once its batch has
     * committed, so no acknowledged delta may be missing. --delta-window-ms
     * (default 0) counts apart the losses of deltas answered in the last
     * milliseconds before the kill, for a relay that answers before it
     * writes. The text must be this cycle's deltas, each at most once, in
     * order, never one that was not sent; every acknowledged delta that is
     * missing is counted, inside or outside that window.
     */
    {
        int idx[64], n = parse_deltas(text, j, vc, idx, 64), k, present[DELTAS_MAX] = {0};

        if (n < 0) {
            V.wrong_text++;
            problem("streaming message %s has '%s', which is not this cycle's deltas", vc->agent_msg, text);
            return;
        }
        for (k = 0; k < n; ++k) {
            if (idx[k] < 0 || idx[k] >= j->deltas || present[idx[k]] || (k > 0 && idx[k] < idx[k - 1])) {
                if (idx[k] >= 0 && idx[k] < j->deltas && present[idx[k]])
                    V.duplicated++;
                else
                    V.wrong_text++;
                problem("streaming message %s has '%s': a delta repeated or out of order", vc->agent_msg, text);
                return;
            }
            present[idx[k]] = 1;
            if (idx[k] >= vc->deltas_acked && idx[k] != vc->delta_inflight) {
                V.wrong_text++;
                problem("streaming message %s holds delta %d, which was never sent", vc->agent_msg, idx[k]);
                return;
            }
        }
        if (vc->checked_once)
            return;
        vc->checked_once = 1;
        memcpy(vc->present_before, present, sizeof(present));
        for (k = 0; k < vc->deltas_acked; ++k) {
            if (newest)
                V.deltas_acked++;
            if (present[k])
                continue;
            if (vc->delta_ms[k] != NOT_ACKED && vc->delta_ms[k] <= V.window_ms) {
                if (!newest)
                    continue;
                V.deltas_lost_window++;
            } else {
                V.deltas_lost_outside++;
                problem("delta %d of %s, acknowledged %.1f ms before the kill, is lost", k, vc->agent_msg,
                        vc->delta_ms[k]);
            }
            if (vc->delta_ms[k] > V.max_lost_ms)
                V.max_lost_ms = vc->delta_ms[k];
        }
    }
}

/* Replays: acknowledged writes must come back idempotent; in-flight ones must apply (once). */
static void retry_cycle(const struct vjournal *j, struct vcycle *vc, int do_inflight)
{
    const inst_rec_t *r = &V.recs[vc->inst];
    const char *session = j->sessions[vc->inst];
    char body[1024], path[256];
    json_t *resp;
    int status;

    if (vc->interaction[0] == '\0')
        return;
    if (vc->acked[OP_OPEN] == 1 || (do_inflight && vc->acked[OP_OPEN] == 0)) {
        body_open(body, sizeof(body), session, vc->interaction, j->round, vc->cycle);
        status = vcall("POST", "/v1/bridge/sendMessage", r->bridge_token, body, &resp);
        V.retried++;
        if (status != 200) {
            V.retry_failed++;
            problem("replayed sendMessage of %s: HTTP %d", vc->interaction, status);
        } else if (vc->acked[OP_OPEN] == 1) {
            const char *id = json_string_value(json_object_get(json_object_get(resp, "result"), "message_id"));
            if (!json_is_true(json_object_get(json_object_get(resp, "result"), "idempotent")) || id == NULL ||
                strcmp(id, vc->agent_msg) != 0) {
                V.not_idempotent++;
                problem("replayed acknowledged sendMessage of %s did not return the stored result", vc->interaction);
            }
        } else {
            const char *id = json_string_value(json_object_get(json_object_get(resp, "result"), "message_id"));
            snprintf(vc->agent_msg, sizeof(vc->agent_msg), "%s", id ? id : "");
            vc->acked[OP_OPEN] = 1; /* now it is */
            vc->acked[OP_DELTA] = -1;
            vc->delta_inflight = -1;
        }
        json_decref(resp);
    }
    if (vc->acked[OP_OPEN] != 1)
        return;
    if (vc->deltas_acked > 0) {
        body_delta(body, sizeof(body), vc->agent_msg, j->round, vc->inst, vc->cycle, vc->deltas_acked - 1);
        status = vcall("POST", "/v1/bridge/sendMessageDelta", r->bridge_token, body, &resp);
        V.retried++;
        if (status == 200 && !json_is_true(json_object_get(json_object_get(resp, "result"), "idempotent")) &&
            vc->acked[OP_END] != 1 && !vc->present_before[vc->deltas_acked - 1]) {
            /* docs/api.md: a delta lost in the crash lost its idempotency record too; it is applied again. */
            V.deltas_replayed_again++;
        } else if (status != 200 || !json_is_true(json_object_get(json_object_get(resp, "result"), "idempotent"))) {
            V.not_idempotent++;
            problem("replayed acknowledged delta of %s: HTTP %d, not idempotent", vc->agent_msg, status);
        }
        json_decref(resp);
    }
    if (do_inflight && vc->delta_inflight >= 0 && vc->acked[OP_END] != 1) {
        body_delta(body, sizeof(body), vc->agent_msg, j->round, vc->inst, vc->cycle, vc->delta_inflight);
        status = vcall("POST", "/v1/bridge/sendMessageDelta", r->bridge_token, body, &resp);
        V.retried++;
        if (status != 200) {
            V.retry_failed++;
            problem("retried in-flight delta of %s: HTTP %d", vc->agent_msg, status);
        } else {
            vc->deltas_acked = vc->delta_inflight + 1;
        }
        vc->delta_inflight = -1;
        json_decref(resp);
    }
    if (vc->acked[OP_END] == 1) {
        body_end(body, sizeof(body), vc->agent_msg, j->round, vc->inst, vc->cycle);
        status = vcall("POST", "/v1/bridge/sendMessageEnd", r->bridge_token, body, &resp);
        V.retried++;
        if (status != 200 || !json_is_true(json_object_get(json_object_get(resp, "result"), "idempotent"))) {
            V.not_idempotent++;
            problem("replayed acknowledged end of %s: HTTP %d, not idempotent", vc->agent_msg, status);
        }
        json_decref(resp);
    }
    if (vc->acked[OP_APPR] == 1) {
        char id[96];
        const char *stored;

        body_approval(body, sizeof(body), session, vc->interaction, j->round, vc->inst, vc->cycle);
        status = vcall("POST", "/v1/bridge/requestApproval", r->bridge_token, body, &resp);
        V.retried++;
        if (status != 200 || !json_is_true(json_object_get(json_object_get(resp, "result"), "idempotent"))) {
            V.not_idempotent++;
            problem("replayed acknowledged requestApproval of %s: HTTP %d, not idempotent", vc->interaction, status);
        }
        json_decref(resp);
        /* A decision: the acknowledged one must stand against a contrary one; otherwise any decision lands. */
        approval_id(id, sizeof(id), j->round, vc->inst, vc->cycle);
        snprintf(path, sizeof(path), "/v1/me/approvals/%s", id);
        snprintf(body, sizeof(body), "{\"decision\":\"%s\"}",
                 vc->acked[OP_DECIDE] == 1 ? (strcmp(decision_of(vc->cycle), "approve") == 0 ? "deny" : "approve")
                                           : decision_of(vc->cycle));
        status = vcall("POST", path, r->user_token, body, &resp);
        V.checked++;
        stored = json_string_value(json_object_get(json_object_get(resp, "result"), "decision"));
        if (status != 200) {
            V.missing++;
            problem("acknowledged approval %s: decision answered HTTP %d", id, status);
        } else if (vc->acked[OP_DECIDE] == 1 &&
                   (stored == NULL || strcmp(stored, decision_of(vc->cycle)) != 0 ||
                    !json_is_true(json_object_get(json_object_get(resp, "result"), "idempotent")))) {
            V.decisions_lost++;
            problem("acknowledged decision on %s was '%s', now '%s'", id, decision_of(vc->cycle), stored ? stored : "?");
        } else if (vc->acked[OP_DECIDE] != 1) {
            vc->acked[OP_DECIDE] = 1;
        }
        json_decref(resp);
    }
}

static int by_cycle(const void *a, const void *b)
{
    const struct vcycle *x = a, *y = b;

    if (x->cycle != y->cycle)
        return x->cycle - y->cycle;
    return x->inst - y->inst;
}

static void check_journal(struct vjournal *j, int newest)
{
    int i, c;

    for (i = 0; i < V.nrecs; ++i) {
        json_t *msgs;
        if (j->sessions[i][0] == '\0')
            continue;
        msgs = history(V.recs[i].user_token, j->sessions[i]);
        for (c = 0; c < j->ncycles; ++c) {
            if (j->cycles[c].inst == i)
                check_cycle(j, &j->cycles[c], msgs, newest);
        }
        json_decref(msgs);
    }
}

/*
 * Every journal given is checked, replayed and checked again; writes that
 * were in flight are retried only for the last one (the crash just
 * survived), earlier journals show that what was acknowledged before survives
 * later crashes too.
 */
int mode_verify(int argc, char **argv)
{
    const char *url = opt_str(argc, argv, "url", NULL), *state = opt_str(argc, argv, "state", NULL);
    struct vjournal *journals = NULL;
    int njournals = 0, i, k, c;

    memset(&V, 0, sizeof(V));
    V.window_ms = opt_double(argc, argv, "delta-window-ms", 0);
    if (url == NULL || state == NULL || parse_hostport(url, &V.dst) != 0)
        die("verify needs --url --state --journal FILE [--journal FILE...] [--delta-window-ms 0]");
    V.nrecs = state_read(state, &V.recs);
    V.loop = loop_new();
    signal(SIGPIPE, SIG_IGN);
    for (i = 0; i + 1 < argc; ++i) {
        if (strcmp(argv[i], "--journal") == 0) {
            journals = realloc(journals, (size_t)(njournals + 1) * sizeof(*journals));
            if (read_journal(argv[i + 1], &journals[njournals]) != 0)
                die("cannot read %s", argv[i + 1]);
            njournals++;
        }
    }
    for (k = 0; k < njournals; ++k) {
        struct vjournal *j = &journals[k];

        check_journal(j, k == njournals - 1);
        /* Interleaved across installations, so that no one rate bucket runs dry. */
        qsort(j->cycles, (size_t)j->ncycles, sizeof(*j->cycles), by_cycle);
        for (c = 0; c < j->ncycles; ++c)
            retry_cycle(j, &j->cycles[c], k == njournals - 1);
        check_journal(j, k == njournals - 1);
    }
    printf("{\"journals\":%d,\"checked\":%ld,\"missing\":%ld,\"wrong_text\":%ld,\"duplicated\":%ld,"
           "\"not_idempotent\":%ld,\"decisions_lost\":%ld,\"retried\":%ld,\"retry_failed\":%ld,"
           "\"open_deltas_acked\":%ld,\"deltas_lost_in_window\":%ld,\"deltas_lost_outside_window\":%ld,"
           "\"deltas_replayed_again\":%ld,\"window_ms\":%.0f,\"max_lost_ms_before_kill\":%.1f}\n",
           njournals, V.checked, V.missing, V.wrong_text, V.duplicated, V.not_idempotent, V.decisions_lost, V.retried,
           V.retry_failed, V.deltas_acked, V.deltas_lost_window, V.deltas_lost_outside, V.deltas_replayed_again,
           V.window_ms, V.max_lost_ms);
    return V.missing + V.wrong_text + V.duplicated + V.not_idempotent + V.decisions_lost + V.retry_failed +
                       V.deltas_lost_outside >
                   0
               ? 3
               : 0;
}
