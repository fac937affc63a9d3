/*
 * relay-bridge's log: one line per event on stderr, "relay-bridge: LEVEL:
 * text", written with a single write(2) so threads do not interleave.
 * Never pass secrets: ids, never tokens.
 */
#ifndef RL_BRIDGE_LOG_H
#define RL_BRIDGE_LOG_H

typedef enum rl_blog_level { RL_BLOG_DEBUG, RL_BLOG_INFO, RL_BLOG_WARN, RL_BLOG_ERROR } rl_blog_level_t;

void rl_bridge_log_level(rl_blog_level_t level);
void rl_bridge_log(rl_blog_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
