/*
 * Prometheus metrics (--metrics-listen HOST:PORT, off by default): a
 * listener of its own serving GET /metrics in the text exposition format,
 * so that the figures never share an address with the public API
 * (docs/operations.md, "Monitoring"). Loop thread only.
 */
#ifndef RL_RELAY_METRICS_H
#define RL_RELAY_METRICS_H

struct rl_relay;

/* Listens on --metrics-listen when it is set. 0, or -1 with the reason logged. Start-up. */
int rl_metrics_open(struct rl_relay *relay);
/* Stops listening (a graceful stop). */
void rl_metrics_shutdown(void);

#endif
