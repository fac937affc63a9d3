/*
 * Unit tests for src/common/json_flat.c. The reader must take a body only
 * where jansson (json_loadb with JSON_REJECT_DUPLICATES, as the validator
 * calls it) takes it too and reads the same members; the writer must write
 * what jansson's compact dump writes, so that the idempotency hash of a
 * delta read on the fast path is the hash stored before it existed
 * (SHA-256 of json_dumps(JSON_COMPACT | JSON_SORT_KEYS)). Every check
 * compares with the installed jansson itself, over a corpus and over
 * random bodies and random mutations of them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/json_flat.h"
#include "relay/core/idempotency.h"

#define JANSSON_FLAGS (JSON_REJECT_DUPLICATES | JSON_DECODE_ANY)

/* jansson's verdict: its canonical dump (malloc'd), or NULL when it refuses the body. */
static char *jansson_canonical(const char *body, size_t len)
{
    json_t *value = json_loadb(body, len, JANSSON_FLAGS, NULL);
    char *text = value != NULL ? json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;

    json_decref(value);
    return text;
}

/* Whether jansson reads body as an object the reader is meant to take (scalars, no reals, few members). */
static int jansson_flat(const char *body, size_t len)
{
    json_t *value = json_loadb(body, len, JANSSON_FLAGS, NULL), *member;
    const char *key;
    int flat = json_is_object(value) && json_object_size(value) <= RL_JSON_FLAT_MEMBERS_MAX;

    json_object_foreach(value, key, member)
    {
        if (json_is_object(member) || json_is_array(member) || json_is_real(member))
            flat = 0;
    }
    json_decref(value);
    return flat;
}

/* The reader's verdict: its canonical text (malloc'd), or NULL when it says "not flat". */
static char *flat_canonical(const char *body, size_t len)
{
    char *scratch = malloc(len + 8), *text = NULL;
    rl_json_flat_t object;
    rl_json_out_t out;

    if (rl_json_flat_parse(body, len, scratch, len + 8, &object) == 0) {
        rl_json_out_init(&out);
        rl_json_flat_canonical(&object, &out);
        assert_false(out.failed);
        text = malloc(out.len + 1);
        memcpy(text, out.bytes, out.len);
        text[out.len] = '\0';
        rl_json_out_free(&out);
    }
    free(scratch);
    return text;
}

/*
 * The rule every body is held to: taken by the reader only if jansson takes
 * it, with the same canonical bytes; and taken whenever jansson reads it as
 * flat. Returns whether the reader took it.
 */
static int check_body(const char *body, size_t len)
{
    char *ours = flat_canonical(body, len), *theirs = jansson_canonical(body, len);
    int taken = ours != NULL;

    if (ours != NULL) {
        if (theirs == NULL)
            fail_msg("the reader took a body jansson refuses: %.*s", (int)len, body);
        assert_string_equal(ours, theirs);
    } else if (jansson_flat(body, len)) {
        fail_msg("the reader refused a flat body jansson takes: %.*s", (int)len, body);
    }
    free(ours);
    free(theirs);
    return taken;
}

static void expect_flat(const char *body)
{
    if (!check_body(body, strlen(body)))
        fail_msg("not flat: %s", body);
}

static void expect_fallback(const char *body, size_t len)
{
    if (check_body(body, len))
        fail_msg("taken: %.*s", (int)len, body);
}

#define FALLBACK(literal) expect_fallback(literal, sizeof(literal) - 1)

static void test_corpus_matches_jansson(void **state)
{
    (void)state;
    expect_flat("{}");
    expect_flat(" \t\r\n{ \n}\r\n ");
    expect_flat("{\"message_id\":\"msg_1\",\"delta\":\"Hello\",\"idempotency_key\":\"k1\"}");
    expect_flat("{\"idempotency_key\":\"k1\",\"delta\":\"Hello\",\"message_id\":\"msg_1\"}");
    expect_flat("{\"a\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}");
    expect_flat("{\"a\":\"x/y</script>\"}");
    expect_flat("{\"a\":\"\\u0001\\u001f\\u001F\\u007f\\u0080\\u00e9\\u20AC\\uFFFF\"}");
    expect_flat("{\"a\":\"\\ud83d\\ude00 and \\uD834\\uDD1E\"}");
    expect_flat("{\"a\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xef\xbf\xbf\xf4\x8f\xbf\xbf\"}");
    expect_flat("{\"\\u00e9\":1,\"e\":2,\"\xc3\xa9\xc3\xa9\":3,\"\":4,\"ab\":5,\"a\":6,\"B\":7}");
    expect_flat("{\"n\":0,\"m\":-0,\"p\":9223372036854775807,\"q\":-9223372036854775808,\"r\":12345}");
    expect_flat("{\"t\":true,\"f\":false,\"z\":null}");
    expect_flat("{\"a\":\"\xe2\x80\xa8\xe2\x80\xa9\x7f\"}");
    expect_flat("{\"k_ct\":\"AQ==\",\"delta\":null}");

    FALLBACK("");
    FALLBACK("   ");
    FALLBACK("[]");
    FALLBACK("\"a\"");
    FALLBACK("{\"a\":{}}");
    FALLBACK("{\"a\":[1]}");
    FALLBACK("{\"a\":1.5}");
    FALLBACK("{\"a\":1e3}");
    FALLBACK("{\"a\":1E3}");
    FALLBACK("{\"a\":9223372036854775808}");
    FALLBACK("{\"a\":-9223372036854775809}");
    FALLBACK("{\"a\":99999999999999999999999}");
    FALLBACK("{\"a\":01}");
    FALLBACK("{\"a\":-}");
    FALLBACK("{\"a\":+1}");
    FALLBACK("{\"a\":1,}");
    FALLBACK("{,\"a\":1}");
    FALLBACK("{\"a\" 1}");
    FALLBACK("{\"a\":1} x");
    FALLBACK("{\"a\":1}{}");
    FALLBACK("{\"a\":tru}");
    FALLBACK("{\"a\":True}");
    FALLBACK("{\"a\":\"x\",\"a\":\"y\"}");
    FALLBACK("{\"a\":\"x\",\"\\u0061\":\"y\"}");
    FALLBACK("{\"a\":\"\\u0000\"}");
    FALLBACK("{\"a\":\"\\ud800\"}");
    FALLBACK("{\"a\":\"\\udc00\"}");
    FALLBACK("{\"a\":\"\\ud800\\u0041\"}");
    FALLBACK("{\"a\":\"\\ud800x\"}");
    FALLBACK("{\"a\":\"\\uZZZZ\"}");
    FALLBACK("{\"a\":\"\\x\"}");
    FALLBACK("{\"a\":\"\\'\"}");
    FALLBACK("{\"a\":\"tab\there\"}");
    FALLBACK("{\"a\":\"nl\nhere\"}");
    FALLBACK("{\"a\":\"\x80\"}");
    FALLBACK("{\"a\":\"\xc0\xaf\"}");
    FALLBACK("{\"a\":\"\xc1\xbf\"}");
    FALLBACK("{\"a\":\"\xe0\x80\xaf\"}");
    FALLBACK("{\"a\":\"\xed\xa0\x80\"}");
    FALLBACK("{\"a\":\"\xf4\x90\x80\x80\"}");
    FALLBACK("{\"a\":\"\xf5\x80\x80\x80\"}");
    FALLBACK("{\"a\":\"\xc3\"}");
    FALLBACK("{\"a\":\"\xe2\x82\"}");
    FALLBACK("{\"a\":\"unterminated}");
    FALLBACK("\xef\xbb\xbf{}");
    FALLBACK("{\"a\":\"x\"\x00}");
    FALLBACK("{\"a\":\"x\x00y\"}");
    FALLBACK("{\"1\":1,\"2\":2,\"3\":3,\"4\":4,\"5\":5,\"6\":6,\"7\":7,\"8\":8,\"9\":9,\"10\":10,\"11\":11,\"12\":12,"
             "\"13\":13,\"14\":14,\"15\":15,\"16\":16,\"17\":17}");
}

/* Every one-byte string, and every code point class, written as jansson writes it. */
static void test_writer_escapes_as_jansson(void **state)
{
    static const char *const samples[] = {"",
                                          "plain",
                                          "a\"b",
                                          "a\\b",
                                          "/",
                                          "\xc3\xa9",
                                          "\xf0\x9f\x98\x80",
                                          "\x7f",
                                          "\xe2\x80\xa8",
                                          "mixed\x01\x1f\"\\/\xe2\x82\xac end"};
    rl_json_out_t out;
    char byte[1];
    size_t i;

    (void)state;
    for (i = 1; i < 0x80; ++i) {
        json_t *string;
        char *theirs;
        byte[0] = (char)i;
        string = json_stringn(byte, 1);
        theirs = json_dumps(string, JSON_COMPACT | JSON_ENCODE_ANY);
        rl_json_out_init(&out);
        rl_json_out_string(&out, byte, 1);
        assert_int_equal(out.len, strlen(theirs));
        assert_memory_equal(out.bytes, theirs, out.len);
        rl_json_out_free(&out);
        free(theirs);
        json_decref(string);
    }
    for (i = 0; i < sizeof(samples) / sizeof(samples[0]); ++i) {
        json_t *string = json_string(samples[i]);
        char *theirs = json_dumps(string, JSON_COMPACT | JSON_ENCODE_ANY);
        rl_json_out_init(&out);
        rl_json_out_string(&out, samples[i], strlen(samples[i]));
        assert_int_equal(out.len, strlen(theirs));
        assert_memory_equal(out.bytes, theirs, out.len);
        rl_json_out_free(&out);
        free(theirs);
        json_decref(string);
    }
    /* Each byte at each place of a text longer than a word: the scan that takes eight bytes at a time. */
    for (i = 1; i < 0x80; ++i) {
        char text[24];
        size_t at;
        for (at = 0; at < sizeof(text); ++at) {
            json_t *string;
            char *theirs;
            memcpy(text,
                   "\xc3\xa9"
                   "abcdefghijklmnopqrstuv",
                   sizeof(text));
            text[at] = (char)i;
            if ((string = json_stringn(text, sizeof(text))) == NULL)
                continue; /* the byte broke the two-byte character: not UTF-8 */
            theirs = json_dumps(string, JSON_COMPACT | JSON_ENCODE_ANY);
            rl_json_out_init(&out);
            rl_json_out_string(&out, text, sizeof(text));
            assert_int_equal(out.len, strlen(theirs));
            assert_memory_equal(out.bytes, theirs, out.len);
            rl_json_out_free(&out);
            free(theirs);
            json_decref(string);
        }
    }
}

static void test_writer_integers_and_growth(void **state)
{
    static const int64_t values[] = {0, 1, -1, 10, -10, 1234567890123LL, INT64_MAX, INT64_MIN};
    rl_json_out_t out;
    char expected[32];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(values) / sizeof(values[0]); ++i) {
        rl_json_out_init(&out);
        rl_json_out_integer(&out, values[i]);
        snprintf(expected, sizeof(expected), "%lld", (long long)values[i]);
        assert_int_equal(out.len, strlen(expected));
        assert_memory_equal(out.bytes, expected, out.len);
        rl_json_out_free(&out);
    }
    /* Past the local bytes, the writer moves to the heap and keeps what it had. */
    rl_json_out_init(&out);
    for (i = 0; i < 1000; ++i)
        rl_json_out_raw(&out, "0123456789", 10);
    assert_false(out.failed);
    assert_int_equal(out.len, 10000);
    assert_true(out.bytes != out.local);
    assert_memory_equal(out.bytes + 9990, "0123456789", 10);
    rl_json_out_free(&out);
}

static void test_accessors(void **state)
{
    static const char body[] = "{\"message_id\":\"m\\u00e9\",\"n\":-5,\"z\":null}";
    char scratch[sizeof(body) + 8];
    rl_json_flat_t object;

    (void)state;
    assert_int_equal(rl_json_flat_parse(body, sizeof(body) - 1, scratch, sizeof(scratch), &object), 0);
    assert_int_equal(object.count, 3);
    assert_string_equal(rl_json_flat_string(&object, "message_id"), "m\xc3\xa9");
    assert_int_equal(rl_json_flat_get(&object, "message_id")->len, 3);
    assert_null(rl_json_flat_string(&object, "n"));
    assert_int_equal(rl_json_flat_get(&object, "n")->integer, -5);
    assert_int_equal(rl_json_flat_get(&object, "z")->type, RL_JSON_FLAT_NULL);
    assert_null(rl_json_flat_get(&object, "absent"));
}

/* ---- random bodies ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void append(char *buf, size_t *len, size_t cap, const char *text, size_t n)
{
    if (*len + n < cap) {
        memcpy(buf + *len, text, n);
        *len += n;
    }
}

/* A random code point of a class that matters: ASCII, specials, controls, 2/3/4-byte UTF-8. */
static unsigned random_code_point(void)
{
    static const unsigned specials[] = {'"', '\\', '/', '\b', '\f', '\n', '\r', '\t', 0x01, 0x1f, 0x7f, 0x2028, 0xffff};

    switch (rnd() % 6) {
    case 0:
        return specials[rnd() % (sizeof(specials) / sizeof(specials[0]))];
    case 1:
        return 0x80 + rnd() % 0x780;
    case 2: {
        unsigned cp = 0x800 + rnd() % 0xf800;
        return cp >= 0xd800 && cp <= 0xdfff ? 0xe000 : cp;
    }
    case 3:
        return 0x10000 + rnd() % 0x100000;
    default:
        return 0x20 + rnd() % 0x5f;
    }
}

/* Writes cp into a JSON string in one of the forms a sender may use. */
static void encode_code_point(char *buf, size_t *len, size_t cap, unsigned cp)
{
    char text[16];
    int n;

    if (cp >= 0x10000 && rnd() % 2 == 0) {
        unsigned v = cp - 0x10000;
        n = snprintf(text, sizeof(text), rnd() % 2 ? "\\u%04X\\u%04x" : "\\u%04x\\u%04X", 0xd800 + (v >> 10),
                     0xdc00 + (v & 0x3ff));
    } else if (cp < 0x10000 && (cp < 0x20 || rnd() % 4 == 0)) {
        n = snprintf(text, sizeof(text), rnd() % 2 ? "\\u%04x" : "\\u%04X", cp);
    } else if (cp == '"' || cp == '\\') {
        n = snprintf(text, sizeof(text), "\\%c", (char)cp);
    } else if (cp == '/' && rnd() % 2) {
        n = snprintf(text, sizeof(text), "\\/");
    } else if (cp < 0x80) {
        text[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        text[0] = (char)(0xC0 | (cp >> 6));
        text[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        text[0] = (char)(0xE0 | (cp >> 12));
        text[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        text[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        text[0] = (char)(0xF0 | (cp >> 18));
        text[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        text[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        text[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    append(buf, len, cap, text, (size_t)n);
}

static void random_string(char *buf, size_t *len, size_t cap)
{
    size_t n = rnd() % 12, i;

    append(buf, len, cap, "\"", 1);
    for (i = 0; i < n; ++i)
        encode_code_point(buf, len, cap, random_code_point());
    append(buf, len, cap, "\"", 1);
}

static void random_space(char *buf, size_t *len, size_t cap)
{
    static const char spaces[] = " \t\r\n";

    while (rnd() % 4 == 0)
        append(buf, len, cap, &spaces[rnd() % 4], 1);
}

static size_t random_body(char *buf, size_t cap)
{
    static const char *const numbers[] = {"0",
                                          "-0",
                                          "7",
                                          "-42",
                                          "9223372036854775807",
                                          "-9223372036854775808",
                                          "123456789012",
                                          "1.5",
                                          "1e2",
                                          "9223372036854775808"};
    static const char *const keys[] = {"\"a\"", "\"b\"", "\"\"", "\"ab\"", "\"\\u0061\"", "\"A\"", "\"\xc3\xa9\""};
    size_t len = 0, n = rnd() % 8, i;

    random_space(buf, &len, cap);
    append(buf, &len, cap, "{", 1);
    for (i = 0; i < n; ++i) {
        random_space(buf, &len, cap);
        if (i > 0) {
            append(buf, &len, cap, ",", 1);
            random_space(buf, &len, cap);
        }
        if (rnd() % 3 == 0) {
            const char *key = keys[rnd() % 7];
            append(buf, &len, cap, key, strlen(key));
        } else {
            random_string(buf, &len, cap);
        }
        random_space(buf, &len, cap);
        append(buf, &len, cap, ":", 1);
        random_space(buf, &len, cap);
        switch (rnd() % 5) {
        case 0: {
            const char *number = numbers[rnd() % 10];
            append(buf, &len, cap, number, strlen(number));
            break;
        }
        case 1: {
            const char *literal = rnd() % 2 ? "true" : rnd() % 2 ? "false" : "null";
            append(buf, &len, cap, literal, strlen(literal));
            break;
        }
        default:
            random_string(buf, &len, cap);
        }
        random_space(buf, &len, cap);
    }
    append(buf, &len, cap, "}", 1);
    random_space(buf, &len, cap);
    return len;
}

static void test_random_bodies_match_jansson(void **state)
{
    char body[2048];
    size_t i, taken = 0;

    (void)state;
    for (i = 0; i < 20000; ++i) {
        size_t len = random_body(body, sizeof(body));
        taken += (size_t)check_body(body, len);
    }
    /* Most random bodies are flat (duplicates, reals and big numbers make the rest): the reader must serve them. */
    assert_true(taken > 10000);
}

/* Random mutations of valid bodies: whatever the reader takes, jansson takes and reads the same. */
static void test_mutations_never_disagree(void **state)
{
    static const char bytes[] = "\"\\{}[],:0123456789-+.eEtrufalsn \t\n\x01\x7f\x80\xbf\xc0\xc3\xe0\xed\xf0\xf4\xff";
    char body[2048];
    size_t i, j;

    (void)state;
    for (i = 0; i < 20000; ++i) {
        size_t len = random_body(body, sizeof(body)), edits = 1 + rnd() % 3;
        for (j = 0; j < edits && len > 0; ++j) {
            size_t at = rnd() % len;
            switch (rnd() % 3) {
            case 0:
                body[at] = bytes[rnd() % (sizeof(bytes) - 1)];
                break;
            case 1:
                memmove(body + at, body + at + 1, len - at - 1);
                --len;
                break;
            default:
                if (len + 1 < sizeof(body)) {
                    memmove(body + at + 1, body + at, len - at);
                    body[at] = bytes[rnd() % (sizeof(bytes) - 1)];
                    ++len;
                }
            }
        }
        check_body(body, len);
    }
}

/* The hash a fast-path delta stores is the one the generic path stored (and stores) for the same body. */
static void test_body_hash_matches_the_generic_one(void **state)
{
    static const char *const bodies[] = {
        "{\"message_id\":\"msg_1\",\"delta\":\"Hel\\\"lo\\n\",\"idempotency_key\":\"k1\"}",
        "{\"idempotency_key\":\"\\u00e9\\ud83d\\ude00\",\"message_id\":\"m\",\"delta\":\"\\u0007/\\/\",\"x\":-3}",
        "{\"delta_ct\":\"AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0=\",\"message_id\":\"m\",\"idempotency_key\":\"k\","
        "\"delta\":null,\"flag\":true}",
    };
    char ours[RL_BODY_HASH_HEX + 1], theirs[RL_BODY_HASH_HEX + 1], scratch[512];
    rl_json_flat_t object;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); ++i) {
        json_t *body = json_loads(bodies[i], JSON_REJECT_DUPLICATES, NULL);
        assert_non_null(body);
        assert_int_equal(rl_json_flat_parse(bodies[i], strlen(bodies[i]), scratch, sizeof(scratch), &object), 0);
        assert_int_equal(rl_idempotency_body_hash(body, theirs), 0);
        assert_int_equal(rl_idempotency_body_hash_flat(&object, ours), 0);
        assert_string_equal(ours, theirs);
        assert_int_equal(rl_idempotency_body_digest(body, RL_BODY_BLAKE2B, theirs), 0);
        assert_int_equal(rl_idempotency_body_digest_flat(&object, RL_BODY_BLAKE2B, ours), 0);
        assert_string_equal(ours, theirs);
        json_decref(body);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus_matches_jansson),
        cmocka_unit_test(test_writer_escapes_as_jansson),
        cmocka_unit_test(test_writer_integers_and_growth),
        cmocka_unit_test(test_accessors),
        cmocka_unit_test(test_random_bodies_match_jansson),
        cmocka_unit_test(test_mutations_never_disagree),
        cmocka_unit_test(test_body_hash_matches_the_generic_one),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
