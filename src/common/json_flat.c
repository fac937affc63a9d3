/*
 * The flat-object reader and the compact writer (json_flat.h). Where the
 * reader says -1 it says nothing about the body being wrong: only that the
 * caller must ask jansson, whose verdict and error text are the answer.
 * So every rule here errs on the side of -1: whatever jansson 2.14 would
 * refuse (load.c's lexer) is refused, and a few things it takes are left to
 * it too (reals, nesting, more than RL_JSON_FLAT_MEMBERS_MAX members).
 */
#include "common/json_flat.h"

#include <stdlib.h>
#include <string.h>

/*
 * Bytes that end a plain run: in a string the reader stops at a quote, a
 * backslash, a control byte or a non-ASCII byte (checked as UTF-8); the
 * writer stops at the first three. One table load a byte instead of four
 * comparisons: a delta's text is most of what either reads.
 */
#define STOP_READ  1
#define STOP_WRITE 2
static const unsigned char stops[256] = {
    [0x00 ... 0x1F] = STOP_READ | STOP_WRITE,
    ['"'] = STOP_READ | STOP_WRITE,
    ['\\'] = STOP_READ | STOP_WRITE,
    [0x80 ... 0xFF] = STOP_READ,
};

struct reader {
    const unsigned char *at, *end;
    char *scratch, *scratch_end;
};

static void skip_space(struct reader *r)
{
    while (r->at < r->end && (*r->at == ' ' || *r->at == '\t' || *r->at == '\n' || *r->at == '\r'))
        ++r->at;
}

static int hex4(const unsigned char *p, unsigned *value)
{
    unsigned v = 0;
    int i;

    for (i = 0; i < 4; ++i) {
        unsigned char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    *value = v;
    return 0;
}

static char *put_utf8(char *out, unsigned cp)
{
    if (cp < 0x80) {
        *out++ = (char)cp;
    } else if (cp < 0x800) {
        *out++ = (char)(0xC0 | (cp >> 6));
        *out++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *out++ = (char)(0xE0 | (cp >> 12));
        *out++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *out++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *out++ = (char)(0xF0 | (cp >> 18));
        *out++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *out++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *out++ = (char)(0x80 | (cp & 0x3F));
    }
    return out;
}

/*
 * Length of the UTF-8 sequence at p (at most n bytes), or 0 when jansson's
 * utf8_check_first/utf8_check_full would refuse it: a stray continuation
 * byte, an overlong form, a surrogate, or past U+10FFFF.
 */
static size_t utf8_sequence(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    size_t size, i;
    unsigned cp;

    if (c >= 0xC2 && c <= 0xDF) {
        size = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        size = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        size = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < size)
        return 0;
    for (i = 1; i < size; ++i) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((size == 3 && cp < 0x800) || (size == 4 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return size;
}

/* Reads the string after an opening quote into scratch; *text and *len say where it went (NUL-terminated). */
static int read_string(struct reader *r, const char **text, size_t *len)
{
    char *out = r->scratch, *start = r->scratch;

    for (;;) {
        const unsigned char *run = r->at;
        size_t n;
        /* Plain ASCII is copied in one go: most of a delta is. */
        while (r->at < r->end && !(stops[*r->at] & STOP_READ))
            ++r->at;
        n = (size_t)(r->at - run);
        if ((size_t)(r->scratch_end - out) < n + 1)
            return -1;
        memcpy(out, run, n);
        out += n;
        if (r->at >= r->end)
            return -1;
        if (*r->at == '"') {
            ++r->at;
            break;
        }
        if (*r->at < 0x20)
            return -1; /* a control byte: jansson says "control character" */
        if (*r->at >= 0x80) {
            n = utf8_sequence(r->at, (size_t)(r->end - r->at));
            if (n == 0 || (size_t)(r->scratch_end - out) < n + 1)
                return -1;
            memcpy(out, r->at, n);
            out += n;
            r->at += n;
            continue;
        }
        /* A backslash. */
        if (r->end - r->at < 2 || (size_t)(r->scratch_end - out) < 5)
            return -1;
        switch (r->at[1]) {
        case '"':
        case '\\':
        case '/':
            *out++ = (char)r->at[1];
            r->at += 2;
            continue;
        case 'b':
            *out++ = '\b';
            r->at += 2;
            continue;
        case 'f':
            *out++ = '\f';
            r->at += 2;
            continue;
        case 'n':
            *out++ = '\n';
            r->at += 2;
            continue;
        case 'r':
            *out++ = '\r';
            r->at += 2;
            continue;
        case 't':
            *out++ = '\t';
            r->at += 2;
            continue;
        case 'u': {
            unsigned cp, low;
            if (r->end - r->at < 6 || hex4(r->at + 2, &cp) != 0)
                return -1;
            r->at += 6;
            /* \u0000 is refused by jansson without JSON_ALLOW_NUL; a lone surrogate always. */
            if (cp == 0 || (cp >= 0xDC00 && cp <= 0xDFFF))
                return -1;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (r->end - r->at < 6 || r->at[0] != '\\' || r->at[1] != 'u' || hex4(r->at + 2, &low) != 0 ||
                    low < 0xDC00 || low > 0xDFFF)
                    return -1;
                r->at += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            out = put_utf8(out, cp);
            continue;
        }
        default:
            return -1;
        }
    }
    *out = '\0';
    *text = start;
    *len = (size_t)(out - start);
    r->scratch = out + 1;
    return 0;
}

/* An integer as jansson takes one: -?(0|[1-9][0-9]*) within int64 (strtoll without ERANGE); reals are not flat. */
static int read_integer(struct reader *r, int64_t *value)
{
    int negative = 0;
    uint64_t magnitude = 0, limit;

    if (*r->at == '-') {
        negative = 1;
        ++r->at;
    }
    limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (r->at >= r->end || *r->at < '0' || *r->at > '9')
        return -1;
    if (*r->at == '0') {
        ++r->at;
    } else {
        while (r->at < r->end && *r->at >= '0' && *r->at <= '9') {
            unsigned digit = *r->at - '0';
            if (magnitude > (limit - digit) / 10)
                return -1;
            magnitude = magnitude * 10 + digit;
            ++r->at;
        }
    }
    if (r->at < r->end && (*r->at == '.' || *r->at == 'e' || *r->at == 'E' || (*r->at >= '0' && *r->at <= '9')))
        return -1;
    *value = negative ? (magnitude == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)magnitude) : (int64_t)magnitude;
    return 0;
}

static int read_literal(struct reader *r, const char *word, size_t len)
{
    if ((size_t)(r->end - r->at) < len || memcmp(r->at, word, len) != 0)
        return -1;
    r->at += len;
    return 0;
}

static int read_value(struct reader *r, rl_json_flat_member_t *member)
{
    member->string = NULL;
    member->len = 0;
    member->integer = 0;
    switch (*r->at) {
    case '"':
        ++r->at;
        member->type = RL_JSON_FLAT_STRING;
        return read_string(r, &member->string, &member->len);
    case 't':
        member->type = RL_JSON_FLAT_TRUE;
        return read_literal(r, "true", 4);
    case 'f':
        member->type = RL_JSON_FLAT_FALSE;
        return read_literal(r, "false", 5);
    case 'n':
        member->type = RL_JSON_FLAT_NULL;
        return read_literal(r, "null", 4);
    default:
        member->type = RL_JSON_FLAT_INTEGER;
        return read_integer(r, &member->integer);
    }
}

/* JSON_REJECT_DUPLICATES compares decoded keys: so does this. */
static int has_duplicate(const rl_json_flat_t *object)
{
    size_t i, j;

    for (i = 1; i < object->count; ++i)
        for (j = 0; j < i; ++j)
            if (object->members[i].key_len == object->members[j].key_len &&
                memcmp(object->members[i].key, object->members[j].key, object->members[i].key_len) == 0)
                return 1;
    return 0;
}

int rl_json_flat_parse(const char *bytes, size_t len, char *scratch, size_t scratch_len, rl_json_flat_t *out)
{
    struct reader r = {(const unsigned char *)bytes, (const unsigned char *)bytes + len, scratch,
                       scratch + scratch_len};
    rl_json_flat_member_t *member;

    out->count = 0;
    if (bytes == NULL)
        return -1;
    skip_space(&r);
    if (r.at >= r.end || *r.at != '{')
        return -1;
    ++r.at;
    skip_space(&r);
    if (r.at < r.end && *r.at == '}') {
        ++r.at;
        goto end;
    }
    for (;;) {
        if (out->count == RL_JSON_FLAT_MEMBERS_MAX || r.at >= r.end || *r.at != '"')
            return -1;
        member = &out->members[out->count];
        ++r.at;
        if (read_string(&r, &member->key, &member->key_len) != 0)
            return -1;
        skip_space(&r);
        if (r.at >= r.end || *r.at != ':')
            return -1;
        ++r.at;
        skip_space(&r);
        if (r.at >= r.end || read_value(&r, member) != 0)
            return -1;
        ++out->count;
        skip_space(&r);
        if (r.at >= r.end)
            return -1;
        if (*r.at == '}') {
            ++r.at;
            break;
        }
        if (*r.at != ',')
            return -1;
        ++r.at;
        skip_space(&r);
    }
end:
    skip_space(&r);
    if (r.at != r.end || has_duplicate(out))
        return -1;
    return 0;
}

int rl_json_utf8_valid(const char *text, size_t len)
{
    const unsigned char *p = (const unsigned char *)text, *end = p + len;

    while (p < end) {
        size_t n = *p < 0x80 ? 1 : utf8_sequence(p, (size_t)(end - p));
        if (n == 0)
            return 0;
        p += n;
    }
    return 1;
}

const rl_json_flat_member_t *rl_json_flat_get(const rl_json_flat_t *object, const char *key)
{
    size_t i;

    for (i = 0; i < object->count; ++i)
        if (strcmp(object->members[i].key, key) == 0)
            return &object->members[i];
    return NULL;
}

const char *rl_json_flat_string(const rl_json_flat_t *object, const char *key)
{
    const rl_json_flat_member_t *member = rl_json_flat_get(object, key);

    return member != NULL && member->type == RL_JSON_FLAT_STRING ? member->string : NULL;
}

/* ---- the writer ---- */

void rl_json_out_init(rl_json_out_t *out)
{
    out->bytes = out->local;
    out->len = 0;
    out->cap = sizeof(out->local);
    out->failed = 0;
}

void rl_json_out_free(rl_json_out_t *out)
{
    if (out->bytes != out->local)
        free(out->bytes);
    rl_json_out_init(out);
}

/* Room for n more bytes; 0, or -1 (and the writer failed). */
static int reserve(rl_json_out_t *out, size_t n)
{
    size_t cap;
    char *grown;

    if (out->failed)
        return -1;
    if (out->cap - out->len >= n)
        return 0;
    cap = (out->len + n) * 2;
    grown = out->bytes == out->local ? malloc(cap) : realloc(out->bytes, cap);
    if (grown == NULL) {
        out->failed = 1;
        return -1;
    }
    if (out->bytes == out->local)
        memcpy(grown, out->local, out->len);
    out->bytes = grown;
    out->cap = cap;
    return 0;
}

void rl_json_out_raw(rl_json_out_t *out, const char *bytes, size_t len)
{
    /* Mostly one byte of punctuation, with room: stored without a call to memcpy. */
    if (len == 1 && !out->failed && out->len < out->cap) {
        out->bytes[out->len++] = bytes[0];
        return;
    }
    if (reserve(out, len) != 0)
        return;
    memcpy(out->bytes + out->len, bytes, len);
    out->len += len;
}

/* What jansson's dump_string writes for a byte below 0x20, '"' or '\\' (NULL: the byte as it is). */
static const char *escape_of(unsigned char c)
{
    static const char *const table[0x20] = {
        "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
        "\\b",     "\\t",     "\\n",     "\\u000B", "\\f",     "\\r",     "\\u000E", "\\u000F",
        "\\u0010", "\\u0011", "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017",
        "\\u0018", "\\u0019", "\\u001A", "\\u001B", "\\u001C", "\\u001D", "\\u001E", "\\u001F",
    };

    if (c < 0x20)
        return table[c];
    if (c == '"')
        return "\\\"";
    if (c == '\\')
        return "\\\\";
    return NULL;
}

/*
 * Eight bytes at a time: whether any of the word's bytes is below 0x20, '"'
 * or '\\' (the bit tricks are exact for "any": a byte with its high bit set,
 * UTF-8, never counts). Most of a delta's text needs no escape, and a word
 * costs what two bytes through the table do.
 */
#define ONES  0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
static int word_needs_escape(uint64_t w)
{
    uint64_t quote = w ^ (ONES * '"'), backslash = w ^ (ONES * '\\');
    uint64_t low = (w - ONES * 0x20) & ~w, quoted = (quote - ONES) & ~quote, escaped = (backslash - ONES) & ~backslash;

    return ((low | quoted | escaped) & HIGHS) != 0;
}

/* The first byte at or after p that needs an escape, or end. */
static const unsigned char *plain_until(const unsigned char *p, const unsigned char *end)
{
    uint64_t w;

    while (end - p >= 8) {
        memcpy(&w, p, sizeof(w));
        if (word_needs_escape(w))
            break;
        p += 8;
    }
    while (p < end && !(stops[*p] & STOP_WRITE))
        ++p;
    return p;
}

void rl_json_out_string(rl_json_out_t *out, const char *text, size_t len)
{
    const unsigned char *p = (const unsigned char *)text, *end = p + len, *run;
    char *at;

    /* The worst case, every byte a six-byte escape, is reserved once: a delta is a few hundred bytes. */
    if (reserve(out, len * 6 + 2) != 0)
        return;
    at = out->bytes + out->len;
    *at++ = '"';
    while (p < end) {
        const char *escape;
        run = p;
        p = plain_until(p, end);
        memcpy(at, run, (size_t)(p - run));
        at += p - run;
        if (p == end)
            break;
        escape = escape_of(*p++);
        while (*escape != '\0')
            *at++ = *escape++;
    }
    *at++ = '"';
    out->len = (size_t)(at - out->bytes);
}

void rl_json_out_integer(rl_json_out_t *out, int64_t value)
{
    char digits[24];
    size_t n = sizeof(digits);
    uint64_t magnitude = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;

    do {
        digits[--n] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude != 0);
    if (value < 0)
        digits[--n] = '-';
    rl_json_out_raw(out, digits + n, sizeof(digits) - n);
}

void rl_json_out_member_value(rl_json_out_t *out, const rl_json_flat_member_t *member)
{
    switch (member->type) {
    case RL_JSON_FLAT_STRING:
        rl_json_out_string(out, member->string, member->len);
        break;
    case RL_JSON_FLAT_INTEGER:
        rl_json_out_integer(out, member->integer);
        break;
    case RL_JSON_FLAT_TRUE:
        rl_json_out_raw(out, "true", 4);
        break;
    case RL_JSON_FLAT_FALSE:
        rl_json_out_raw(out, "false", 5);
        break;
    case RL_JSON_FLAT_NULL:
        rl_json_out_raw(out, "null", 4);
        break;
    }
}

/* jansson 2.14 sorts keys by memcmp over the shorter length, then the shorter first (dump.c compare_keys). */
static int key_before(const rl_json_flat_member_t *a, const rl_json_flat_member_t *b)
{
    size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
    int order = memcmp(a->key, b->key, n);

    return order != 0 ? order < 0 : a->key_len < b->key_len;
}

void rl_json_flat_canonical(const rl_json_flat_t *object, rl_json_out_t *out)
{
    const rl_json_flat_member_t *sorted[RL_JSON_FLAT_MEMBERS_MAX];
    size_t i, j;

    /* An insertion sort: a handful of members, and no comparator through a pointer. */
    for (i = 0; i < object->count; ++i) {
        const rl_json_flat_member_t *member = &object->members[i];
        for (j = i; j > 0 && key_before(member, sorted[j - 1]); --j)
            sorted[j] = sorted[j - 1];
        sorted[j] = member;
    }
    rl_json_out_raw(out, "{", 1);
    for (i = 0; i < object->count; ++i) {
        if (i > 0)
            rl_json_out_raw(out, ",", 1);
        rl_json_out_string(out, sorted[i]->key, sorted[i]->key_len);
        rl_json_out_raw(out, ":", 1);
        rl_json_out_member_value(out, sorted[i]);
    }
    rl_json_out_raw(out, "}", 1);
}
