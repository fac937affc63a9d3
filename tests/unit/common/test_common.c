/* Unit tests for the small helpers in src/common: durations, base64url, ids, the error table, strmap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/args.h"
#include "common/base64.h"
#include "common/hex.h"
#include "common/clock.h"
#include "common/duration.h"
#include "common/error.h"
#include "common/log.h"
#include "common/rand.h"
#include "common/strmap.h"

static void test_duration(void **state)
{
    int64_t ms;
    char buf[32];

    assert_int_equal(rl_duration_parse("250ms", &ms), 0);
    assert_int_equal(ms, 250);
    assert_int_equal(rl_duration_parse("3s", &ms), 0);
    assert_int_equal(ms, 3000);
    assert_int_equal(rl_duration_parse("5m", &ms), 0);
    assert_int_equal(ms, 300000);
    assert_int_equal(rl_duration_parse("24h", &ms), 0);
    assert_int_equal(ms, 86400000);
    assert_int_equal(rl_duration_parse("30d", &ms), 0);
    assert_int_equal(ms, 2592000000LL);
    assert_int_equal(rl_duration_parse("5", &ms), -1);
    assert_int_equal(rl_duration_parse("", &ms), -1);
    assert_int_equal(rl_duration_parse("s", &ms), -1);
    assert_int_equal(rl_duration_parse("-1s", &ms), -1);
    assert_int_equal(rl_duration_parse("1.5s", &ms), -1);
    assert_int_equal(rl_duration_parse("3 s", &ms), -1);
    assert_int_equal(rl_duration_parse("99999999999999999999h", &ms), -1);
    assert_int_equal(rl_duration_parse("9223372036854775807h", &ms), -1);
    rl_duration_format(300000, buf, sizeof(buf));
    assert_string_equal(buf, "5m");
    rl_duration_format(1500, buf, sizeof(buf));
    assert_string_equal(buf, "1500ms");
}

static void test_duration_with_a_bare_unit(void **state)
{
    int64_t ms;

    /* The flags of the client programs: a bare number in their old unit, or any unit. */
    assert_int_equal(rl_duration_parse_default("90", 1000, &ms), 0);
    assert_int_equal(ms, 90000);
    assert_int_equal(rl_duration_parse_default("0", 1, &ms), 0);
    assert_int_equal(ms, 0);
    assert_int_equal(rl_duration_parse_default("1500ms", 1000, &ms), 0);
    assert_int_equal(ms, 1500);
    assert_int_equal(rl_duration_parse_default("5", 0, &ms), -1);
    assert_int_equal(rl_duration_parse_default("soon", 1000, &ms), -1);
    assert_int_equal(rl_duration_parse_default("", 1000, &ms), -1);
    assert_int_equal(rl_duration_parse_default("9223372036854775807", 1000, &ms), -1);
}

static void test_arg_value(void **state)
{
    char *argv[] = {"relayd", "token", "--data", "dir", "--store=sqlite:x", "--ttl", "--data=", "--datax=1", "--ttl"};
    int argc = (int)(sizeof(argv) / sizeof(argv[0])), i = 2;
    const char *value = NULL;

    (void)state;
    /* "NAME VALUE" moves onto the value. */
    assert_int_equal(rl_arg_value(argc, argv, &i, "--data", &value), 1);
    assert_int_equal(i, 3);
    assert_string_equal(value, "dir");
    /* "NAME=VALUE" stays where it is; another name does not match. */
    i = 4;
    assert_int_equal(rl_arg_value(argc, argv, &i, "--data", &value), 0);
    assert_int_equal(rl_arg_value(argc, argv, &i, "--store", &value), 1);
    assert_int_equal(i, 4);
    assert_string_equal(value, "sqlite:x");
    /* The next word is taken as the value even when it looks like an option (as before). */
    i = 5;
    assert_int_equal(rl_arg_value(argc, argv, &i, "--ttl", &value), 1);
    assert_string_equal(value, "--data=");
    /* An empty value after '=' is a value; a longer name is not this one; a NAME at the end has none. */
    i = 6;
    assert_int_equal(rl_arg_value(argc, argv, &i, "--data", &value), 1);
    assert_string_equal(value, "");
    i = 7;
    assert_int_equal(rl_arg_value(argc, argv, &i, "--data", &value), 0);
    i = 8;
    value = NULL;
    assert_int_equal(rl_arg_value(argc, argv, &i, "--ttl", &value), 0);
    assert_null(value);
    assert_int_equal(i, 8);
}

static void test_clock(void **state)
{
    int64_t before = rl_clock_mono_ms();

    rl_clock_sleep_ms(20);
    assert_true(rl_clock_mono_ms() - before >= 20);
    assert_true(rl_clock_mono_us() / 1000 >= rl_clock_mono_ms() - 1);
}

/* Runs fn with stderr going to a file and returns what it wrote (malloc'd). */
static char *captured_stderr(void (*fn)(void))
{
    char path[] = "/tmp/rl-log-XXXXXX", *text;
    int fd = mkstemp(path), saved = dup(STDERR_FILENO);
    FILE *fp;
    long len;

    dup2(fd, STDERR_FILENO);
    fn();
    dup2(saved, STDERR_FILENO);
    close(saved);
    fp = fdopen(fd, "r");
    fseek(fp, 0, SEEK_END);
    len = ftell(fp);
    rewind(fp);
    text = calloc(1, (size_t)len + 1);
    assert_int_equal(fread(text, 1, (size_t)len, fp), (size_t)len);
    fclose(fp);
    unlink(path);
    return text;
}

static void log_some_text(void)
{
    rl_log_set_text("relay-bridge");
    rl_log_set_level(RL_LOG_INFO);
    rl_log_debug("not shown");
    rl_log_warn("reconnecting in %d ms", 1000);
    rl_log_fields(RL_LOG_ERROR, json_pack("{s:s, s:i, s:s}", "msg", "gave up", "status", 410, "code", "gone"));
    rl_log_set_text(NULL);
}

static void log_some_json(void)
{
    rl_log_info("one %s", "line");
}

static void test_log_lines(void **state)
{
    char *text = captured_stderr(log_some_text);
    json_t *line;

    assert_string_equal(text, "relay-bridge: warn: reconnecting in 1000 ms\n"
                              "relay-bridge: error: gave up status=410 code=gone\n");
    free(text);
    text = captured_stderr(log_some_json);
    line = json_loads(text, 0, NULL);
    assert_non_null(line);
    assert_string_equal(json_string_value(json_object_get(line, "level")), "info");
    assert_string_equal(json_string_value(json_object_get(line, "msg")), "one line");
    json_decref(line);
    free(text);
}

static void test_base64url(void **state)
{
    static const struct {
        const char *plain, *encoded;
    } vectors[] = {{"", ""},           {"f", "Zg"},          {"fo", "Zm8"},          {"foo", "Zm9v"},
                   {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"}, {"\xfb\xff", "-_8"}};
    char out[64];
    unsigned char back[64];

    for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); ++i) {
        size_t len = strlen(vectors[i].plain);
        assert_int_equal(rl_base64url_encode(vectors[i].plain, len, out), strlen(vectors[i].encoded));
        assert_string_equal(out, vectors[i].encoded);
        assert_int_equal(rl_base64url_decode(out, strlen(out), back), (long)len);
        assert_memory_equal(back, vectors[i].plain, len);
    }
    assert_int_equal(rl_base64url_decode("Zm9v", 4, back), 3);
    assert_int_equal(rl_base64url_decode("Zg==", 4, back), 1);
    assert_int_equal(rl_base64url_decode("Z", 1, back), -1);
    assert_int_equal(rl_base64url_decode("Zm+v", 4, back), -1);
    assert_int_equal(rl_base64url_decode("Zm/v", 4, back), -1);
}

static void test_base64_standard_and_hex(void **state)
{
    static const struct {
        const char *plain, *encoded;
    } vectors[] = {{"", ""},
                   {"f", "Zg=="},
                   {"fo", "Zm8="},
                   {"foo", "Zm9v"},
                   {"foobar", "Zm9vYmFy"},
                   {"\xfb\xff", "+/8="}};
    char out[64];
    unsigned char back[64];

    for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); ++i) {
        size_t len = strlen(vectors[i].plain);
        assert_int_equal(rl_base64_encode(vectors[i].plain, len, out), strlen(vectors[i].encoded));
        assert_string_equal(out, vectors[i].encoded);
        assert_int_equal(rl_base64_decode(out, strlen(out), back), (long)len);
        assert_memory_equal(back, vectors[i].plain, len);
    }
    assert_int_equal(rl_base64_decode("Zg", 2, back), -1);
    assert_int_equal(rl_base64_decode("Z===", 4, back), -1);
    assert_int_equal(rl_base64_decode("Zm-v", 4, back), -1);
    assert_int_equal(rl_base64_decode("Zg=a", 4, back), -1);

    rl_hex_encode("\x01\xab\xff", 3, out);
    assert_string_equal(out, "01abff");
    assert_int_equal(rl_hex_decode("01ABff", 6, back, 3), 0);
    assert_memory_equal(back, "\x01\xab\xff", 3);
    assert_int_equal(rl_hex_decode("01abf", 5, back, 3), -1);
    assert_int_equal(rl_hex_decode("01abfg", 6, back, 3), -1);
}

static void test_rand_ids(void **state)
{
    char id[32], other[32], code[8];

    assert_int_equal(rl_rand_id(id, sizeof(id), "inst_", 16), 0);
    assert_int_equal(strlen(id), 21);
    assert_memory_equal(id, "inst_", 5);
    assert_int_equal(rl_rand_id(other, sizeof(other), "inst_", 16), 0);
    assert_string_not_equal(id, other);
    assert_int_equal(rl_rand_id(id, 10, "inst_", 16), -1);
    rl_rand_upper(code, 7);
    assert_int_equal(strlen(code), 7);
    for (int i = 0; i < 7; ++i)
        assert_true(code[i] >= 'A' && code[i] <= 'Z');
}

static void test_error_table(void **state)
{
    assert_int_equal(rl_error_status(RL_E_INVALID_REQUEST), 400);
    assert_string_equal(rl_error_code(RL_E_INVALID_REQUEST), "invalid_request");
    assert_int_equal(rl_error_status(RL_E_INSTALLATION_REVOKED), 403);
    assert_int_equal(rl_error_status(RL_E_INSTALLATION_GONE), 410);
    assert_string_equal(rl_error_code(RL_E_INSTALLATION_GONE), "installation_revoked");
    assert_int_equal(rl_error_status(RL_E_AGENT_DEGRADED), 503);
    assert_int_equal(rl_error_status(RL_E_TOOL_NOT_DECLARED), 422);
    /* catalogd's rows are in the same table. */
    assert_int_equal(rl_error_status(RL_E_ENTITY_NOT_FOUND), 404);
    assert_string_equal(rl_error_code(RL_E_ENTITY_NOT_FOUND), "entity_not_found");
    assert_int_equal(rl_error_status(RL_E_NOT_REDISTRIBUTABLE), 403);
    assert_int_equal(rl_error_status(RL_E_INVALID_QUERY), 400);
    assert_int_equal(rl_error_status(-1), 500);
    assert_string_equal(rl_error_code(12345), "internal_error");
}

static void test_iso8601(void **state)
{
    char buf[RL_ISO8601_LEN];

    rl_clock_iso8601(1795240962140LL, buf);
    assert_string_equal(buf, "2026-11-21T06:02:42.140Z");
    rl_clock_iso8601(0, buf);
    assert_string_equal(buf, "1970-01-01T00:00:00.000Z");
}

static size_t freed_values;

static int drop_odd(const char *key, void *value, void *arg)
{
    return ((intptr_t)value & 1) != 0;
}

static void test_strmap(void **state)
{
    rl_strmap_t *map = rl_strmap_new(1000);
    char key[16];

    for (intptr_t i = 1; i <= 500; ++i) {
        snprintf(key, sizeof(key), "k%ld", (long)i);
        assert_int_equal(rl_strmap_put(map, key, (void *)i), 0);
    }
    assert_int_equal(rl_strmap_size(map), 500);
    assert_ptr_equal(rl_strmap_get(map, "k77"), (void *)77);
    assert_null(rl_strmap_get(map, "k501"));
    assert_int_equal(rl_strmap_put(map, "k77", (void *)78), 0);
    assert_ptr_equal(rl_strmap_get(map, "k77"), (void *)78);
    assert_ptr_equal(rl_strmap_remove(map, "k78"), (void *)78);
    assert_int_equal(rl_strmap_size(map), 499);
    rl_strmap_sweep(map, drop_odd, NULL, NULL);
    assert_null(rl_strmap_get(map, "k1"));
    assert_non_null(rl_strmap_get(map, "k2"));
    rl_strmap_free(map, NULL);

    map = rl_strmap_new(2);
    assert_int_equal(rl_strmap_put(map, "a", (void *)1), 0);
    assert_int_equal(rl_strmap_put(map, "b", (void *)1), 0);
    assert_int_equal(rl_strmap_put(map, "c", (void *)1), -1);
    assert_int_equal(rl_strmap_put(map, "a", (void *)2), 0);
    rl_strmap_free(map, NULL);
}

static int drop_multiple_of_five(const char *key, void *value, void *arg)
{
    (void)key;
    ++*(size_t *)arg;
    return (intptr_t)value % 5 == 0;
}

static void count_free(void *value)
{
    (void)value;
    ++freed_values;
}

/*
 * The table doubles a few slots at a time (strmap.c): every entry stays
 * reachable, removable and swept while part of it is still in the old table.
 */
/* Whether key-j is still in the map once key-i went in: every third was removed after its own
 * insertion, every fifth by the last sweep (after key-swept). */
static int strmap_holds(intptr_t j, intptr_t i, intptr_t swept)
{
    return !((j % 3 == 0 && j < i) || (j % 5 == 0 && j <= swept));
}

static void check_key(rl_strmap_t *map, intptr_t j, intptr_t i, intptr_t swept)
{
    char key[24];

    snprintf(key, sizeof(key), "key-%ld", (long)j);
    if (strmap_holds(j, i, swept))
        assert_ptr_equal(rl_strmap_get(map, key), (void *)j);
    else
        assert_null(rl_strmap_get(map, key));
}

/*
 * The table doubles a few slots at a time (strmap.c): every entry stays
 * reachable, removable and swept while part of it is still in the old table.
 */
static void test_strmap_while_it_grows(void **state)
{
    rl_strmap_t *map = rl_strmap_new(200000);
    size_t visited, expected = 0;
    intptr_t i, j, swept = 0;
    char key[24];

    (void)state;
    for (i = 1; i <= 100000; ++i) {
        snprintf(key, sizeof(key), "key-%ld", (long)i);
        assert_int_equal(rl_strmap_put(map, key, (void *)i), 0);
        /* The last few, one from half-way back, and the first. */
        for (j = i; j > 0 && j > i - 3; --j)
            check_key(map, j, i, swept);
        check_key(map, i / 2 + 1, i, swept);
        check_key(map, 1, i, swept);
        if (i % 3 == 0)
            assert_ptr_equal(rl_strmap_remove(map, key), (void *)i);
        /* A sweep in the middle of a doubling sees every entry once. */
        if (i == 65 || i == 4100 || i == 70000) {
            size_t before = rl_strmap_size(map);
            visited = 0;
            rl_strmap_sweep(map, drop_multiple_of_five, &visited, NULL);
            assert_int_equal(visited, before);
            swept = i;
        }
    }
    for (j = 1; j <= 100000; ++j) {
        check_key(map, j, i, swept);
        expected += strmap_holds(j, i, swept);
    }
    assert_int_equal(rl_strmap_size(map), expected);
    freed_values = 0;
    rl_strmap_free(map, count_free);
    assert_int_equal(freed_values, expected);
}

static int count_visit(const char *key, void *value, void *arg)
{
    (void)key;
    ++((unsigned char *)arg)[(intptr_t)value];
    return 0;
}

static int drop_all(const char *key, void *value, void *arg)
{
    (void)key;
    (void)value;
    (void)arg;
    return 1;
}

/* A sweep in parts (housekeeping sweeps a sixtieth a second) visits every entry once per round of parts. */
static void test_strmap_sweep_in_parts(void **state)
{
    static unsigned char visits[10001];
    rl_strmap_t *map = rl_strmap_new(20000);
    char key[24];
    intptr_t i;
    unsigned part;

    (void)state;
    for (i = 1; i <= 10000; ++i) {
        snprintf(key, sizeof(key), "key-%ld", (long)i);
        assert_int_equal(rl_strmap_put(map, key, (void *)i), 0);
    }
    for (part = 0; part < 60; ++part)
        rl_strmap_sweep_part(map, count_visit, visits, NULL, 60);
    for (i = 1; i <= 10000; ++i)
        assert_int_equal(visits[i], 1);
    for (part = 0; part < 59; ++part)
        rl_strmap_sweep_part(map, drop_all, NULL, NULL, 60);
    assert_true(rl_strmap_size(map) > 0);
    rl_strmap_sweep_part(map, drop_all, NULL, NULL, 60);
    assert_int_equal(rl_strmap_size(map), 0);
    rl_strmap_free(map, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration),
        cmocka_unit_test(test_base64url),
        cmocka_unit_test(test_base64_standard_and_hex),
        cmocka_unit_test(test_rand_ids),
        cmocka_unit_test(test_error_table),
        cmocka_unit_test(test_iso8601),
        cmocka_unit_test(test_strmap),
        cmocka_unit_test(test_strmap_while_it_grows),
        cmocka_unit_test(test_strmap_sweep_in_parts),
        cmocka_unit_test(test_duration_with_a_bare_unit),
        cmocka_unit_test(test_arg_value),
        cmocka_unit_test(test_clock),
        cmocka_unit_test(test_log_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
