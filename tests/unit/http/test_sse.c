/*
 * The SSE stream's lifetime: a stream that ends inside a send (a reader cut
 * off for falling behind) or inside the hub's delivery to several streams is
 * marked there and reaped after the loop turn: its owner hears of the end
 * (on_end) only then, and the memory goes once h2o has let go of the
 * response. Real sockets: an h2o server on loopback and a client that does
 * not read. Run under ASan (RL_SANITIZE) a use after free fails the test.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus/bus.h"
#include "common/clock.h"
#include "common/event.h"
#include "http/server.h"
#include "http/sse.h"
#include "relay/core/hub.h"

static h2o_loop_t *loop;
static rl_http_server_t *server;
static rl_hub_t *hub;
static rl_bus_t *bus;
static char bound[64];

/* A stream as the relay's streams are: a hub subscriber whose deliveries go to its SSE response. */
struct reader {
    rl_hub_subscriber_t subscriber;
    rl_sse_t *sse;
};

static struct reader *opened; /* the last stream the route opened */
static int ended;             /* on_end calls */
static const char *ended_why;
static int counted; /* deliveries to the plain subscriber */

static void deliver(rl_hub_subscriber_t *self, int64_t id, rl_blob_t *frame)
{
    struct reader *reader = H2O_STRUCT_FROM_MEMBER(struct reader, subscriber, self);

    (void)id;
    /* Once the stream is cut off, sends fail; the stream itself must still be there. */
    if (reader->sse != NULL)
        rl_sse_send(reader->sse, frame);
}

static void on_end(void *arg, const char *why)
{
    struct reader *reader = arg;

    ++ended;
    ended_why = why;
    reader->sse = NULL;
    rl_hub_unsubscribe(hub, &reader->subscriber);
    free(reader);
}

static int open_stream(rl_call_t *call)
{
    struct reader *reader = calloc(1, sizeof(*reader));
    /* One frame may wait while another is written: the third in one turn overflows. */
    rl_sse_config_t config = {.max_queued_frames = 1, .max_queued_bytes = 1 << 20, .on_end = on_end};

    if (reader == NULL)
        return -1;
    config.arg = reader;
    reader->subscriber.deliver = deliver;
    reader->sse = rl_sse_start(call, &config);
    if (reader->sse == NULL) {
        free(reader);
        return 0;
    }
    rl_hub_subscribe(hub, "alice", &reader->subscriber);
    opened = reader;
    return 0;
}

static void count(rl_hub_subscriber_t *self, int64_t id, rl_blob_t *frame)
{
    (void)self;
    (void)id;
    (void)frame;
    ++counted;
}

static const rl_route_t routes[] = {
    {"GET", "/v1/stream", open_stream, 0, NULL, NULL, 0, 0, 0},
};

static void on_bus_event(void *ctx, const char *user_id, int64_t id, rl_blob_t *frame)
{
    (void)ctx;
    rl_hub_deliver(hub, user_id, id, frame);
}

static size_t open_streams(void)
{
    rl_sse_stats_t stats;

    rl_sse_stats(&stats);
    return stats.open;
}

static int connect_client(void)
{
    struct sockaddr_in addr = {0};
    char *colon = strrchr(bound, ':');
    static const char request[] = "GET /v1/stream HTTP/1.1\r\nHost: test\r\n\r\n";
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    assert_non_null(colon);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)atoi(colon + 1));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(write(fd, request, sizeof(request) - 1), (ssize_t)(sizeof(request) - 1));
    return fd;
}

/* Turns the loop until cond holds or ms pass; whether it holds. */
#define TURN_UNTIL(cond, ms)                                                                                           \
    do {                                                                                                               \
        int64_t deadline_ = rl_clock_mono_us() / 1000 + (ms);                                                          \
        while (!(cond) && rl_clock_mono_us() / 1000 < deadline_)                                                       \
            h2o_evloop_run(loop, 10);                                                                                  \
    } while (0)

static int setup(void **state)
{
    static rl_http_config_t http = {
        .routes = routes, .nroutes = 1, .api_prefix = "/v1/", .max_body = 1024, .request_timeout_ms = 10000};
    rl_bus_config_t config = {.max_events = 16, .max_age_ms = 60000, .max_users = 16};

    (void)state;
    config.handlers.event = on_bus_event;
    loop = h2o_evloop_create();
    assert_int_equal(rl_bus_open("local", loop, &config, &bus), 0);
    hub = rl_hub_new(bus, loop, 16);
    assert_non_null(hub);
    assert_int_equal(rl_http_server_create(loop, &http, &server), 0);
    assert_int_equal(rl_http_server_listen(server, "127.0.0.1:0", bound, sizeof(bound)), 0);
    return 0;
}

/*
 * A reader cut off inside the hub's delivery loop (the third event of one
 * turn overflows its queue): the walk goes on to the next subscriber, the
 * stream is still subscribed and still answers calls until the turn is over,
 * then on_end runs once and the stream is freed.
 */
static void test_a_stream_cut_off_inside_delivery_is_reaped_after_the_turn(void **state)
{
    rl_hub_subscriber_t plain = {.deliver = count};
    struct reader *reader;
    rl_sse_stats_t stats;
    int fd, i;

    (void)state;
    /* Subscribed first, so walked after the stream (the hub puts new subscribers at the head). */
    assert_int_equal(rl_hub_subscribe(hub, "alice", &plain), 0);
    fd = connect_client();
    TURN_UNTIL(opened != NULL, 5000);
    reader = opened;
    assert_non_null(reader);
    assert_int_equal(rl_hub_subscribers(hub, "alice"), 2);

    /* One turn: the local bus delivers inside publish, so all three deliveries happen here. */
    for (i = 0; i < 3; ++i)
        rl_hub_publish(hub, "alice", RL_EV_MESSAGE_DELTA, json_pack("{s:i}", "n", i));
    rl_sse_stats(&stats);
    assert_int_equal(stats.cut_off, 1);
    assert_int_equal(counted, 3);
    assert_int_equal(ended, 0);
    assert_int_equal(rl_hub_subscribers(hub, "alice"), 2);
    /* The stream is marked, not gone: it refuses more, and it is still there to ask. */
    assert_non_null(reader->sse);
    rl_hub_publish(hub, "alice", RL_EV_MESSAGE_DELTA, json_pack("{s:i}", "n", 3));
    assert_int_equal(rl_sse_queued_bytes(reader->sse), 0);
    assert_int_equal(counted, 4);
    assert_int_equal(ended, 0);

    /* After the turn: told once, unsubscribed, and freed once h2o lets go of the response. */
    TURN_UNTIL(ended > 0 && open_streams() == 0, 5000);
    assert_int_equal(ended, 1);
    assert_string_equal(ended_why, "too slow");
    assert_int_equal(open_streams(), 0);
    assert_int_equal(rl_hub_subscribers(hub, "alice"), 1);
    rl_hub_unsubscribe(hub, &plain);
    close(fd);
}

/* rl_sse_end inside the owner's own code: the owner hears of it after the turn, not inside the call. */
static void test_an_ended_stream_is_reaped_after_the_turn(void **state)
{
    int fd;

    (void)state;
    ended = 0;
    opened = NULL;
    fd = connect_client();
    TURN_UNTIL(opened != NULL, 5000);
    assert_non_null(opened);
    TURN_UNTIL(rl_sse_queued_bytes(opened->sse) == 0, 1000);
    rl_sse_end(opened->sse);
    assert_int_equal(ended, 0);
    /* Ending twice, or sending after the end, is refused without touching anything gone. */
    rl_sse_end(opened->sse);
    assert_int_equal(rl_sse_send_text(opened->sse, "x", 1), -1);
    TURN_UNTIL(ended > 0 && open_streams() == 0, 5000);
    assert_int_equal(ended, 1);
    assert_string_equal(ended_why, "closed");
    assert_int_equal(open_streams(), 0);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_stream_cut_off_inside_delivery_is_reaped_after_the_turn),
        cmocka_unit_test(test_an_ended_stream_is_reaped_after_the_turn),
    };
    /* As relayd does: a peer that went away is a write error, not a signal. */
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, setup, NULL);
}
