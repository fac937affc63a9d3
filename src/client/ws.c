#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <wslay/wslay.h>

#include "client/ws.h"
#include "client/client.h"
#include "common/clock.h"

#define DEFAULT_TIMEOUT_MS  10000L
#define DEFAULT_MAX_MESSAGE (1024u * 1024u)
/* The 101 answer's head; the relay's is a few hundred bytes. */
#define MAX_HEAD 8192

struct rl_ws {
    CURL *curl;
    curl_socket_t fd;
    wslay_event_context_ptr ctx;
    rl_ws_message_cb on_message;
    void *user;
    /* Bytes read past the 101 head, handed to wslay first. */
    char *early;
    size_t early_len, early_off;
    int close_code;
    char close_reason[128];
    int eof;
    /* The close frame being read, byte by byte (see on_frame_chunk). */
    int in_close;
    unsigned char close_payload[2 + 127];
    size_t close_got;
};

void rl_ws_accept_for(const char *key, char out[29])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    char joined[128];

    snprintf(joined, sizeof(joined), "%s%s", key, guid);
    EVP_Digest(joined, strlen(joined), digest, &len, EVP_sha1(), NULL);
    EVP_EncodeBlock((unsigned char *)out, digest, (int)len);
}

static int wait_fd(curl_socket_t fd, short events, long deadline)
{
    struct pollfd p = {.fd = fd, .events = events};
    long left = deadline - (long)rl_clock_mono_ms();

    if (left <= 0)
        return -1;
    return poll(&p, 1, (int)left) > 0 ? 0 : -1;
}

static int send_all(rl_ws_t *ws, const char *buf, size_t len, long deadline)
{
    while (len > 0) {
        size_t sent = 0;
        CURLcode rc = curl_easy_send(ws->curl, buf, len, &sent);
        if (rc == CURLE_AGAIN) {
            if (wait_fd(ws->fd, POLLOUT, deadline) != 0)
                return -1;
            continue;
        }
        if (rc != CURLE_OK)
            return -1;
        buf += sent;
        len -= sent;
    }
    return 0;
}

/* Finds a header's value in the head (case-insensitive name), copied into out. */
static int head_value(const char *head, const char *name, char *out, size_t outsz)
{
    size_t nlen = strlen(name);
    const char *line = strstr(head, "\r\n");

    while (line != NULL && line[2] != '\r') {
        line += 2;
        if (strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
            const char *v = line + nlen + 1, *end = strstr(v, "\r\n");
            size_t n;
            while (*v == ' ' || *v == '\t')
                v++;
            n = end != NULL ? (size_t)(end - v) : strlen(v);
            while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
                n--;
            if (n >= outsz)
                n = outsz - 1;
            memcpy(out, v, n);
            out[n] = '\0';
            return 0;
        }
        line = strstr(line, "\r\n");
    }
    return -1;
}

static ssize_t on_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
    rl_ws_t *ws = user;
    size_t got = 0;
    CURLcode rc;

    (void)flags;
    if (ws->early_off < ws->early_len) {
        size_t n = ws->early_len - ws->early_off;
        if (n > len)
            n = len;
        memcpy(buf, ws->early + ws->early_off, n);
        ws->early_off += n;
        return (ssize_t)n;
    }
    rc = curl_easy_recv(ws->curl, buf, len, &got);
    if (rc == CURLE_AGAIN) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    if (rc != CURLE_OK || got == 0) {
        ws->eof = 1;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return (ssize_t)got;
}

static ssize_t on_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *user)
{
    rl_ws_t *ws = user;
    size_t sent = 0;
    CURLcode rc;

    (void)flags;
    rc = curl_easy_send(ws->curl, data, len, &sent);
    if (rc == CURLE_AGAIN) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    if (rc != CURLE_OK) {
        ws->eof = 1;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return (ssize_t)sent;
}

static int on_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user)
{
    (void)ctx;
    (void)user;
    return RAND_bytes(buf, (int)len) == 1 ? 0 : -1;
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *user)
{
    rl_ws_t *ws = user;

    (void)ctx;
    if (arg->opcode == WSLAY_TEXT_FRAME && ws->on_message != NULL)
        ws->on_message(ws->user, (const char *)arg->msg, arg->msg_length);
    else if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
        size_t n = arg->msg_length > 2 ? arg->msg_length - 2 : 0;
        ws->close_code = arg->status_code != 0 ? arg->status_code : 1005;
        if (n >= sizeof(ws->close_reason))
            n = sizeof(ws->close_reason) - 1;
        memcpy(ws->close_reason, arg->msg + 2, n);
        ws->close_reason[n] = '\0';
    }
}

/*
 * The close frame's code is also read here, as its bytes arrive: wslay 1.1.1
 * only knows the close codes of RFC 6455 and refuses later ones of the IANA
 * registry, among them 1012 (service restart), which relayd sends when it
 * stops, with a protocol error and without calling on_msg. The code seen
 * here stands when on_msg never comes.
 */
static void on_frame_start(wslay_event_context_ptr ctx, const struct wslay_event_on_frame_recv_start_arg *arg,
                           void *user)
{
    rl_ws_t *ws = user;

    (void)ctx;
    ws->in_close = arg->opcode == WSLAY_CONNECTION_CLOSE;
    ws->close_got = 0;
}

static void on_frame_chunk(wslay_event_context_ptr ctx, const struct wslay_event_on_frame_recv_chunk_arg *arg,
                           void *user)
{
    rl_ws_t *ws = user;
    size_t n = arg->data_length;

    (void)ctx;
    if (!ws->in_close)
        return;
    if (n > sizeof(ws->close_payload) - ws->close_got)
        n = sizeof(ws->close_payload) - ws->close_got;
    memcpy(ws->close_payload + ws->close_got, arg->data, n);
    ws->close_got += n;
}

static void on_frame_end(wslay_event_context_ptr ctx, void *user)
{
    rl_ws_t *ws = user;
    size_t n;

    (void)ctx;
    if (!ws->in_close)
        return;
    ws->in_close = 0;
    if (ws->close_got < 2) {
        ws->close_code = 1005;
        return;
    }
    ws->close_code = ws->close_payload[0] << 8 | ws->close_payload[1];
    n = ws->close_got - 2 < sizeof(ws->close_reason) - 1 ? ws->close_got - 2 : sizeof(ws->close_reason) - 1;
    memcpy(ws->close_reason, ws->close_payload + 2, n);
    ws->close_reason[n] = '\0';
}

/* Turns ws:// and wss:// into the http(s):// URL curl connects to. */
static int ws_curl_url(const char *url, char *out, size_t outsz)
{
    int n;

    if (strncmp(url, "wss://", 6) == 0)
        n = snprintf(out, outsz, "https://%s", url + 6);
    else if (strncmp(url, "ws://", 5) == 0)
        n = snprintf(out, outsz, "http://%s", url + 5);
    else
        n = snprintf(out, outsz, "%s", url);
    return n < 0 || (size_t)n >= outsz ? -1 : 0;
}

/* Splits the URL into the Host header value and the request target. */
static int split_url(const char *url, char *host, size_t hostsz, char *target, size_t targetsz)
{
    const char *p = strstr(url, "://"), *slash;
    size_t n;

    if (p == NULL)
        return -1;
    p += 3;
    slash = strchr(p, '/');
    n = slash != NULL ? (size_t)(slash - p) : strlen(p);
    if (n == 0 || n >= hostsz)
        return -1;
    memcpy(host, p, n);
    host[n] = '\0';
    if (snprintf(target, targetsz, "%s", slash != NULL ? slash : "/") >= (int)targetsz)
        return -1;
    return 0;
}

static int handshake(rl_ws_t *ws, const rl_ws_options_t *options, const char *url, long deadline, long *status,
                     char *err, size_t errsz)
{
    unsigned char raw[16];
    char key[32], expect[29], got[64], host[256], target[1024];
    char *request = NULL, head[MAX_HEAD + 1];
    size_t have = 0;
    char *end = NULL;
    int result = RL_WS_E_CONNECT, n;

    if (split_url(url, host, sizeof(host), target, sizeof(target)) != 0) {
        snprintf(err, errsz, "bad socket URL");
        return RL_WS_E_CONNECT;
    }
    RAND_bytes(raw, sizeof(raw));
    EVP_EncodeBlock((unsigned char *)key, raw, sizeof(raw));
    n = asprintf(&request,
                 "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nUser-Agent: relay-bridge\r\n"
                 "Authorization: Bearer %s\r\n\r\n",
                 target, host, key, options->token != NULL ? options->token : "");
    if (n < 0) {
        snprintf(err, errsz, "out of memory");
        return RL_WS_E_CONNECT;
    }
    if (send_all(ws, request, (size_t)n, deadline) != 0) {
        snprintf(err, errsz, "could not send the upgrade request");
        goto out;
    }
    while (end == NULL) {
        size_t got_n = 0;
        CURLcode rc;
        if (have == MAX_HEAD) {
            snprintf(err, errsz, "upgrade answer head too large");
            result = RL_WS_E_PROTOCOL;
            goto out;
        }
        rc = curl_easy_recv(ws->curl, head + have, MAX_HEAD - have, &got_n);
        if (rc == CURLE_AGAIN) {
            if (wait_fd(ws->fd, POLLIN, deadline) != 0) {
                snprintf(err, errsz, "no upgrade answer in time");
                goto out;
            }
            continue;
        }
        if (rc != CURLE_OK || got_n == 0) {
            snprintf(err, errsz, "connection closed during the upgrade");
            goto out;
        }
        have += got_n;
        head[have] = '\0';
        end = strstr(head, "\r\n\r\n");
    }
    if (sscanf(head, "HTTP/1.%*c %ld", status) != 1) {
        snprintf(err, errsz, "not an HTTP answer");
        result = RL_WS_E_PROTOCOL;
        goto out;
    }
    if (*status != 101) {
        snprintf(err, errsz, "upgrade refused with HTTP %ld", *status);
        result = RL_WS_E_REFUSED;
        goto out;
    }
    rl_ws_accept_for(key, expect);
    if (head_value(head, "Sec-WebSocket-Accept", got, sizeof(got)) != 0 || strcmp(got, expect) != 0) {
        snprintf(err, errsz, "bad Sec-WebSocket-Accept");
        result = RL_WS_E_PROTOCOL;
        goto out;
    }
    end += 4;
    ws->early_len = have - (size_t)(end - head);
    if (ws->early_len > 0) {
        ws->early = malloc(ws->early_len);
        if (ws->early == NULL)
            goto out;
        memcpy(ws->early, end, ws->early_len);
    }
    result = 0;
out:
    free(request);
    return result;
}

int rl_ws_connect(const rl_ws_options_t *options, rl_ws_t **out, long *status, char *err, size_t errsz)
{
    static const struct wslay_event_callbacks callbacks = {
        .recv_callback = on_recv,
        .send_callback = on_send,
        .genmask_callback = on_genmask,
        .on_msg_recv_callback = on_msg,
        .on_frame_recv_start_callback = on_frame_start,
        .on_frame_recv_chunk_callback = on_frame_chunk,
        .on_frame_recv_end_callback = on_frame_end,
    };
    long timeout = options->timeout_ms > 0 ? options->timeout_ms : DEFAULT_TIMEOUT_MS;
    long deadline = (long)rl_clock_mono_ms() + timeout;
    char url[2048];
    rl_ws_t *ws;
    CURLcode rc;
    int result;

    *status = 0;
    *out = NULL;
    if (ws_curl_url(options->url, url, sizeof(url)) != 0) {
        snprintf(err, errsz, "socket URL too long");
        return RL_WS_E_CONNECT;
    }
    ws = calloc(1, sizeof(*ws));
    if (ws == NULL)
        return RL_WS_E_CONNECT;
    ws->fd = CURL_SOCKET_BAD;
    ws->close_code = 1006;
    ws->on_message = options->on_message;
    ws->user = options->user;
    ws->curl = curl_easy_init();
    if (ws->curl == NULL) {
        result = RL_WS_E_CONNECT;
        goto fail;
    }
    rl_client_tls_setup(ws->curl);
    curl_easy_setopt(ws->curl, CURLOPT_URL, url);
    curl_easy_setopt(ws->curl, CURLOPT_CONNECT_ONLY, 1L);
    /* Through a proxy (HTTPS_PROXY and friends, read by curl), tunnel with CONNECT. */
    curl_easy_setopt(ws->curl, CURLOPT_HTTPPROXYTUNNEL, 1L);
    curl_easy_setopt(ws->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(ws->curl, CURLOPT_CONNECTTIMEOUT_MS, timeout);
    curl_easy_setopt(ws->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    /* The Upgrade is HTTP/1.1: do not let TLS negotiate h2. */
    curl_easy_setopt(ws->curl, CURLOPT_SSL_ENABLE_ALPN, 0L);
    rc = curl_easy_perform(ws->curl);
    if (rc != CURLE_OK) {
        snprintf(err, errsz, "%s", rl_client_failure_text(rc));
        result = RL_WS_E_CONNECT;
        goto fail;
    }
    if (curl_easy_getinfo(ws->curl, CURLINFO_ACTIVESOCKET, &ws->fd) != CURLE_OK || ws->fd == CURL_SOCKET_BAD) {
        snprintf(err, errsz, "no socket");
        result = RL_WS_E_CONNECT;
        goto fail;
    }
    result = handshake(ws, options, url, deadline, status, err, errsz);
    if (result != 0)
        goto fail;
    if (wslay_event_context_client_init(&ws->ctx, &callbacks, ws) != 0) {
        result = RL_WS_E_CONNECT;
        goto fail;
    }
    wslay_event_config_set_max_recv_msg_length(ws->ctx,
                                               options->max_message > 0 ? options->max_message : DEFAULT_MAX_MESSAGE);
    *out = ws;
    return 0;
fail:
    rl_ws_free(ws);
    return result;
}

void rl_ws_free(rl_ws_t *ws)
{
    if (ws == NULL)
        return;
    if (ws->ctx != NULL)
        wslay_event_context_free(ws->ctx);
    if (ws->curl != NULL)
        curl_easy_cleanup(ws->curl);
    free(ws->early);
    free(ws);
}

int rl_ws_fd(const rl_ws_t *ws)
{
    return (int)ws->fd;
}

short rl_ws_events(const rl_ws_t *ws)
{
    short events = 0;

    if (wslay_event_want_read(ws->ctx))
        events |= POLLIN;
    if (wslay_event_want_write(ws->ctx))
        events |= POLLOUT;
    return events;
}

int rl_ws_handle(rl_ws_t *ws)
{
    if (ws->eof)
        return RL_WS_E_CLOSED;
    /*
     * wslay reads until the callback would block, which also drains bytes
     * TLS has already decrypted, so poll() never misses buffered data.
     */
    if (wslay_event_want_read(ws->ctx) && wslay_event_recv(ws->ctx) != 0)
        return RL_WS_E_CLOSED;
    if (wslay_event_want_write(ws->ctx) && wslay_event_send(ws->ctx) != 0)
        return RL_WS_E_CLOSED;
    if (ws->eof || (!wslay_event_want_read(ws->ctx) && !wslay_event_want_write(ws->ctx)))
        return RL_WS_E_CLOSED;
    return 0;
}

int rl_ws_send_text(rl_ws_t *ws, const char *text, size_t len)
{
    struct wslay_event_msg msg = {.opcode = WSLAY_TEXT_FRAME, .msg = (const uint8_t *)text, .msg_length = len};

    return wslay_event_queue_msg(ws->ctx, &msg) == 0 ? 0 : -1;
}

void rl_ws_close(rl_ws_t *ws, int code, const char *reason)
{
    wslay_event_queue_close(ws->ctx, (uint16_t)code, (const uint8_t *)reason, reason != NULL ? strlen(reason) : 0);
}

int rl_ws_close_code(const rl_ws_t *ws)
{
    return ws->close_code;
}

const char *rl_ws_close_reason(const rl_ws_t *ws)
{
    return ws->close_reason;
}
