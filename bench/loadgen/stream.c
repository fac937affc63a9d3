/*
 * `stream`: both sides of the streaming path at once. N publishers post
 * deltas at a fixed total rate (open loop: the schedule does not wait for the
 * server), M Server-Sent Events subscribers receive them, and each delta
 * carries its scheduled send time, so the latency measured on the stream is
 * end to end and includes any time a delta waited because the server was
 * slow (no coordinated omission).
 *
 * The delta text is "@@<scheduled ns>:<installation>:<seq>@" padded with
 * 'x' to --delta-bytes; relayd publishes it inside its message_delta JSON,
 * nchan publishes the body as is. The same bytes go to both.
 *
 * Each installation has at most one delta in flight (a bridge serialises
 * the deltas of a message); the publishers share a pool of keep-alive
 * connections. Against relayd, installation i posts with its bridge token
 * into its open message and its user i subscribes to /v1/me/stream; against
 * nchan, installation i publishes to /pub/i and a subscriber listens on
 * /sub/i.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "hist.h"

#define RING 1024

enum target { T_RELAYD, T_NCHAN };

struct inst {
    int idx;
    const inst_rec_t *rec;
    uint64_t ring[RING]; /* scheduled times of deltas waiting to be sent */
    uint32_t head, tail;
    int busy, in_wait;
    uint64_t seq, last_recv;
};

static struct {
    enum target target;
    loop_t *loop;
    struct sockaddr_in dst;
    struct inst *insts;
    int n;
    conn_t **pubs;
    int npubs;
    conn_t **free_pubs;
    int nfree;
    int *fifo;
    int fhead, ftail, fcap;
    conn_t **subs;
    int nsubs, subs_open, subs_failed;
    int delta_bytes;
    char nonce[24];
    uint64_t t_meas, t_end;
    /* counters */
    uint64_t scheduled, scheduled_win, acked, acked_win, delivered, delivered_win;
    /* Deltas read off the streams while the window ran, whenever they were scheduled: the server's throughput
     * when it is behind its schedule (delivered_win then counts only the deltas scheduled in the window). */
    uint64_t served_win;
    uint64_t non2xx, rate_limited, errors, dropped, unsent, dups, max_backlog, sub_closed;
    /* refusals (overload): 503s, refusals that named a Retry-After, refusals of deltas scheduled in the window */
    uint64_t status_503, retry_after, refused_win;
    int last_bad_status;
    char last_bad_body[200];
    hist_t e2e, ack, shed, svc;
} R;

static uint64_t ring_len(const struct inst *in)
{
    return in->tail - in->head;
}

static void fifo_push(int idx)
{
    R.fifo[R.ftail] = idx;
    R.ftail = (R.ftail + 1) % R.fcap;
}

static int fifo_pop(void)
{
    int idx;

    if (R.fhead == R.ftail)
        return -1;
    idx = R.fifo[R.fhead];
    R.fhead = (R.fhead + 1) % R.fcap;
    return idx;
}

static void send_next(struct inst *in, conn_t *c)
{
    static char req[4096 + 65536], delta[65536 + 64];
    uint64_t t = in->ring[in->head % RING];
    int dlen, blen, hlen;

    in->head++;
    in->seq++;
    dlen =
        snprintf(delta, sizeof(delta), "@@%llu:%d:%llu@", (unsigned long long)t, in->idx, (unsigned long long)in->seq);
    while (dlen < R.delta_bytes)
        delta[dlen++] = 'x';
    delta[dlen] = '\0';
    if (R.target == T_RELAYD) {
        char body[65536 + 512];

        blen = snprintf(body, sizeof(body), "{\"message_id\":\"%s\",\"delta\":\"%s\",\"idempotency_key\":\"%s-%llu\"}",
                        in->rec->message_id, delta, R.nonce, (unsigned long long)in->seq);
        hlen = snprintf(req, sizeof(req),
                        "POST /v1/bridge/sendMessageDelta HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        "Authorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
                        in->rec->bridge_token, blen);
        memcpy(req + hlen, body, (size_t)blen);
    } else {
        blen = dlen;
        hlen = snprintf(req, sizeof(req),
                        "POST /pub/%d HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
                        "Content-Length: %d\r\n\r\n",
                        in->idx, blen);
        memcpy(req + hlen, delta, (size_t)blen);
    }
    in->busy = 1;
    c->user = in;
    c->t0 = t;
    conn_send(c, req, (size_t)(hlen + blen));
}

static void pump(void)
{
    while (R.nfree > 0) {
        int idx = fifo_pop();
        struct inst *in;

        if (idx < 0)
            return;
        in = &R.insts[idx];
        in->in_wait = 0;
        if (in->busy || ring_len(in) == 0)
            continue;
        send_next(in, R.free_pubs[--R.nfree]);
    }
}

static void wait_turn(struct inst *in)
{
    if (!in->busy && !in->in_wait && ring_len(in) > 0) {
        in->in_wait = 1;
        fifo_push(in->idx);
    }
}

static void on_pub_close(conn_t *c, int err);

static conn_t *new_pub(void)
{
    /*
     * Publishers come from 64 loopback addresses of their own, so that one connection per
     * installation (--conns N, a bridge each) stays under relayd's per-address cap.
     */
    static unsigned opened;
    struct in_addr src = addr_plus("127.5.0.1", opened++ % 64);
    conn_t *c = conn_new(R.loop, CONN_HTTP, &R.dst, &src);

    if (c == NULL)
        die("cannot open a publisher connection");
    c->on_close = on_pub_close;
    return c;
}

static void on_pub_response(conn_t *c, int status, const char *body, size_t len)
{
    struct inst *in = c->user;
    uint64_t now = now_ns();

    if (status >= 200 && status < 300) {
        /* How long relayd itself took to answer (from the write): its own queue, not the schedule's. */
        if (c->t0 >= R.t_meas && c->t0 < R.t_end)
            hist_record(&R.svc, now - c->t_sent);
        R.acked++;
        if (c->t0 >= R.t_meas && c->t0 < R.t_end) {
            R.acked_win++;
            hist_record(&R.ack, now - c->t0);
        }
    } else {
        /* A refusal's own latency, from when it was written: shedding must be quick, not a queue. */
        hist_record(&R.shed, now - c->t_sent);
        if (c->retry_after)
            R.retry_after++;
        if (c->t0 >= R.t_meas && c->t0 < R.t_end)
            R.refused_win++;
        if (status == 503)
            R.status_503++;
        if (status == 429)
            R.rate_limited++;
        else
            R.non2xx++;
        R.last_bad_status = status;
        snprintf(R.last_bad_body, sizeof(R.last_bad_body), "%.*s", (int)(len < 150 ? len : 150), body);
    }
    c->user = NULL;
    if (in != NULL) {
        in->busy = 0;
        wait_turn(in);
    }
    R.free_pubs[R.nfree++] = c;
    pump();
}

static void on_pub_close(conn_t *c, int err)
{
    struct inst *in = c->user;
    int i;

    /*
     * A connection the server closes while it carries nothing is its keep-alive timeout (relayd's
     * --request-timeout, 10 s; the bench's nginx waits 600 s): a pool larger than the load leaves
     * some idle that long. Only a close with a delta in flight is an error.
     */
    if (in != NULL)
        R.errors++;
    if (getenv("RELAYBENCH_DEBUG") != NULL)
        fprintf(stderr, "publisher connection closed: %s, %s\n", err != 0 ? strerror(err) : "by the server",
                in != NULL ? "a delta in flight" : "idle");
    if (in != NULL) {
        in->busy = 0;
        wait_turn(in);
    }
    for (i = 0; i < R.npubs; ++i) {
        if (R.pubs[i] == c) {
            /* The old connection is leaked on purpose: it may still be referenced by this loop turn. */
            R.pubs[i] = new_pub();
            R.pubs[i]->on_response = on_pub_response;
            R.free_pubs[R.nfree++] = R.pubs[i];
            break;
        }
    }
    for (i = 0; i < R.nfree; ++i) {
        if (R.free_pubs[i] == c) {
            R.free_pubs[i] = R.free_pubs[--R.nfree];
            break;
        }
    }
    pump();
}

static void on_sub_open(conn_t *c, int status)
{
    if (status == 200) {
        R.subs_open++;
    } else {
        R.subs_failed++;
        fprintf(stderr, "stream: subscriber %ld got HTTP %d\n", c->idx, status);
        conn_close(c);
    }
}

static void on_sub_close(conn_t *c, int err)
{
    R.sub_closed++;
}

static void on_sub_data(conn_t *c, const char *data, size_t len, uint64_t at)
{
    const char *m = memmem(data, len, "@@", 2);
    char *end;
    unsigned long long t, seq;
    long idx;

    if (m == NULL)
        return;
    t = strtoull(m + 2, &end, 10);
    if (*end != ':')
        return;
    idx = strtol(end + 1, &end, 10);
    if (*end != ':' || idx < 0 || idx >= R.n)
        return;
    seq = strtoull(end + 1, &end, 10);
    R.delivered++;
    if (at >= R.t_meas && at < R.t_end)
        R.served_win++;
    if (t >= R.t_meas && t < R.t_end) {
        R.delivered_win++;
        hist_record(&R.e2e, at > t ? at - t : 0);
    }
    if (seq <= R.insts[idx].last_recv)
        R.dups++;
    else
        R.insts[idx].last_recv = seq;
}

static double rusage_seconds(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/*
 * --perf-ctl FIFO: the control FIFO of a `perf stat` or `perf record` started with `-D -1 --control
 * fifo:FIFO` (bench/syscalls.sh). perf counts from "enable", written as the measured window opens, to
 * "disable", written as it closes, so that its counts and this run's figures cover the same window.
 */
static int perf_ctl_open(const char *path)
{
    int fd;

    if (path == NULL)
        return -1;
    /* perf holds its FIFO open read-write: a writer that finds no reader is a perf that is not there. */
    fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        die("--perf-ctl %s: %s (start perf with --control fifo:%s first)", path, strerror(errno), path);
    return fd;
}

static void perf_ctl_send(int fd, const char *command)
{
    size_t len = strlen(command);

    if (fd >= 0 && write(fd, command, len) != (ssize_t)len)
        fprintf(stderr, "stream: cannot tell perf \"%.*s\": %s\n", (int)len - 1, command, strerror(errno));
}

static double servers_cpu(const char *pids)
{
    char copy[256], *save = NULL, *tok;
    double total = 0;

    if (pids == NULL)
        return -1;
    snprintf(copy, sizeof(copy), "%s", pids);
    for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        double s = proc_cpu_seconds(atoi(tok));
        if (s >= 0)
            total += s;
    }
    return total;
}

int mode_stream(int argc, char **argv)
{
    const char *url = opt_str(argc, argv, "url", NULL), *state = opt_str(argc, argv, "state", NULL);
    const char *target = opt_str(argc, argv, "target", "relayd"), *label = opt_str(argc, argv, "label", "");
    const char *server_pids = opt_str(argc, argv, "server-pids", NULL), *out_path = opt_str(argc, argv, "out", NULL);
    const char *sub_url = opt_str(argc, argv, "sub-url", NULL);
    int perf_ctl = perf_ctl_open(opt_str(argc, argv, "perf-ctl", NULL));
    struct sockaddr_in sub_dst;
    double rate = opt_double(argc, argv, "rate", 5000), warmup = opt_double(argc, argv, "warmup", 2);
    double duration = opt_double(argc, argv, "duration", 10);
    long ninst = opt_long(argc, argv, "installations", 100), nconns = opt_long(argc, argv, "conns", 64);
    inst_rec_t *recs;
    int nrecs, i;
    uint64_t t_start, next_t, k = 0, now, deadline, last_progress, last_count;
    double gen_cpu0 = 0, gen_cpu1 = 0, srv_cpu0 = -1, srv_cpu1 = -1;
    int sampled0 = 0, sampled1 = 0;
    FILE *out;

    memset(&R, 0, sizeof(R));
    R.delta_bytes = (int)opt_long(argc, argv, "delta-bytes", 64);
    if (url == NULL || state == NULL || parse_hostport(url, &R.dst) != 0)
        die("stream needs --url HOST:PORT --state FILE [--target relayd|nchan] --rate R --installations N");
    /* --sub-url: the streams are read from another relay node than the one the deltas are posted to. */
    if (sub_url != NULL ? parse_hostport(sub_url, &sub_dst) != 0 : (sub_dst = R.dst, 0))
        die("--sub-url must be HOST:PORT");
    if (!(rate > 0) || duration <= 0 || warmup < 0)
        die("--rate and --duration must be positive");
    R.target = strcmp(target, "nchan") == 0 ? T_NCHAN : T_RELAYD;
    nrecs = state_read(state, &recs);
    if (nrecs < ninst)
        die("the state file has %d installations, %ld asked", nrecs, ninst);
    R.n = (int)ninst;
    R.insts = calloc((size_t)R.n, sizeof(*R.insts));
    R.fcap = R.n + 1;
    R.fifo = calloc((size_t)R.fcap, sizeof(int));
    if (R.insts == NULL || R.fifo == NULL)
        die("out of memory");
    for (i = 0; i < R.n; ++i) {
        R.insts[i].idx = i;
        R.insts[i].rec = &recs[i];
        if (R.target == T_RELAYD && recs[i].message_id[0] == '\0')
            die("installation %d has no open message (setup --streaming)", i);
    }
    snprintf(R.nonce, sizeof(R.nonce), "%llx%x", (unsigned long long)time(NULL), (unsigned)getpid());
    hist_init(&R.e2e);
    hist_init(&R.ack);
    hist_init(&R.shed);
    hist_init(&R.svc);
    R.loop = loop_new();

    /* Subscribers first, and wait until every stream is open. */
    R.nsubs = R.n;
    R.subs = calloc((size_t)R.nsubs, sizeof(conn_t *));
    for (i = 0; i < R.nsubs; ++i) {
        char req[2048];
        int len;
        struct in_addr src = addr_plus("127.3.0.1", (unsigned)(i % 64));

        R.subs[i] = conn_new(R.loop, CONN_SSE, &sub_dst, &src);
        if (R.subs[i] == NULL)
            die("cannot open subscriber %d", i);
        R.subs[i]->idx = i;
        R.subs[i]->on_open = on_sub_open;
        R.subs[i]->on_data = on_sub_data;
        R.subs[i]->on_close = on_sub_close;
        if (R.target == T_RELAYD)
            len = snprintf(req, sizeof(req),
                           "GET /v1/me/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
                           "Authorization: Bearer %s\r\n\r\n",
                           recs[i].user_token);
        else
            len = snprintf(req, sizeof(req),
                           "GET /sub/%d HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n", i);
        conn_send(R.subs[i], req, (size_t)len);
    }
    deadline = now_ns() + 15ull * 1000000000ull;
    while (R.subs_open + R.subs_failed < R.nsubs && now_ns() < deadline)
        loop_poll(R.loop, 10000000);
    if (R.subs_open < R.nsubs)
        die("only %d of %d subscribers opened", R.subs_open, R.nsubs);

    R.npubs = (int)nconns;
    R.pubs = calloc((size_t)R.npubs, sizeof(conn_t *));
    R.free_pubs = calloc((size_t)R.npubs + 1, sizeof(conn_t *));
    for (i = 0; i < R.npubs; ++i) {
        R.pubs[i] = new_pub();
        R.pubs[i]->on_response = on_pub_response;
        R.free_pubs[R.nfree++] = R.pubs[i];
    }
    /* Let connects and stream registrations settle before the clock starts. */
    deadline = now_ns() + 300000000ull;
    while (now_ns() < deadline)
        loop_poll(R.loop, 10000000);

    t_start = now_ns() + 1000000;
    R.t_meas = t_start + (uint64_t)(warmup * 1e9);
    R.t_end = R.t_meas + (uint64_t)(duration * 1e9);
    next_t = t_start;
    for (;;) {
        now = now_ns();
        if (!sampled0 && now >= R.t_meas) {
            sampled0 = 1;
            gen_cpu0 = rusage_seconds();
            srv_cpu0 = servers_cpu(server_pids);
            perf_ctl_send(perf_ctl, "enable\n");
        }
        if (now >= R.t_end)
            break;
        while (next_t <= now && next_t < R.t_end) {
            struct inst *in = &R.insts[k % (uint64_t)R.n];

            if (ring_len(in) >= RING) {
                R.dropped++;
            } else {
                in->ring[in->tail % RING] = next_t;
                in->tail++;
                if (ring_len(in) > R.max_backlog)
                    R.max_backlog = ring_len(in);
            }
            R.scheduled++;
            if (next_t >= R.t_meas)
                R.scheduled_win++;
            wait_turn(in);
            ++k;
            next_t = t_start + (uint64_t)((double)k * 1e9 / rate);
        }
        pump();
        now = now_ns();
        loop_poll(R.loop, next_t > now ? (int64_t)(next_t - now) : 0);
    }
    perf_ctl_send(perf_ctl, "disable\n");
    gen_cpu1 = rusage_seconds();
    srv_cpu1 = servers_cpu(server_pids);
    sampled1 = 1;
    (void)sampled1;

    /* Stop the schedule; what never left the generator is counted, then let the rest arrive. */
    for (i = 0; i < R.n; ++i) {
        R.unsent += ring_len(&R.insts[i]);
        R.insts[i].head = R.insts[i].tail;
    }
    deadline = now_ns() + 10ull * 1000000000ull;
    last_progress = now_ns();
    last_count = R.delivered;
    for (;;) {
        int busy = 0;

        now = now_ns();
        for (i = 0; i < R.n && !busy; ++i)
            busy = R.insts[i].busy;
        if (!busy && R.delivered >= R.acked)
            break;
        if (now > deadline || now - last_progress > 3000000000ull)
            break;
        loop_poll(R.loop, 10000000);
        if (R.delivered != last_count) {
            last_count = R.delivered;
            last_progress = now_ns();
        }
    }

    out = out_path != NULL ? fopen(out_path, "a") : stdout;
    if (out == NULL)
        die("cannot append to %s", out_path);
    fprintf(out,
            "{\"label\":\"%s\",\"target\":\"%s\",\"rate\":%.0f,\"installations\":%d,\"subscribers\":%d,\"conns\":%d,"
            "\"delta_bytes\":%d,\"window_s\":%.3f,\"scheduled\":%llu,\"acked\":%llu,\"delivered\":%llu,"
            "\"ack_rate\":%.1f,\"delivered_rate\":%.1f,\"non2xx\":%llu,\"rate_limited\":%llu,\"errors\":%llu,"
            "\"dropped\":%llu,\"unsent\":%llu,\"lost\":%lld,\"dups\":%llu,\"max_backlog\":%llu,\"sub_closed\":%llu,"
            "\"gen_cpu\":%.3f,\"server_cpu\":%.3f,\"last_bad_status\":%d,\"status_503\":%llu,\"retry_after\":%llu,"
            "\"refused_win\":%llu,\"refused_rate\":%.1f,\"served_rate\":%.1f,\"two_nodes\":%s,",
            label, target, rate, R.n, R.nsubs, R.npubs, R.delta_bytes, duration, (unsigned long long)R.scheduled_win,
            (unsigned long long)R.acked_win, (unsigned long long)R.delivered_win, R.acked_win / duration,
            R.delivered_win / duration, (unsigned long long)R.non2xx, (unsigned long long)R.rate_limited,
            (unsigned long long)R.errors, (unsigned long long)R.dropped, (unsigned long long)R.unsent,
            (long long)R.acked - (long long)R.delivered, (unsigned long long)R.dups, (unsigned long long)R.max_backlog,
            (unsigned long long)R.sub_closed, (gen_cpu1 - gen_cpu0) / duration,
            srv_cpu0 >= 0 && srv_cpu1 >= 0 ? (srv_cpu1 - srv_cpu0) / duration : -1.0, R.last_bad_status,
            (unsigned long long)R.status_503, (unsigned long long)R.retry_after, (unsigned long long)R.refused_win,
            R.refused_win / duration, R.served_win / duration, sub_url != NULL ? "true" : "false");
    hist_json(&R.e2e, "e2e_", out);
    fputc(',', out);
    hist_json(&R.ack, "ack_", out);
    fputc(',', out);
    hist_json(&R.shed, "shed_", out);
    fputc(',', out);
    hist_json(&R.svc, "svc_", out);
    fprintf(out, "}\n");
    if (out != stdout)
        fclose(out);
    if (perf_ctl >= 0)
        close(perf_ctl);
    fprintf(stderr,
            "stream %-6s %-14s rate %6.0f/s: delivered %8.1f/s (served %8.1f/s)  p50 %7.1f us  p99 %8.1f us  p99.9 %8.1f us  max %9.1f "
            "us  non2xx %llu 429 %llu err %llu lost %lld dup %llu unsent %llu  gen cpu %.0f%% server cpu %.0f%%\n",
            target, label, rate, R.delivered_win / duration, R.served_win / duration, hist_percentile(&R.e2e, 50) / 1e3,
            hist_percentile(&R.e2e, 99) / 1e3, hist_percentile(&R.e2e, 99.9) / 1e3, R.e2e.max / 1e3,
            (unsigned long long)R.non2xx, (unsigned long long)R.rate_limited, (unsigned long long)R.errors,
            (long long)R.acked - (long long)R.delivered, (unsigned long long)R.dups, (unsigned long long)R.unsent,
            100 * (gen_cpu1 - gen_cpu0) / duration, srv_cpu0 >= 0 ? 100 * (srv_cpu1 - srv_cpu0) / duration : -1.0);
    if (R.last_bad_status != 0)
        fprintf(stderr, "stream: last refusal HTTP %d %s\n", R.last_bad_status, R.last_bad_body);
    for (i = 0; i < R.nsubs; ++i)
        conn_free(R.subs[i]);
    for (i = 0; i < R.npubs; ++i)
        conn_free(R.pubs[i]);
    return 0;
}
