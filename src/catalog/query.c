#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "catalog/query.h"
#include "common/percent.h"
#include "catalog/type.h"

typedef struct term {
    const char *base;
    size_t len;
    int quoted; /* started with a double quote */
    int closed; /* ... and the quote was closed */
} term_t;

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

int rl_catalog_query_decode(const char *src, size_t len, char *dst, size_t dstsz)
{
    int decoded = rl_percent_decode(src, len, dst, dstsz, RL_PERCENT_FORM);

    if (decoded == RL_PERCENT_E_LENGTH)
        return RL_CATALOG_DECODE_TOO_LONG;
    /* A NUL byte in a query is as malformed as a broken escape. */
    return decoded < 0 ? RL_CATALOG_DECODE_BAD_ESCAPE : decoded;
}

/* Decodes one UTF-8 sequence at s; returns its length and the code point, or 0 when it is invalid. */
static size_t utf8_next(const unsigned char *s, size_t len, unsigned *cp)
{
    size_t n, i;
    unsigned min;

    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if ((s[0] & 0xE0) == 0xC0) {
        n = 2, min = 0x80, *cp = s[0] & 0x1F;
    } else if ((s[0] & 0xF0) == 0xE0) {
        n = 3, min = 0x800, *cp = s[0] & 0x0F;
    } else if ((s[0] & 0xF8) == 0xF0) {
        n = 4, min = 0x10000, *cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (n > len)
        return 0;
    for (i = 1; i < n; ++i) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        *cp = (*cp << 6) | (s[i] & 0x3F);
    }
    if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF))
        return 0;
    return n;
}

int rl_catalog_query_text_is_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < len) {
        unsigned cp;
        size_t n = utf8_next(p + i, len - i, &cp);
        if (n == 0 || cp < 0x20 || cp == 0x7F)
            return 0;
        i += n;
    }
    return 1;
}

/*
 * A term can be searched when it holds an ASCII letter or digit, or a
 * non-ASCII character outside the general and CJK punctuation blocks (the
 * dashes, quotes and ellipses that pasted text brings). FTS5 turns a term of
 * punctuation alone into an empty phrase, which makes an AND match nothing.
 */
static int is_searchable(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < len) {
        unsigned cp;
        size_t n = utf8_next(p + i, len - i, &cp);
        if (n == 0)
            return 0;
        if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'))
            return 1;
        if (cp >= 0x80 && !(cp >= 0x2000 && cp <= 0x206F) && !(cp >= 0x3000 && cp <= 0x303F))
            return 1;
        i += n;
    }
    return 0;
}

/* Finds the next term at or after *pos; returns 0 at the end of q. */
static int next_term(const char *q, size_t len, size_t *pos, term_t *term)
{
    size_t i = *pos;

    while (i < len && is_space(q[i]))
        ++i;
    if (i == len) {
        *pos = i;
        return 0;
    }
    memset(term, 0, sizeof(*term));
    if (q[i] == '"') {
        const char *close = memchr(q + i + 1, '"', len - i - 1);
        term->quoted = 1;
        term->base = q + i + 1;
        term->closed = close != NULL;
        term->len = close != NULL ? (size_t)(close - term->base) : len - i - 1;
        *pos = close != NULL ? (size_t)(close - q) + 1 : len;
        return 1;
    }
    term->base = q + i;
    while (i < len && !is_space(q[i]) && q[i] != '"')
        ++i;
    term->len = (size_t)(q + i - term->base);
    *pos = i;
    return 1;
}

static int append(char *out, size_t outsz, size_t *used, const char *s, size_t len)
{
    if (*used + len >= outsz)
        return -1;
    memcpy(out + *used, s, len);
    *used += len;
    out[*used] = '\0';
    return 0;
}

int rl_catalog_query_match(const char *q, int any, char *out, size_t outsz)
{
    size_t len = strlen(q), pos = 0, used = 0, i;
    int count = 0, ends_open = len > 0 && !is_space(q[len - 1]);
    term_t term, last;

    if (outsz == 0)
        return -1;
    out[0] = '\0';
    while (next_term(q, len, &pos, &term)) {
        if (!is_searchable(term.base, term.len))
            continue;
        if (count > 0 && append(out, outsz, &used, any ? " OR " : " AND ", any ? 4 : 5) != 0)
            return -1;
        if (append(out, outsz, &used, "\"", 1) != 0)
            return -1;
        for (i = 0; i < term.len; ++i) {
            /* spec of FTS5 strings: a double quote inside one is written twice. */
            if (append(out, outsz, &used, term.base[i] == '"' ? "\"\"" : term.base + i, term.base[i] == '"' ? 2 : 1) !=
                0)
                return -1;
        }
        if (append(out, outsz, &used, "\"", 1) != 0)
            return -1;
        last = term;
        ++count;
        /* Only a term that runs to the very end of q can still be being typed. */
        if (pos == len && ends_open && !(last.quoted && last.closed) && append(out, outsz, &used, "*", 1) != 0)
            return -1;
    }
    return count;
}

static int fail(int err, char *buf, size_t bufsz, const char *message)
{
    snprintf(buf, bufsz, "%s", message);
    return err;
}

int rl_catalog_query_parse(const char *query, size_t len, rl_catalog_search_t *out, char *err, size_t errsz)
{
    char match[RL_CATALOG_MATCH_MAX], value[RL_CATALOG_QUERY_MAX + 1];
    int seen_q = 0, seen_type = 0, seen_per = 0, terms;
    size_t pos = 0;

    out->q[0] = '\0';
    out->type = -1;
    out->per = RL_CATALOG_PER_DEFAULT;
    while (pos < len) {
        const char *pair = query + pos, *amp = memchr(pair, '&', len - pos), *eq;
        size_t pair_len = amp != NULL ? (size_t)(amp - pair) : len - pos;
        size_t name_len;
        int value_len;

        pos += pair_len + 1;
        eq = memchr(pair, '=', pair_len);
        name_len = eq != NULL ? (size_t)(eq - pair) : pair_len;
        if ((name_len == 1 && pair[0] == 'q') || (name_len == 4 && memcmp(pair, "type", 4) == 0) ||
            (name_len == 3 && memcmp(pair, "per", 3) == 0)) {
            const char *raw = eq != NULL ? eq + 1 : pair + pair_len;
            size_t raw_len = (size_t)(pair + pair_len - raw);
            value_len = rl_catalog_query_decode(raw, raw_len, value, sizeof(value));
            if (value_len == RL_CATALOG_DECODE_BAD_ESCAPE && name_len != 1)
                return fail(RL_E_INVALID_PARAMETER, err, errsz, "a parameter has a broken %-escape");
            if (name_len == 1) {
                if (seen_q++)
                    return fail(RL_E_INVALID_QUERY, err, errsz, "q is given more than once");
                if (value_len == RL_CATALOG_DECODE_TOO_LONG)
                    return fail(RL_E_INVALID_QUERY, err, errsz, "q is longer than 200 bytes");
                if (value_len < 0)
                    return fail(RL_E_INVALID_QUERY, err, errsz, "q has a broken %-escape");
                if (!rl_catalog_query_text_is_valid(value, (size_t)value_len))
                    return fail(RL_E_INVALID_QUERY, err, errsz, "q must be UTF-8 text without control characters");
                memcpy(out->q, value, (size_t)value_len + 1);
            } else if (name_len == 4) {
                if (seen_type++)
                    return fail(RL_E_INVALID_PARAMETER, err, errsz, "type is given more than once");
                out->type = value_len > 0 ? rl_catalog_type_parse(value, (size_t)value_len) : -1;
                if (out->type < 0)
                    return fail(RL_E_INVALID_PARAMETER, err, errsz,
                                "type must be one of evals, models, tools, leaderboards, organizations, people, "
                                "capabilities, papers (singular or plural)");
            } else {
                int per = 0, i;
                if (seen_per++)
                    return fail(RL_E_INVALID_PARAMETER, err, errsz, "per is given more than once");
                for (i = 0; i < value_len && i < 3 && value[i] >= '0' && value[i] <= '9'; ++i)
                    per = per * 10 + (value[i] - '0');
                if (value_len <= 0 || i != value_len || per < 1 || per > RL_CATALOG_PER_MAX)
                    return fail(RL_E_INVALID_PARAMETER, err, errsz, "per must be an integer from 1 to 30");
                out->per = per;
            }
        }
    }
    if (!seen_q)
        return fail(RL_E_INVALID_QUERY, err, errsz, "q is required: /api/v1/search?q=<words>");
    terms = rl_catalog_query_match(out->q, 0, match, sizeof(match));
    if (terms == 0)
        return fail(RL_E_INVALID_QUERY, err, errsz, "q holds no word to search for");
    if (terms < 0 || terms > RL_CATALOG_QUERY_TERMS_MAX)
        return fail(RL_E_INVALID_QUERY, err, errsz, "q holds more than 12 words");
    return 0;
}
