#include <string.h>

#include "common/error.h"
#include "relay/core/text.h"

int rl_text_of(rl_txn_t *txn, const rl_message_row_t *message, const char **text, size_t *len)
{
    rl_delta_run_row_t *runs;
    size_t count, i, opening, total;
    char *joined;
    int result;

    if (strcmp(message->state, "streaming") != 0) {
        *text = message->text;
        *len = strlen(message->text);
        return 0;
    }
    if ((result = RL_TXN(txn, delta_runs_of, message->id, &runs, &count)) != 0)
        return result;
    opening = message->placeholder ? 0 : strlen(message->text);
    total = opening;
    for (i = 0; i < count; ++i)
        total += runs[i].text_len;
    /* The placeholder stays a space until the first delta replaces it. */
    if (total == 0 && message->placeholder) {
        *text = RL_PLACEHOLDER_TEXT;
        *len = 1;
        return 0;
    }
    joined = rl_arena_alloc(txn->arena, total + 1);
    memcpy(joined, message->text, opening);
    for (total = opening, i = 0; i < count; ++i) {
        memcpy(joined + total, runs[i].text, runs[i].text_len);
        total += runs[i].text_len;
    }
    joined[total] = '\0';
    *text = joined;
    *len = total;
    return 0;
}
