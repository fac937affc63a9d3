/*
 * The text of an agent message (spec "Message"): a message opened with no
 * text is a placeholder whose text is a single space; while it streams, its
 * text is its opening text (the placeholder's space left out) followed by
 * its deltas in order; once finalised it is the canonical text.
 */
#ifndef RL_RELAY_TEXT_H
#define RL_RELAY_TEXT_H

#include <stddef.h>

#include "store/store.h"

/* spec: a placeholder agent message has the text of a single space. */
#define RL_PLACEHOLDER_TEXT " "

/* In a transaction: the message's text as clients see it, in the arena. 0 or an error. */
int rl_text_of(rl_txn_t *txn, const rl_message_row_t *message, const char **text, size_t *len);

#endif
