/*
 * relay-bridge's run loop: the socket to the relay, the delivery rules, the
 * turns, and the agent adapter. One thread runs the loop (poll(2) over the
 * socket, the writer's eventfd, a signalfd and the agent's descriptors);
 * the REST writer (rest.h), the downloads of sealed attachments (fetcher.h)
 * and the openai adapter's requests run on their own threads.
 */
#ifndef RL_BRIDGE_BRIDGE_H
#define RL_BRIDGE_BRIDGE_H

#include <stddef.h>

/* Agents and roots one bridge runs at most (docs/bridge.md "Several agents and projects"). */
#define RL_BRIDGE_AGENTS_MAX 16
#define RL_BRIDGE_ROOTS_MAX  16

/* One agent of --agent NAME=SPEC or agents.conf. */
typedef struct rl_bridge_agent_spec {
    const char *name; /* 1-32 of [a-z0-9_-] */
    const char *spec; /* exec:CMD, jsonl:CMD, acp:CMD, openai:URL */
} rl_bridge_agent_spec_t;

typedef struct rl_bridge_options {
    const char *server;          /* base URL of the relay */
    const char *token;           /* the bridge token; never printed */
    const char *installation_id; /* for the status file */
    const char *agent;           /* --agent SPEC, the old form: one agent named "default"; NULL with agents */
    rl_bridge_agent_spec_t agents[RL_BRIDGE_AGENTS_MAX]; /* --agent NAME=SPEC, or agents.conf */
    size_t nagents;
    const char *default_agent;              /* --default-agent; NULL: the first of agents */
    const char *roots[RL_BRIDGE_ROOTS_MAX]; /* --root: the folders projects are found and checked in */
    size_t nroots;
    int plain_projects;    /* --plain-projects: answer a project list asked without a device in clear */
    const char *cwd;       /* --cwd: the acp agent's working folder; NULL: the bridge's own */
    long delta_window_ms;  /* -1: 30; 0: no window, one delta per read */
    long backoff_first_ms; /* 0: 1000 */
    long backoff_cap_ms;   /* 0: 30000 */
    long retry_window_ms;  /* how long a write is retried while the relay gives no answer; -1: 30 min;
                              0: only the spec's three retries */
    int no_e2e;            /* --no-e2e: no device key, plain sessions only */
    int json;              /* what the bridge prints on stdout (a device's emoji) is JSON lines */
    const char *label;     /* the device label registered with the relay (the host label) */
    const char *files_url; /* --files-url: the relay's public URL, when its file links name another
                              origin than server; NULL: server's only */
} rl_bridge_options_t;

/* The default retry window: the spec's follow-up window, past which the relay refuses the writes anyway. */
#define RL_BRIDGE_RETRY_WINDOW_MS (30L * 60L * 1000L)

enum {
    RL_BRIDGE_EXIT_OK = 0,
    RL_BRIDGE_EXIT_ERROR = 1,
    RL_BRIDGE_EXIT_USAGE = 2,
    RL_BRIDGE_EXIT_UNPAIRED = 3, /* the relay refused the token: pair again */
};

/* Runs until a signal (SIGINT, SIGTERM), a revoked token or a fatal agent error. An exit status. */
int rl_bridge_run(const rl_bridge_options_t *options);

/* Writes the status file that `relay-bridge status` reads. state: connected, connecting, stopped. */
void rl_bridge_write_status(const char *state, const char *server, const char *installation_id);

#endif
