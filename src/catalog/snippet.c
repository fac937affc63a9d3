#include <string.h>
#include <strings.h>

#include "catalog/snippet.h"

#define TERMS_MAX 32

typedef struct word {
    const char *base;
    size_t len;
} word_t;

typedef struct terms {
    word_t words[TERMS_MAX];
    size_t count;
    int last_is_prefix;
} terms_t;

static int is_word_byte(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

/* Finds the next word at or after *pos in s. */
static int next_word(const char *s, size_t len, size_t *pos, word_t *word)
{
    size_t i = *pos;

    while (i < len && !is_word_byte((unsigned char)s[i]))
        ++i;
    if (i == len) {
        *pos = i;
        return 0;
    }
    word->base = s + i;
    while (i < len && is_word_byte((unsigned char)s[i]))
        ++i;
    word->len = (size_t)(s + i - word->base);
    *pos = i;
    return 1;
}

static void split_query(const char *q, terms_t *terms)
{
    size_t len = strlen(q), pos = 0;
    word_t word;

    terms->count = 0;
    while (terms->count < TERMS_MAX && next_word(q, len, &pos, &word))
        terms->words[terms->count++] = word;
    /* The last word is being typed when nothing at all follows it. */
    terms->last_is_prefix = terms->count > 0 && word.base + word.len == q + len;
}

static int matches(const terms_t *terms, const word_t *word)
{
    size_t i;

    for (i = 0; i < terms->count; ++i) {
        const word_t *term = &terms->words[i];
        int prefix = terms->last_is_prefix && i == terms->count - 1;
        if ((term->len == word->len || (prefix && term->len < word->len)) &&
            strncasecmp(term->base, word->base, term->len) == 0)
            return 1;
    }
    return 0;
}

static void put(char *out, size_t outsz, size_t *used, const char *s, size_t len)
{
    if (*used + len >= outsz) {
        len = outsz - 1 - *used;
        /* Never leave half a UTF-8 character at the cut. */
        while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
            --len;
    }
    memcpy(out + *used, s, len);
    *used += len;
    out[*used] = '\0';
}

int rl_catalog_snippet(const char *q, const char *text, char *out, size_t outsz)
{
    size_t len = strlen(text), pos = 0, index = 0, first = (size_t)-1, start, used = 0, total;
    const char *from, *to;
    terms_t terms;
    word_t word;

    if (outsz == 0)
        return 0;
    out[0] = '\0';
    split_query(q, &terms);
    if (terms.count == 0)
        return 0;
    while (next_word(text, len, &pos, &word)) {
        if (first == (size_t)-1 && matches(&terms, &word))
            first = index;
        ++index;
    }
    if (first == (size_t)-1)
        return 0;
    total = index;
    /* A few words of context before the first match, the rest after it. */
    start = first > 4 ? first - 4 : 0;
    if (total > RL_CATALOG_SNIPPET_WORDS && start + RL_CATALOG_SNIPPET_WORDS > total)
        start = total - RL_CATALOG_SNIPPET_WORDS;
    pos = 0;
    index = 0;
    from = NULL;
    to = text + len;
    while (next_word(text, len, &pos, &word)) {
        if (index == start)
            from = index == 0 ? text : word.base;
        if (index == start + RL_CATALOG_SNIPPET_WORDS) {
            to = word.base;
            break;
        }
        ++index;
    }
    if (from != text)
        put(out, outsz, &used, "…", strlen("…"));
    /* Copy the window, marking each matching word. */
    pos = (size_t)(from - text);
    while (pos < (size_t)(to - text)) {
        size_t before = pos;
        if (!next_word(text, (size_t)(to - text), &pos, &word)) {
            put(out, outsz, &used, text + before, (size_t)(to - text) - before);
            break;
        }
        put(out, outsz, &used, text + before, (size_t)(word.base - text) - before);
        if (matches(&terms, &word)) {
            put(out, outsz, &used, "**", 2);
            put(out, outsz, &used, word.base, word.len);
            put(out, outsz, &used, "**", 2);
        } else {
            put(out, outsz, &used, word.base, word.len);
        }
    }
    if (to != text + len) {
        while (used > 0 && out[used - 1] == ' ')
            out[--used] = '\0';
        put(out, outsz, &used, "…", strlen("…"));
    }
    return 1;
}
