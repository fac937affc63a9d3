#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client/client.h"
#include "common/buf.h"
#include "common/percent.h"

#define DEFAULT_CONNECT_MS 5000L
#define DEFAULT_TIMEOUT_MS 30000L
#define DEFAULT_MAX_BODY   (64u * 1024u * 1024u)

struct rl_client {
    CURL *curl;
    char *base;
    rl_client_options_t options;
};

typedef struct capture {
    rl_buf_t body; /* capped at the client's max_body */
    int too_large;
} capture_t;

static int curl_ready;

int rl_client_new(const char *base_url, const rl_client_options_t *options, rl_client_t **out)
{
    rl_client_t *client;
    size_t len;

    if (base_url == NULL || (strncmp(base_url, "http://", 7) != 0 && strncmp(base_url, "https://", 8) != 0))
        return RL_CLIENT_E_USAGE;
    if (!curl_ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            return RL_CLIENT_E_TRANSFER;
        curl_ready = 1;
    }
    client = calloc(1, sizeof(*client));
    if (client == NULL)
        return RL_CLIENT_E_TRANSFER;
    if (options != NULL)
        client->options = *options;
    if (client->options.connect_timeout_ms <= 0)
        client->options.connect_timeout_ms = DEFAULT_CONNECT_MS;
    if (client->options.timeout_ms <= 0)
        client->options.timeout_ms = DEFAULT_TIMEOUT_MS;
    if (client->options.max_body == 0)
        client->options.max_body = DEFAULT_MAX_BODY;
    if (client->options.user_agent == NULL)
        client->options.user_agent = "relay-client";
    client->base = strdup(base_url);
    client->curl = curl_easy_init();
    if (client->base == NULL || client->curl == NULL) {
        rl_client_free(client);
        return RL_CLIENT_E_TRANSFER;
    }
    len = strlen(client->base);
    while (len > 0 && client->base[len - 1] == '/')
        client->base[--len] = '\0';
    *out = client;
    return 0;
}

void rl_client_tls_setup(CURL *curl)
{
    const char *bundle = getenv("CURL_CA_BUNDLE");

    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
    if (bundle != NULL && bundle[0] != '\0')
        curl_easy_setopt(curl, CURLOPT_CAINFO, bundle);
}

void rl_client_free(rl_client_t *client)
{
    if (client == NULL)
        return;
    if (client->curl != NULL)
        curl_easy_cleanup(client->curl);
    free(client->base);
    free(client);
}

const char *rl_client_base(const rl_client_t *client)
{
    return client->base;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    capture_t *capture = arg;
    size_t n = size * nmemb;
    int appended = rl_buf_append(&capture->body, data, n);

    /* Anything short of n makes curl stop the transfer with CURLE_WRITE_ERROR. */
    if (appended == RL_BUF_E_TOO_LARGE)
        capture->too_large = 1;
    return appended == 0 ? n : 0;
}

/* The value of a header line whose name (with its colon) is name; NULL otherwise. Trims the value. */
static const char *header_value(const char *line, size_t n, const char *name, size_t *len)
{
    size_t name_len = strlen(name), value;

    if (n <= name_len || strncasecmp(line, name, name_len) != 0)
        return NULL;
    for (value = name_len; value < n && (line[value] == ' ' || line[value] == '\t'); ++value) {
    }
    while (n > value && (line[n - 1] == '\r' || line[n - 1] == '\n' || line[n - 1] == ' '))
        --n;
    *len = n - value;
    return line + value;
}

static size_t on_header(char *line, size_t size, size_t nmemb, void *arg)
{
    rl_client_response_t *response = arg;
    size_t n = size * nmemb, len;
    const char *value;
    char number[64];

    if ((value = header_value(line, n, "content-type:", &len)) != NULL) {
        snprintf(response->content_type, sizeof(response->content_type), "%.*s", (int)len, value);
    } else if ((value = header_value(line, n, "x-request-id:", &len)) != NULL) {
        snprintf(response->request_id, sizeof(response->request_id), "%.*s", (int)len, value);
    } else if ((value = header_value(line, n, "x-ratelimit-bucket:", &len)) != NULL) {
        snprintf(response->ratelimit_bucket, sizeof(response->ratelimit_bucket), "%.*s", (int)len, value);
    } else if ((value = header_value(line, n, "retry-after:", &len)) != NULL) {
        snprintf(number, sizeof(number), "%.*s", (int)len, value);
        response->retry_after_s = strtol(number, NULL, 10);
    } else if ((value = header_value(line, n, "x-ratelimit-limit:", &len)) != NULL) {
        snprintf(number, sizeof(number), "%.*s", (int)len, value);
        response->ratelimit_limit = strtol(number, NULL, 10);
    } else if ((value = header_value(line, n, "x-ratelimit-remaining:", &len)) != NULL) {
        snprintf(number, sizeof(number), "%.*s", (int)len, value);
        response->ratelimit_remaining = strtol(number, NULL, 10);
    } else if ((value = header_value(line, n, "x-ratelimit-reset-after:", &len)) != NULL) {
        snprintf(number, sizeof(number), "%.*s", (int)len, value);
        response->ratelimit_reset_after = strtod(number, NULL);
    }
    return n;
}

/* libcurl calls this about once a second while a transfer runs: a set stop flag ends it. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return __atomic_load_n((const int *)arg, __ATOMIC_ACQUIRE) != 0;
}

static int classify(CURLcode code, const capture_t *capture)
{
    if (capture->too_large)
        return RL_CLIENT_E_TOO_LARGE;
    switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
        return RL_CLIENT_E_CONNECT;
    case CURLE_OPERATION_TIMEDOUT:
        return RL_CLIENT_E_TIMEOUT;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
        return RL_CLIENT_E_TRUST;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
        return RL_CLIENT_E_USAGE;
    default:
        return RL_CLIENT_E_TRANSFER;
    }
}

/* libcurl's failures in our words, one row each; a code not listed gets the last row's. */
static const struct failure {
    CURLcode code;
    int reach; /* no answer could begin */
    const char *text;
} failures[] = {
    {CURLE_COULDNT_RESOLVE_HOST, 1, "no such host name"},
    {CURLE_COULDNT_RESOLVE_PROXY, 1, "the proxy's host name does not resolve"},
    {CURLE_COULDNT_CONNECT, 1, "nothing answers there (is the server running, on that port?)"},
    {CURLE_OPERATION_TIMEDOUT, 1, "no answer in time"},
    {CURLE_SSL_CONNECT_ERROR, 1, "the TLS handshake failed (is it an HTTPS server?)"},
    {CURLE_PEER_FAILED_VERIFICATION, 1,
     "its certificate is not trusted (for a private CA, point CURL_CA_BUNDLE at its certificate)"},
    {CURLE_SSL_CACERT_BADFILE, 1, "the CA bundle (CURL_CA_BUNDLE) cannot be read"},
    {CURLE_UNSUPPORTED_PROTOCOL, 1, "the URL is not http:// or https://"},
    {CURLE_URL_MALFORMAT, 1, "the URL is malformed"},
    {CURLE_PARTIAL_FILE, 0, "the connection broke before the answer was complete"},
    {CURLE_RECV_ERROR, 0, "the connection broke before the answer was complete"},
    {CURLE_GOT_NOTHING, 0, "the server closed the connection without answering"},
    {CURLE_SEND_ERROR, 0, "the connection broke while the request was being sent"},
    {CURLE_WRITE_ERROR, 0, "the answer could not be kept"},
    {CURLE_BAD_CONTENT_ENCODING, 0, "the answer's compression is broken"},
    {CURLE_TOO_MANY_REDIRECTS, 0, "too many redirects"},
    {CURLE_OK, 0, "the exchange failed"},
};

static const struct failure *failure_of(int code)
{
    size_t i;

    for (i = 0; i + 1 < sizeof(failures) / sizeof(failures[0]); ++i) {
        if ((int)failures[i].code == code)
            break;
    }
    return &failures[i];
}

const char *rl_client_failure_text(int curl_code)
{
    return failure_of(curl_code)->text;
}

int rl_client_failure_is_reach(int curl_code)
{
    return failure_of(curl_code)->reach;
}

int rl_client_get(rl_client_t *client, const char *path, const char *const *headers, rl_client_response_t *response)
{
    return rl_client_request(client, "GET", path, headers, NULL, 0, response);
}

int rl_client_get_url(const char *url, const rl_client_options_t *options, rl_client_response_t *response)
{
    const char *rest = url != NULL ? strstr(url, "://") : NULL;
    const char *slash = rest != NULL ? strchr(rest + 3, '/') : NULL;
    rl_client_t *client = NULL;
    char base[1024];
    int result;

    memset(response, 0, sizeof(*response));
    if (slash == NULL || (size_t)(slash - url) >= sizeof(base)) {
        snprintf(response->error, sizeof(response->error), "not an absolute URL with a path");
        return -1;
    }
    snprintf(base, sizeof(base), "%.*s", (int)(slash - url), url);
    if (rl_client_new(base, options, &client) != 0) {
        snprintf(response->error, sizeof(response->error), "cannot make a client for %.200s", base);
        return -1;
    }
    result = rl_client_get(client, slash, NULL, response);
    rl_client_free(client);
    return result;
}

int rl_client_request(rl_client_t *client, const char *method, const char *path, const char *const *headers,
                      const void *body, size_t body_len, rl_client_response_t *response)
{
    capture_t capture = {.too_large = 0};
    struct curl_slist *list = NULL;
    char *url;
    CURLcode code;
    CURL *curl = client->curl;
    size_t len = strlen(client->base) + strlen(path) + 1;

    memset(response, 0, sizeof(*response));
    response->retry_after_s = -1;
    response->ratelimit_limit = -1;
    response->ratelimit_remaining = -1;
    response->ratelimit_reset_after = -1;
    rl_buf_init(&capture.body, client->options.max_body);
    url = malloc(len);
    if (url == NULL) {
        snprintf(response->error, sizeof(response->error), "out of memory");
        return RL_CLIENT_E_TRANSFER;
    }
    snprintf(url, len, "%s%s", client->base, path);
    for (; headers != NULL && *headers != NULL; ++headers)
        list = curl_slist_append(list, *headers);

    curl_easy_reset(curl);
    rl_client_tls_setup(curl);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
    } else {
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
        if (body != NULL || strcmp(method, "POST") == 0 || strcmp(method, "PATCH") == 0) {
            curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body != NULL ? (const char *)body : "");
            curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body != NULL ? body_len : 0));
        }
    }
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, client->options.connect_timeout_ms);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, client->options.timeout_ms);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, client->options.user_agent);
    curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, ""); /* any encoding curl can decode, gzip included */
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &capture);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, response);
    if (client->options.max_body <= (size_t)0x7fffffff)
        curl_easy_setopt(curl, CURLOPT_MAXFILESIZE, (long)client->options.max_body);
    if (client->options.stop != NULL) {
        curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(curl, CURLOPT_XFERINFODATA, (void *)client->options.stop);
        curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    }
    code = curl_easy_perform(curl);
    curl_slist_free_all(list);
    free(url);
    /* What arrived belongs to the response, a failed transfer's part included. */
    if (capture.body.bytes != NULL)
        response->body = rl_buf_take(&capture.body, &response->len);
    if (code == CURLE_ABORTED_BY_CALLBACK) {
        snprintf(response->error, sizeof(response->error), "stopped");
        response->status = 0;
        return RL_CLIENT_E_STOPPED;
    }
    if (code != CURLE_OK) {
        int err = code == CURLE_FILESIZE_EXCEEDED ? RL_CLIENT_E_TOO_LARGE : classify(code, &capture);
        if (err == RL_CLIENT_E_TOO_LARGE)
            snprintf(response->error, sizeof(response->error), "the answer from %s is larger than %zu bytes",
                     client->base, client->options.max_body);
        else if (rl_client_failure_is_reach(code))
            snprintf(response->error, sizeof(response->error), "cannot reach %s: %s", client->base,
                     rl_client_failure_text(code));
        else
            snprintf(response->error, sizeof(response->error), "no complete answer from %s: %s", client->base,
                     rl_client_failure_text(code));
        response->status = 0;
        return err;
    }
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response->status);
    if (response->body == NULL) {
        response->body = calloc(1, 1);
        if (response->body == NULL)
            return RL_CLIENT_E_TRANSFER;
    }
    return 0;
}

void rl_client_response_free(rl_client_response_t *response)
{
    free(response->body);
    response->body = NULL;
    response->len = 0;
}

char *rl_client_escape(const char *s)
{
    size_t len = strlen(s);
    char *out = malloc(len * 3 + 1);

    /* RFC 3986 unreserved characters stay; a path segment or a query value can then hold anything. */
    if (out != NULL)
        rl_percent_encode(s, len, out, "-._~");
    return out;
}

json_t *rl_client_json(const rl_client_response_t *response, char *err, size_t errsz)
{
    json_error_t jerr;
    json_t *value;

    if (response->body == NULL || response->len == 0) {
        snprintf(err, errsz, "the answer (HTTP %ld) has no body", response->status);
        return NULL;
    }
    value = json_loadb(response->body, response->len, JSON_DECODE_ANY, &jerr);
    if (value == NULL)
        snprintf(err, errsz, "the answer (HTTP %ld) is not JSON: %s at line %d", response->status, jerr.text,
                 jerr.line);
    return value;
}

const char *rl_client_error_message(const json_t *body)
{
    const json_t *error = json_object_get(body, "error");

    if (json_is_string(error))
        return json_string_value(error);
    if (json_is_string(json_object_get(error, "message")))
        return json_string_value(json_object_get(error, "message"));
    return json_string_value(json_object_get(error, "code"));
}

const char *rl_client_error_code(const json_t *body)
{
    return json_string_value(json_object_get(json_object_get(body, "error"), "code"));
}
