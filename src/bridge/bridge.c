#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bridge/agent.h"
#include "bridge/agent_state.h"
#include "bridge/projects.h"
#include "bridge/session_setup.h"
#include "client/backoff.h"
#include "bridge/batch.h"
#include "bridge/child.h"
#include "bridge/bridge.h"
#include "bridge/dedupe.h"
#include "bridge/enrol.h"
#include "bridge/fetcher.h"
#include "common/jobs.h"
#include "bridge/keyring.h"
#include "bridge/reply.h"
#include "bridge/sealed.h"
#include "common/log.h"
#include "bridge/rest.h"
#include "client/credentials.h"
#include "common/clock.h"
#include "client/ws.h"
#include "common/base64.h"
#include "common/strmap.h"
#include "rl_version.h"

/* The descriptors the loop polls itself (signals, writer, downloads, jobs, socket), before the watches. */
#define OWN_FDS 5
/* Sessions, approvals and grants the bridge remembers (this run): far more than one bridge serves. */
#define REMEMBERED_MAX 100000
/*
 * The relay pings every 30 s (spec delivery rule 4). A socket that brings no
 * frame for this long sits on a dead path (no FIN or RST ever came): drop it
 * and reconnect.
 */
#define SILENCE_MS 75000L
/* The relay's cap on one delta (docs/api.md) is 64 KiB of text. */
#define DELTA_MAX (60 * 1024)
/* Updates parked at once (see parked_t); past it an update is processed as it comes. */
#define PARKED_MAX 1024

typedef struct watch {
    int fd;
    short events;
    rl_bridge_fd_cb cb;
    void *user;
} watch_t;

/*
 * The descriptors adapters watch (rl_bridge_watch): an array that doubles as
 * it fills, with no cap but memory (a bridge serving many sessions watches
 * many pipes). The loop's poll set and its snapshot of the watches are
 * grown to match at the start of a turn, never during one: a callback that
 * adds a watch must not move what the turn is reading.
 */
typedef struct watches {
    watch_t *items;
    size_t count, alloc;
    watch_t *snapshot;  /* the watches as the turn polled them */
    struct pollfd *fds; /* OWN_FDS, then one per watch */
    size_t polled;      /* watches snapshot and fds have room for */
} watches_t;

/* An approval of an encrypted session as it was asked: what a grant must cover to answer it (granted()). */
typedef struct asked_approval {
    char *session_id, *action, *command, *host; /* never NULL: "" when the request had none */
} asked_approval_t;

/* An approve_always decision that verified (this run only): spec grant scopes. */
typedef struct grant {
    struct grant *next;
    char *action, *scope, *value;
} grant_t;

/*
 * The loop's side of a turn: its batch and the update it answers. A turn is
 * one agent message, or several when the adapter breaks it (rl_bridge_break):
 * turn is the handle adapters hold, message the agent message text goes to
 * now (the same rl_turn_t until a break opens a second message).
 */
typedef struct turn_state {
    struct turn_state *next;
    rl_turn_t *turn;
    rl_turn_t *message; /* a reference */
    rl_batch_t batch;
    rl_reply_t reply;   /* every delta of the current message, for its END's canonical text */
    uint64_t update_id; /* 0 when the agent opened the turn itself */
    int ended;
    int broken; /* the current message takes no more text: the next text opens another */
} turn_state_t;

/*
 * An update parked until its sealed attachments are downloaded (fetcher.h),
 * or behind an earlier parked update of its session, so that the session's
 * updates reach the agent in their order (a cancel never overtakes the
 * message it cancels). Its sealed items are opened in place, on the loop, as
 * their bytes arrive; once none is awaited and no earlier update of its
 * session is parked, it is processed as if it had just come. Until then it
 * holds the ack back (send_ack): the relay replays it should the bridge stop.
 * A session's message also waits here while git makes the session's
 * worktree (session_setup.h, RL_SETUP_MAKING).
 */
typedef struct parked {
    struct parked *next; /* every parked update, in arrival order */
    rl_frame_t frame;    /* owns the update */
    uint64_t update_id;  /* 0 when not a number */
    size_t waiting;      /* downloads not back yet */
} parked_t;

/*
 * One agent of the bridge's (--agent NAME=SPEC): each runs from the start (an
 * acp agent is one process serving every session of its; a jsonl agent one
 * process too). A session goes to the agent its setup chose (session_setup.h),
 * or to the default one.
 */
typedef struct agent_slot {
    char name[RL_AGENT_NAME_MAX + 1];
    const rl_agent_adapter_t *adapter;
    rl_agent_t *agent;
    json_t *manifest; /* the agent's last manifest line (tools, agent, commands), or NULL */
} agent_slot_t;

struct rl_bridge {
    const rl_bridge_options_t *options;
    agent_slot_t agents[RL_BRIDGE_AGENTS_MAX];
    size_t nagents;
    size_t default_agent;
    rl_projects_t *projects; /* NULL without --root: no projects */
    rl_setups_t *setups;
    rl_rest_t *rest;
    rl_ws_t *ws;
    rl_dedupe_t *dedupe;
    rl_fetcher_t *fetcher;
    rl_jobs_t *jobs;
    parked_t *parked;
    size_t nparked;
    rl_backoff_t backoff;
    long reconnect_at;  /* ms; -1 while connected */
    long last_frame_at; /* ms: when the socket last brought a frame */
    int sigfd;
    int ownerfd; /* inotify: the owner confirmed or revoked a device on this machine (bridge/enrol.h) */
    watches_t watches;
    turn_state_t *turns;
    uint64_t processed_max; /* highest update id handled */
    uint64_t acked;         /* highest ack sent on this connection */
    int exit_code;
    int stopping;
    char installation_id[64];
    rl_keyring_t *keys;     /* NULL with --no-e2e */
    rl_strmap_t *encrypted; /* session id -> (void *)1: sessions the relay said are encrypted */
    rl_strmap_t *plain;     /* session id -> (void *)1: sessions the relay said are not (encrypted: false) */
    rl_strmap_t *asked;     /* approval id -> asked_approval_t: approvals of encrypted sessions */
    rl_strmap_t *decided;   /* approval id -> (void *)1: approvals of encrypted sessions the agent was told of */
    rl_strmap_t *states;    /* session id -> json_t *: the agent state last posted (agent_state.h) */
    rl_strmap_t *config_ts; /* session id -> long long *: the ts of the last signed setting taken */
    grant_t *grants;
};

static sigset_t blocked_signals;

void rl_bridge_child_signals(void)
{
    sigprocmask(SIG_UNBLOCK, &blocked_signals, NULL);
}

void rl_bridge_write_status(const char *state, const char *server, const char *installation_id)
{
    json_t *doc = json_pack("{s:s, s:i, s:s, s:s, s:I}", "state", state, "pid", (int)getpid(), "server",
                            server != NULL ? server : "", "installation_id",
                            installation_id != NULL ? installation_id : "", "updated_at", (json_int_t)time(NULL));

    if (doc != NULL && rl_credentials_save("bridge-status", doc) != 0)
        rl_log(RL_LOG_WARN, "could not write the status file: %s", strerror(errno));
    json_decref(doc);
}

/* ---- watches ----------------------------------------------------------------------------------- */

/* Room for one more watch: 0, or -1 when memory ran out. */
static int watches_grow(watches_t *w)
{
    size_t alloc = w->alloc == 0 ? 16 : w->alloc * 2;
    watch_t *items = realloc(w->items, alloc * sizeof(*items));

    if (items == NULL)
        return -1;
    w->items = items;
    w->alloc = alloc;
    return 0;
}

/* Room in the poll set and the snapshot for every watch; at the start of a turn. 0, or -1 when memory ran out. */
static int watches_prepare(watches_t *w)
{
    watch_t *snapshot;
    struct pollfd *fds;

    if (w->fds != NULL && w->polled >= w->count)
        return 0;
    snapshot = realloc(w->snapshot, (w->alloc > 0 ? w->alloc : 1) * sizeof(*snapshot));
    if (snapshot == NULL)
        return -1;
    w->snapshot = snapshot;
    fds = realloc(w->fds, (OWN_FDS + w->alloc) * sizeof(*fds));
    if (fds == NULL)
        return -1;
    w->fds = fds;
    w->polled = w->alloc;
    return 0;
}

void rl_bridge_watch(rl_bridge_t *b, int fd, short events, rl_bridge_fd_cb cb, void *user)
{
    watches_t *w = &b->watches;
    size_t i;

    for (i = 0; i < w->count; i++) {
        if (w->items[i].fd == fd) {
            w->items[i].events = events;
            w->items[i].cb = cb;
            w->items[i].user = user;
            return;
        }
    }
    if (w->count == w->alloc && watches_grow(w) != 0) {
        rl_log(RL_LOG_ERROR, "out of memory: an agent descriptor is not watched");
        return;
    }
    w->items[w->count++] = (watch_t){fd, events, cb, user};
}

void rl_bridge_unwatch(rl_bridge_t *b, int fd)
{
    watches_t *w = &b->watches;
    size_t i;

    for (i = 0; i < w->count; i++) {
        if (w->items[i].fd == fd) {
            w->items[i] = w->items[--w->count];
            return;
        }
    }
}

/* ---- acks (spec delivery rule 2) ---------------------------------------------------------------- */

static uint64_t parse_id(const char *id)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(id, &end, 10);
    return errno != 0 || *end != '\0' ? 0 : (uint64_t)v;
}

/*
 * An ack covers every id up to it, so it may only go as far as the oldest
 * update still being processed: a turn is processed when its message ended,
 * a parked update once it has been taken out and processed.
 */
static void send_ack(rl_bridge_t *b)
{
    uint64_t upto = b->processed_max;
    turn_state_t *t;
    parked_t *p;
    char frame[96];

    for (t = b->turns; t != NULL; t = t->next)
        if (t->update_id != 0 && t->update_id - 1 < upto)
            upto = t->update_id - 1;
    for (p = b->parked; p != NULL; p = p->next)
        if (p->update_id != 0 && p->update_id - 1 < upto)
            upto = p->update_id - 1;
    if (b->ws == NULL || upto <= b->acked)
        return;
    snprintf(frame, sizeof(frame), "{\"type\":\"ack\",\"up_to_update_id\":\"%" PRIu64 "\"}", upto);
    if (rl_ws_send_text(b->ws, frame, strlen(frame)) == 0)
        b->acked = upto;
}

/* ---- encryption of what the bridge sends ------------------------------------------------------------ */

/*
 * Every call goes through here: in an encrypted session its content fields
 * are sealed before the writer sees the body, so that a retry resends the
 * same ciphertext (idempotency is on its bytes) and no plaintext of an
 * encrypted session reaches the relay. A session the relay said is encrypted
 * but whose key this bridge lacks gets nothing: its text would be in clear.
 */
static void submit(rl_bridge_t *b, rl_call_t call, rl_turn_t *turn, json_t *body)
{
    const char *sid = turn != NULL ? turn->session_id : json_string_value(json_object_get(body, "session_id"));
    int session_call = call != RL_CALL_SET_MANIFEST && call != RL_CALL_REGISTER_DEVICE &&
                       call != RL_CALL_ADD_RECIPIENTS && call != RL_CALL_NOTIFY_TOOL_FILE &&
                       call != RL_CALL_SESSION_STATE;

    if (body == NULL)
        return;
    if (session_call && sid != NULL) {
        int sealed = turn != NULL ? turn->encrypted : b->keys != NULL && rl_keyring_has(b->keys, sid);
        if (sealed && rl_keyring_seal_call(b->keys, call, sid, body) != 0) {
            rl_log(RL_LOG_ERROR, "session %s: could not encrypt a write: not sent", sid);
            json_decref(body);
            return;
        }
        if (!sealed && rl_strmap_get(b->encrypted, sid) != NULL) {
            rl_log(RL_LOG_WARN, "session %s is encrypted and this bridge holds no key for it: a write was not sent",
                   sid);
            json_decref(body);
            return;
        }
    }
    rl_rest_submit(b->rest, call, turn, body);
}

/* ---- turns -------------------------------------------------------------------------------------- */

static turn_state_t *find_turn(rl_bridge_t *b, const char *session_id, const char *interaction_id)
{
    turn_state_t *t;

    for (t = b->turns; t != NULL; t = t->next)
        if (!t->ended && strcmp(t->turn->session_id, session_id) == 0 &&
            strcmp(t->turn->interaction_id, interaction_id) == 0)
            return t;
    return NULL;
}

/* Opens a turn and its placeholder message (spec: sendMessage with empty text). */
static turn_state_t *open_turn(rl_bridge_t *b, const char *session_id, const char *interaction_id, uint64_t update_id)
{
    turn_state_t *t = calloc(1, sizeof(*t));
    char key[37];

    if (t == NULL)
        return NULL;
    t->turn = rl_turn_new(session_id, interaction_id);
    if (t->turn == NULL) {
        free(t);
        return NULL;
    }
    t->turn->owner = t;
    t->turn->encrypted = b->keys != NULL && rl_keyring_has(b->keys, session_id);
    t->message = t->turn;
    rl_turn_ref(t->message);
    t->update_id = update_id;
    rl_batch_init(&t->batch, b->options->delta_window_ms >= 0 ? b->options->delta_window_ms : 30);
    rl_reply_init(&t->reply);
    t->next = b->turns;
    b->turns = t;
    rl_rest_new_key(key);
    submit(b, RL_CALL_SEND_MESSAGE, t->turn,
           json_pack("{s:s, s:s, s:s, s:s}", "session_id", session_id, "interaction_id", interaction_id, "text", "",
                     "idempotency_key", key));
    return t;
}

static void close_turn(rl_bridge_t *b, turn_state_t *done)
{
    turn_state_t **p;

    for (p = &b->turns; *p != NULL; p = &(*p)->next) {
        if (*p == done) {
            *p = done->next;
            break;
        }
    }
    if (done->update_id > b->processed_max)
        b->processed_max = done->update_id;
    rl_batch_free(&done->batch);
    rl_reply_free(&done->reply);
    done->turn->owner = NULL;
    done->message->owner = NULL;
    rl_turn_unref(done->message);
    rl_turn_unref(done->turn);
    free(done);
    send_ack(b);
}

static void end_turn(rl_bridge_t *b, rl_turn_t *turn, const char *finish_reason, json_t *usage, const char *error_text);

static void submit_delta(rl_bridge_t *b, turn_state_t *t, char *text, size_t len)
{
    char key[37];

    rl_rest_new_key(key);
    rl_reply_append(&t->reply, text, len);
    submit(b, RL_CALL_DELTA, t->message, json_pack("{s:s%, s:s}", "delta", text, len, "idempotency_key", key));
    free(text);
}

static void flush_turn(rl_bridge_t *b, turn_state_t *t, int final)
{
    char *chunk;
    size_t len;

    for (chunk = rl_batch_take(&t->batch, DELTA_MAX, final, &len); chunk != NULL;
         chunk = rl_batch_take(&t->batch, DELTA_MAX, final, &len)) {
        json_t *probe = json_stringn(chunk, len);
        if (probe == NULL) {
            /* Not UTF-8 even on boundaries: send what the relay can take. */
            size_t i;
            for (i = 0; i < len; i++)
                if ((unsigned char)chunk[i] >= 0x80)
                    chunk[i] = '?';
        }
        json_decref(probe);
        submit_delta(b, t, chunk, len);
    }
}

static void send_end(rl_bridge_t *b, turn_state_t *t, const char *finish_reason, json_t *usage, const char *error_text);

/* The text after a break: the message before it ends as a tool call, and a new one opens in the same turn. */
static void open_next_message(rl_bridge_t *b, turn_state_t *t)
{
    rl_turn_t *next = rl_turn_new(t->turn->session_id, t->turn->interaction_id);
    char key[37];

    if (next == NULL)
        return;
    send_end(b, t, "tool_call", NULL, NULL);
    if (t->message != t->turn)
        t->message->owner = NULL;
    rl_turn_unref(t->message);
    next->owner = t;
    next->encrypted = t->turn->encrypted;
    t->message = next;
    t->broken = 0;
    rl_reply_free(&t->reply);
    rl_reply_init(&t->reply);
    rl_rest_new_key(key);
    submit(b, RL_CALL_SEND_MESSAGE, next,
           json_pack("{s:s, s:s, s:s, s:s}", "session_id", next->session_id, "interaction_id", next->interaction_id,
                     "text", "", "idempotency_key", key));
}

void rl_bridge_text(rl_bridge_t *b, rl_turn_t *turn, const char *bytes, size_t len)
{
    turn_state_t *t = turn->owner;

    if (t == NULL || t->ended || len == 0)
        return;
    if (t->broken)
        open_next_message(b, t);
    rl_batch_append(&t->batch, bytes, len, rl_clock_mono_ms());
}

void rl_bridge_break(rl_bridge_t *b, rl_turn_t *turn)
{
    turn_state_t *t = turn->owner;

    /*
     * Also a message with no text yet (the turn's placeholder, when the agent
     * starts with a tool call): it is dated when it opened, so text streamed
     * into it after the tool call would sit above the tool call in the
     * session's timeline. It ends empty, as a tool call, and clients do not
     * show an agent message that ended so with no text (docs/api.md).
     */
    if (t == NULL || t->ended)
        return;
    flush_turn(b, t, 1);
    t->broken = 1;
}

rl_jobs_t *rl_bridge_jobs(rl_bridge_t *b)
{
    return b->jobs;
}

const char *rl_bridge_cwd(const rl_bridge_t *b)
{
    return b->options->cwd;
}

/* ---- agents and session setups (session_setup.h) -------------------------------------------------- */

const char *rl_bridge_session_cwd(rl_bridge_t *b, const char *session_id)
{
    const rl_session_setup_t *s = rl_session_setup_get(b, session_id);

    return s != NULL && s->state == RL_SETUP_READY && s->folder[0] != '\0' ? s->folder : NULL;
}

rl_setups_t *rl_bridge_setups(rl_bridge_t *b)
{
    return b->setups;
}

rl_keyring_t *rl_bridge_keys(rl_bridge_t *b)
{
    return b->keys;
}

rl_projects_t *rl_bridge_projects(rl_bridge_t *b)
{
    return b->projects;
}

int rl_bridge_agent_index(rl_bridge_t *b, const char *name)
{
    size_t i;

    if (name == NULL)
        return (int)b->default_agent;
    for (i = 0; i < b->nagents; i++)
        if (strcmp(b->agents[i].name, name) == 0)
            return (int)i;
    return -1;
}

const char *rl_bridge_agent_name(rl_bridge_t *b, int index)
{
    return index >= 0 && (size_t)index < b->nagents ? b->agents[index].name : b->agents[b->default_agent].name;
}

int rl_bridge_session_encrypted(rl_bridge_t *b, const char *session_id)
{
    return rl_strmap_get(b->encrypted, session_id) != NULL;
}

/* The agent serving session_id: the one its setup chose, else the default agent. */
static agent_slot_t *slot_of(rl_bridge_t *b, const char *session_id)
{
    const rl_session_setup_t *s = session_id != NULL ? rl_session_setup_get(b, session_id) : NULL;

    return s != NULL && s->agent >= 0 ? &b->agents[s->agent] : &b->agents[b->default_agent];
}

/* An update's jsonl line (approval, capability, session_started) to the agent of session_id. */
static void notify_agent(rl_bridge_t *b, const char *session_id, json_t *line)
{
    agent_slot_t *slot = slot_of(b, session_id);

    slot->adapter->notify(slot->agent, line);
}

static void cancel_agent(rl_bridge_t *b, const char *session_id, const char *interaction_id)
{
    agent_slot_t *slot = slot_of(b, session_id);

    slot->adapter->cancel(slot->agent, session_id, interaction_id);
}

/*
 * The jsonl line session_started to the session's agent, with the folder it
 * runs in (cwd) when it names a project: an agent serving several folders
 * learns it there and in each message line.
 */
void rl_bridge_session_ready(rl_bridge_t *b, const char *session_id, json_t *session)
{
    const char *cwd = rl_bridge_session_cwd(b, session_id);
    json_t *line = json_pack("{s:s, s:s, s:O}", "type", "session_started", "session_id", session_id, "session",
                             session != NULL ? session : json_null());

    if (line == NULL)
        return;
    if (cwd != NULL)
        json_object_set_new(line, "cwd", json_string(cwd));
    notify_agent(b, session_id, line);
    json_decref(line);
}

static void copy_fields(json_t *body, json_t *line, const char *const *fields);

/*
 * The manifest: tools, agent and commands of the default agent's last
 * manifest line, and every agent's name, kind and what it supports
 * (docs/api.md, setManifest agents). Sent again when any agent's changes.
 */
static void send_manifest(rl_bridge_t *b)
{
    agent_slot_t *def = &b->agents[b->default_agent];
    json_t *body = json_object(), *agents = json_array();
    size_t i;

    if (body == NULL || agents == NULL)
        goto out;
    if (def->manifest != NULL) {
        json_object_set(body, "tools", json_object_get(def->manifest, "tools"));
        copy_fields(body, def->manifest, (const char *const[]){"agent", "commands", NULL});
    }
    for (i = 0; i < b->nagents; i++) {
        json_t *supports =
            b->agents[i].adapter->supports != NULL ? b->agents[i].adapter->supports(b->agents[i].agent) : NULL;
        json_t *row = json_pack("{s:s, s:s, s:o}", "name", b->agents[i].name, "kind", b->agents[i].adapter->scheme,
                                "supports", supports != NULL ? supports : json_object());
        if (row != NULL && i == b->default_agent)
            json_object_set_new(row, "default", json_true());
        json_array_append_new(agents, row);
    }
    json_object_set(body, "agents", agents);
    submit(b, RL_CALL_SET_MANIFEST, NULL, body);
    body = NULL;
out:
    json_decref(agents);
    json_decref(body);
}

rl_strmap_t *rl_bridge__states(rl_bridge_t *b)
{
    return b->states;
}

void rl_bridge__submit_call(rl_bridge_t *b, rl_call_t call, json_t *body)
{
    submit(b, call, NULL, body);
}

/*
 * relayd accepts finish_reason stop, length, content_filter, tool_call, error
 * and cancelled (src/relay/bridge.c), and stores an end without one as "stop"
 * (docs/api.md, "Finish reasons"): a turn that failed or was cancelled must
 * say so. OpenAI's "tool_calls" is "tool_call"; a cancelled reply also says so
 * in its text.
 */
static const struct {
    const char *agent, *relay, *note;
} finish_map[] = {
    {"stop", "stop", NULL},           {"length", "length", NULL},        {"content_filter", "content_filter", NULL},
    {"tool_call", "tool_call", NULL}, {"tool_calls", "tool_call", NULL}, {"cancelled", "cancelled", "[cancelled]"},
    {"error", "error", NULL},
};

void rl_bridge_end(rl_bridge_t *b, rl_turn_t *turn, const char *finish_reason, json_t *usage, const char *error_text)
{
    const char *note = NULL;
    size_t i;

    for (i = 0; finish_reason != NULL && i < sizeof(finish_map) / sizeof(finish_map[0]); i++) {
        if (strcmp(finish_map[i].agent, finish_reason) == 0) {
            note = finish_map[i].note;
            finish_reason = finish_map[i].relay;
            break;
        }
    }
    if (i == sizeof(finish_map) / sizeof(finish_map[0])) {
        rl_log(RL_LOG_DEBUG, "finish_reason %s unknown to the relay: left out", finish_reason);
        finish_reason = NULL;
    }
    /* A jsonl agent's end with an error for the user but no reason failed all the same. */
    if (finish_reason == NULL && error_text != NULL)
        finish_reason = "error";
    if (error_text == NULL)
        error_text = note;
    end_turn(b, turn, finish_reason, usage, error_text);
}

void rl_bridge_finish(rl_bridge_t *b, rl_turn_t *turn, const char *finish_reason, json_t *usage, const char *error_text)
{
    end_turn(b, turn, finish_reason, usage, error_text);
}

static void end_turn(rl_bridge_t *b, rl_turn_t *turn, const char *finish_reason, json_t *usage, const char *error_text)
{
    turn_state_t *t = turn->owner;

    if (t == NULL || t->ended)
        return;
    send_end(b, t, finish_reason, usage, error_text);
    t->ended = 1;
}

/* Ends the current message of t (the turn goes on unless the caller ends it). */
static void send_end(rl_bridge_t *b, turn_state_t *t, const char *finish_reason, json_t *usage, const char *error_text)
{
    rl_turn_t *turn = t->message;
    json_t *body;
    char key[37];

    if (error_text != NULL) {
        rl_batch_append(&t->batch, "\n\n", 2, rl_clock_mono_ms());
        rl_batch_append(&t->batch, error_text, strlen(error_text), rl_clock_mono_ms());
    }
    flush_turn(b, t, 1);
    rl_rest_new_key(key);
    body = json_pack("{s:s}", "idempotency_key", key);
    if (finish_reason != NULL)
        json_object_set_new(body, "finish_reason", json_string(finish_reason));
    if (json_is_object(usage))
        json_object_set(body, "usage", usage);
    /*
     * The whole text goes with the end, so that a delta lost during an outage leaves no hole in the stored
     * reply. A reply longer than the relay's cap keeps its streamed text, and should a delta of it be lost,
     * the writer ends it as incomplete with the start kept here.
     */
    if (!t->reply.overflow)
        json_object_set_new(body, "text", rl_reply_canonical(&t->reply));
    else
        turn->incomplete_text = rl_reply_incomplete(&t->reply);
    if (turn->incomplete_text != NULL && turn->encrypted) {
        char *sealed = rl_keyring_seal(b->keys, turn->session_id, "messages", turn->incomplete_text,
                                       strlen(turn->incomplete_text));
        free(turn->incomplete_text);
        turn->incomplete_text = sealed;
    }
    submit(b, RL_CALL_END, turn, body);
}

void rl_bridge_fail(rl_bridge_t *b, const char *why)
{
    rl_log(RL_LOG_ERROR, "%s", why);
    b->exit_code = RL_BRIDGE_EXIT_ERROR;
    b->stopping = 1;
}

/* ---- approvals of encrypted sessions: grants the bridge keeps itself ------------------------------ */

static const char *str_of(json_t *object, const char *key)
{
    const char *v = json_string_value(json_object_get(object, key));
    return v != NULL ? v : "";
}

static void state_free(void *value)
{
    json_decref(value);
}

static void asked_free(void *value)
{
    asked_approval_t *asked = value;

    if (asked == NULL)
        return;
    free(asked->session_id);
    free(asked->action);
    free(asked->command);
    free(asked->host);
    free(asked);
}

static void forget_approval(rl_bridge_t *b, const char *approval_id)
{
    asked_free(rl_strmap_remove(b->asked, approval_id));
}

/*
 * In an encrypted session the relay sees neither command nor host, and its
 * word that a grant covers a request ("auto_resolved") is a decision it
 * could forge. The bridge keeps the approve_always decisions that verified
 * and takes an auto-resolved request only when one of them covers it
 * (spec grant scopes: all, session, tool = the command, domain = the host).
 */
static void remember_approval(rl_bridge_t *b, json_t *body)
{
    const char *sid = json_string_value(json_object_get(body, "session_id"));
    const char *id = json_string_value(json_object_get(body, "approval_id"));
    asked_approval_t *asked;

    if (b->keys == NULL || sid == NULL || id == NULL || !rl_keyring_has(b->keys, sid))
        return;
    asked = calloc(1, sizeof(*asked));
    if (asked != NULL) {
        asked->session_id = strdup(sid);
        asked->action = strdup(str_of(body, "action"));
        asked->command = strdup(str_of(body, "command"));
        asked->host = strdup(str_of(body, "host"));
    }
    forget_approval(b, id);
    if (asked == NULL || asked->session_id == NULL || asked->action == NULL || asked->command == NULL ||
        asked->host == NULL || rl_strmap_put(b->asked, id, asked) != 0) {
        /* Not remembered: a relay's auto_resolved answer to it is then taken as a plain session's would be. */
        rl_log(RL_LOG_WARN, "approval %s: could not remember it (out of memory or too many)", id);
        asked_free(asked);
    }
}

static void remember_grant(rl_bridge_t *b, const char *approval_id, json_t *payload)
{
    asked_approval_t *asked = rl_strmap_get(b->asked, approval_id);
    const char *scope = json_string_value(json_object_get(payload, "scope"));
    const char *value;
    grant_t *grant;

    if (asked == NULL)
        return;
    /*
     * spec: no scope is all. The value is always the request's own (tool: command, domain: host, session:
     * session), never the update's scope_value: decision_sig covers the scope but not that value, so a relay
     * could otherwise widen a signed "always approve `ls`" into a grant for a command of its choosing.
     */
    if (scope == NULL)
        scope = "all";
    value = strcmp(scope, "tool") == 0      ? asked->command
            : strcmp(scope, "domain") == 0  ? asked->host
            : strcmp(scope, "session") == 0 ? asked->session_id
                                            : "";
    grant = calloc(1, sizeof(*grant));
    if (grant == NULL)
        return;
    grant->action = strdup(asked->action);
    grant->scope = strdup(scope);
    grant->value = strdup(value);
    if (grant->action == NULL || grant->scope == NULL || grant->value == NULL) {
        free(grant->action);
        free(grant->scope);
        free(grant->value);
        free(grant);
        return;
    }
    grant->next = b->grants;
    b->grants = grant;
}

/* 1 when a grant the bridge keeps covers the request body of an approval. */
static int granted(rl_bridge_t *b, json_t *body)
{
    asked_approval_t *asked = rl_strmap_get(b->asked, str_of(body, "approval_id"));
    grant_t *g;

    if (asked == NULL)
        return 0;
    for (g = b->grants; g != NULL; g = g->next) {
        if (strcmp(g->action, asked->action) != 0)
            continue;
        if (strcmp(g->scope, "all") == 0 ||
            (strcmp(g->scope, "session") == 0 && strcmp(g->value, asked->session_id) == 0) ||
            (strcmp(g->scope, "tool") == 0 && strcmp(g->value, asked->command) == 0) ||
            (strcmp(g->scope, "domain") == 0 && strcmp(g->value, asked->host) == 0))
            return 1;
    }
    return 0;
}

/* ---- lines of the jsonl protocol ---------------------------------------------------------------- */

/* Copies the listed optional fields of the agent's line into body. */
static void copy_fields(json_t *body, json_t *line, const char *const *fields)
{
    for (; *fields != NULL; fields++) {
        json_t *v = json_object_get(line, *fields);
        if (v != NULL && !json_is_null(v))
            json_object_set(body, *fields, v);
    }
}

static json_t *task_body(const rl_agent_line_t *line, const char *const *fields)
{
    json_t *body = json_pack("{s:s, s:s}", "session_id", line->session_id, "interaction_id", line->interaction_id);
    copy_fields(body, line->root, fields);
    return body;
}

void rl_bridge_agent_line(rl_bridge_t *b, rl_agent_line_t *line)
{
    static const char *const task_start[] = {"task_id", "kind", "status_label", "args", "name", NULL};
    static const char *const task_progress[] = {"task_id", "progress_percent", "partial_result", "status_label", NULL};
    static const char *const task_finish[] = {"task_id", "status", "name", "error", "result", "status_label", NULL};
    static const char *const approval[] = {"action", "title",        "message", "severity", "command",
                                           "host",   "tool_call_id", "content", NULL};
    turn_state_t *t = NULL;

    if (line->session_id[0] != '\0') {
        t = find_turn(b, line->session_id, line->interaction_id);
        /* An agent may speak first in a session (a follow-up): open a message for it. */
        if (t == NULL && (line->type == RL_LINE_DELTA || line->type == RL_LINE_END))
            t = open_turn(b, line->session_id, line->interaction_id, 0);
    }
    switch (line->type) {
    case RL_LINE_MANIFEST: {
        agent_slot_t *slot = &b->agents[b->default_agent];
        size_t i;
        for (i = 0; i < b->nagents; i++)
            if (line->from != NULL && b->agents[i].agent == line->from)
                slot = &b->agents[i];
        json_decref(slot->manifest);
        slot->manifest = json_incref(line->root);
        send_manifest(b);
        break;
    }
    case RL_LINE_DELTA: {
        json_t *text = json_object_get(line->root, "text");
        if (t != NULL)
            rl_bridge_text(b, t->turn, json_string_value(text), json_string_length(text));
        break;
    }
    case RL_LINE_END:
        if (t != NULL)
            rl_bridge_end(b, t->turn, json_string_value(json_object_get(line->root, "finish_reason")),
                          json_object_get(line->root, "usage"),
                          json_string_value(json_object_get(line->root, "error")));
        break;
    case RL_LINE_TASK_START:
    case RL_LINE_TASK_PROGRESS:
    case RL_LINE_TASK_FINISH:
        /*
         * Text before a task goes out first: the relay applies writes in arrival order. A new task also ends
         * the message in progress, so that text after it opens a new message below it (as acp: does).
         */
        if (t != NULL && line->type == RL_LINE_TASK_START)
            rl_bridge_break(b, t->turn);
        else if (t != NULL)
            flush_turn(b, t, 0);
        submit(b,
               line->type == RL_LINE_TASK_START      ? RL_CALL_CREATE_TASK
               : line->type == RL_LINE_TASK_PROGRESS ? RL_CALL_UPDATE_TASK
                                                     : RL_CALL_FINISH_TASK,
               t != NULL ? t->turn : NULL,
               task_body(line, line->type == RL_LINE_TASK_START      ? task_start
                               : line->type == RL_LINE_TASK_PROGRESS ? task_progress
                                                                     : task_finish));
        break;
    case RL_LINE_APPROVAL_REQUEST: {
        json_t *body = task_body(line, approval);
        const char *id = json_string_value(json_object_get(line->root, "approval_id"));
        char key[37], generated[48];
        if (id == NULL) {
            rl_rest_new_key(key);
            snprintf(generated, sizeof(generated), "apr_%.32s", key);
            id = generated;
        }
        json_object_set_new(body, "approval_id", json_string(id));
        if (json_object_get(body, "message") == NULL)
            json_object_set(body, "message", json_object_get(line->root, "title"));
        if (json_object_get(body, "severity") == NULL)
            json_object_set_new(body, "severity", json_string("medium"));
        rl_rest_new_key(key);
        json_object_set_new(body, "idempotency_key", json_string(key));
        /* The text before the request is what the user reads first; the text after it goes below the card. */
        if (t != NULL)
            rl_bridge_break(b, t->turn);
        remember_approval(b, body);
        submit(b, RL_CALL_REQUEST_APPROVAL, t != NULL ? t->turn : NULL, body);
        break;
    }
    case RL_LINE_CAPABILITY_REQUEST: {
        json_t *body = task_body(line, (const char *const[]){"capability", "reason", NULL});
        char key[37];
        rl_rest_new_key(key);
        json_object_set_new(body, "idempotency_key", json_string(key));
        /* As with approvals: the text before the request above it, the text after it below. */
        if (t != NULL)
            rl_bridge_break(b, t->turn);
        submit(b, RL_CALL_REQUEST_CAPABILITY, t != NULL ? t->turn : NULL, body);
        break;
    }
    case RL_LINE_LOG:
        rl_log(RL_LOG_INFO, "agent: %s", json_string_value(json_object_get(line->root, "text")));
        break;
    }
    rl_agent_line_free(line);
}

void rl_bridge_tool_file(rl_bridge_t *b, const char *session_id, const char *tool, const char *path)
{
    char idx[RL_E2E_BLIND_IDX_SIZE], blob[256], *real, *path_ct = NULL, *name_ct = NULL;
    const char *name;
    struct stat st;

    /* In clear only for a session the relay said is plain: one whose key is missing may be encrypted. */
    int plain = rl_strmap_get(b->plain, session_id) != NULL && rl_strmap_get(b->encrypted, session_id) == NULL;

    if (path == NULL || (!plain && (b->keys == NULL || !rl_keyring_has(b->keys, session_id))))
        return;
    real = realpath(path, NULL);
    if (real == NULL)
        return;
    name = strrchr(real, '/') != NULL ? strrchr(real, '/') + 1 : real;
    if (plain) {
        json_t *body = json_pack("{s:s, s:s, s:s, s:s}", "session_id", session_id, "tool", tool, "path", real,
                                 "display_name", name);
        if (body != NULL && stat(real, &st) == 0)
            json_object_set_new(body, "size_bytes", json_integer((json_int_t)st.st_size));
        submit(b, RL_CALL_NOTIFY_TOOL_FILE, NULL, body);
        free(real);
        return;
    }
    /* The authors' scheme: the index of (session, real path), the path sealed under a key of that index. */
    if (rl_keyring_file_index(b->keys, session_id, real, idx) == 0 &&
        snprintf(blob, sizeof(blob), "agent_files/%s/%s", session_id, idx) < (int)sizeof(blob)) {
        path_ct = rl_keyring_seal_path(b->keys, session_id, blob, real, strlen(real));
        name_ct = rl_keyring_seal_path(b->keys, session_id, blob, name, strlen(name));
    }
    if (path_ct != NULL && name_ct != NULL) {
        json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:s}", "session_id", session_id, "tool", tool, "path_ct",
                                 path_ct, "display_name_ct", name_ct, "path_blind_idx", idx);
        if (body != NULL && stat(real, &st) == 0)
            json_object_set_new(body, "size_bytes", json_integer((json_int_t)st.st_size));
        submit(b, RL_CALL_NOTIFY_TOOL_FILE, NULL, body);
    }
    free(path_ct);
    free(name_ct);
    free(real);
}

/* ---- encrypted updates (docs/api.md, "Encrypted sessions") ------------------------------------------- */

/*
 * Sealed items of message still unopened, had they no download (parked
 * updates opened theirs already): they fail as download_failed, logged, so
 * that the agent never gets a sealed url as if it were the file.
 */
static void fail_unfetched(rl_bridge_t *b, const char *session_id, json_t *message)
{
    json_t *item;
    size_t i;

    json_array_foreach(json_object_get(message, "attachments"), i, item)
    {
        if (json_object_get(item, "meta_ct") != NULL)
            rl_sealed_attachment_open(b->keys, session_id, item, NULL, NULL, 0);
    }
}

/*
 * The payload a session.message update gives the agent: the update's own for
 * a plain session; for an encrypted one a copy with message.text opened from
 * text_ct. NULL (logged) when the bridge cannot open it: the message is skipped.
 */
static json_t *open_message(rl_bridge_t *b, rl_frame_t *f)
{
    json_t *message = json_object_get(f->payload, "message"), *copy;
    json_t *ct = json_object_get(message, "text_ct");
    char *text = NULL;
    int result;

    if (!json_is_true(json_object_get(json_object_get(f->payload, "session"), "encrypted")) && ct == NULL)
        return json_incref(f->payload);
    if (rl_strmap_put(b->encrypted, f->session_id, (void *)1) != 0)
        rl_log(RL_LOG_WARN, "session %s: could not remember that it is encrypted", f->session_id);
    if (b->keys == NULL || !rl_keyring_has(b->keys, f->session_id)) {
        rl_log(RL_LOG_WARN,
               "update %s: session %s is encrypted and this bridge holds no key for it (confirm this bridge on a "
               "device that has the session): message skipped",
               f->update_id, f->session_id);
        return NULL;
    }
    result = rl_keyring_open_field(b->keys, f->session_id, "messages", json_string_value(ct), &text);
    if (result != 0) {
        rl_log(RL_LOG_WARN, "update %s: the message's text_ct does not open with this session's keys (%d): skipped",
               f->update_id, result);
        return NULL;
    }
    copy = json_deep_copy(f->payload);
    message = json_object_get(copy, "message");
    json_object_del(message, "text_ct");
    json_object_set_new(message, "text", json_string(text));
    rl_e2e_wipe(text, strlen(text));
    free(text);
    fail_unfetched(b, f->session_id, message);
    return copy;
}

/* 1 when what a device says of session_id counts only signed: the session is end-to-end encrypted. */
static int session_signed(rl_bridge_t *b, const char *session_id)
{
    return rl_strmap_get(b->encrypted, session_id) != NULL || (b->keys != NULL && rl_keyring_has(b->keys, session_id));
}

/* How far a signed setting's ts may be from this machine's clock (docs/api.md, "Steering"). */
#define CONFIG_TS_SKEW_MS (5LL * 60LL * 1000LL)

/*
 * spec (ours, docs/api.md "Steering"): in an encrypted session a setting
 * counts only with a config_sig of a device this bridge accepted, a ts within
 * 5 minutes of now and newer than the last one taken for the session (a
 * relay cannot replay an old "bypassPermissions"). 1 when the agent may be
 * told; otherwise the session's state says config_refused and nothing else
 * changes.
 */
static int config_verified(rl_bridge_t *b, rl_frame_t *f)
{
    json_t *option = json_object_get(f->payload, "option"), *ts = json_object_get(f->payload, "ts");
    const char *device_id = json_string_value(json_object_get(f->payload, "device_id"));
    const char *why = NULL;
    long long now = (long long)rl_clock_now_ms(), when = json_integer_value(ts), *last;

    if (!session_signed(b, f->session_id))
        return 1;
    last = rl_strmap_get(b->config_ts, f->session_id);
    if (b->keys == NULL)
        why = "encryption is off";
    else if (!json_is_integer(ts))
        why = "no ts";
    else if (when < now - CONFIG_TS_SKEW_MS || when > now + CONFIG_TS_SKEW_MS)
        why = "ts is more than 5 minutes off";
    else if (last != NULL && when <= *last)
        why = "ts is not newer than the last setting taken (a replay)";
    else if (rl_keyring_verify_config(b->keys, f->session_id, json_string_value(json_object_get(option, "id")),
                                      json_string_value(json_object_get(option, "value")), when, device_id,
                                      json_string_value(json_object_get(f->payload, "config_sig")), &why) == 0)
        why = NULL;
    if (why == NULL) {
        if (last == NULL) {
            last = malloc(sizeof(*last));
            if (last == NULL || rl_strmap_put(b->config_ts, f->session_id, last) != 0) {
                free(last);
                rl_log(RL_LOG_ERROR, "session %s: out of memory: a setting is refused", f->session_id);
                why = "out of memory";
            }
        }
        if (why == NULL) {
            *last = when;
            return 1;
        }
    }
    rl_log(RL_LOG_WARN, "session %s: a setting refused, the agent is not told: %s", f->session_id, why);
    json_t *fields = json_pack("{s:{s:s, s:s}}", "error", "code", "config_refused", "message", why);
    rl_bridge_state(b, f->session_id, fields);
    json_decref(fields);
    return 0;
}

/* Approvals of encrypted sessions remembered as decided (the oldest are forgotten all at once). */
#define DECIDED_MAX 4096

/*
 * spec (ours, docs/api.md "Signed decisions"): in an encrypted session a
 * decision counts only with a decision_sig of a device this bridge accepted.
 * 1 when the agent may be told; plain sessions are as before.
 */
static int decision_verified(rl_bridge_t *b, rl_frame_t *f)
{
    const char *approval_id = json_string_value(json_object_get(f->payload, "approval_id"));
    const char *why = NULL;

    if (!session_signed(b, f->session_id))
        return 1;
    if (b->keys != NULL &&
        rl_keyring_verify_decision(b->keys, approval_id, f->session_id,
                                   json_string_value(json_object_get(f->payload, "decision")),
                                   json_string_value(json_object_get(f->payload, "scope")),
                                   json_string_value(json_object_get(f->payload, "device_id")),
                                   json_string_value(json_object_get(f->payload, "decision_sig")), &why) == 0) {
        /*
         * issue 34: relayd passes on every differently signed decision of
         * an approval (a forged first one must not hide the user's): the
         * first that verifies is the agent's answer, the others change nothing.
         */
        if (approval_id == NULL || rl_strmap_get(b->decided, approval_id) != NULL) {
            rl_log(RL_LOG_INFO, "approval %s in encrypted session %s: already decided; this decision changes nothing",
                   approval_id != NULL ? approval_id : "?", f->session_id);
            return 0;
        }
        /* Bounded: an approval decided this long ago is no longer asked about. */
        if (rl_strmap_size(b->decided) >= DECIDED_MAX) {
            rl_strmap_free(b->decided, NULL);
            b->decided = rl_strmap_new(DECIDED_MAX);
        }
        if (b->decided == NULL || rl_strmap_put(b->decided, approval_id, (void *)1) != 0) {
            rl_log(RL_LOG_ERROR, "out of memory: approval %s cannot be remembered as decided", approval_id);
            return 0;
        }
        if (strcmp(str_of(f->payload, "decision"), "approve_always") == 0)
            remember_grant(b, approval_id, f->payload);
        return 1;
    }
    rl_log(RL_LOG_WARN, "approval %s in encrypted session %s: decision refused, the agent is not told: %s",
           approval_id != NULL ? approval_id : "?", f->session_id, why != NULL ? why : "encryption is off");
    return 0;
}

/* One line for the terminal, or one JSON line with --json: what a device waits for, and what to do. */
static void announce_device(rl_bridge_t *b, const char *event, const char *device_id, const char *label,
                            const char *platform, const char *sas, const char *text)
{
    if (b->options->json) {
        json_t *line = json_pack("{s:s, s:s, s:s, s:s}", "event", event, "device_id", device_id, "label", label,
                                 "platform", platform);
        char *dumped;
        if (line != NULL && sas != NULL)
            json_object_set_new(line, "sas", json_string(sas));
        dumped = line != NULL ? json_dumps(line, JSON_COMPACT) : NULL;
        if (dumped != NULL)
            printf("%s\n", dumped);
        free(dumped);
        json_decref(line);
    } else {
        printf("%s\n", text);
    }
    fflush(stdout);
}

/* Says which emoji the device must show, and the two ways to let it read this machine's chats. */
static void announce_pending(rl_bridge_t *b, const char *device_id, const char *label, const char *platform,
                             const char *sas)
{
    char text[1024];

    rl_log(RL_LOG_INFO, "device %s (%s, %s) waits for confirmation: %s", device_id, platform, label, sas);
    snprintf(text, sizeof(text),
             "New device \"%s\" (%s, %s) asks for this machine's encrypted chats. It must show %s.\n"
             "To let it in, type on it a code from `relay-bridge devices add`, or confirm it here:\n"
             "  relay-bridge devices confirm %s",
             label, platform, device_id, sas, device_id);
    announce_device(b, "device_pending", device_id, label, platform, sas, text);
}

/* Wraps every session key the bridge holds for a device the user just accepted. */
static size_t grant_sessions(rl_bridge_t *b, const char *device_id)
{
    size_t i, granted = 0;

    for (i = 0; i < rl_keyring_sessions(b->keys); i++) {
        json_t *body = rl_keyring_recipients(b->keys, rl_keyring_session(b->keys, i), device_id, NULL);
        if (body != NULL) {
            submit(b, RL_CALL_ADD_RECIPIENTS, NULL, body);
            granted++;
        }
    }
    return granted;
}

/*
 * The bridge is where the user's confirmations meet: the other devices it
 * accepted get a key it received too (a session started on one phone, a key
 * rotated after a revoke), the revoked ones do not.
 */
static void share_received(rl_bridge_t *b, const char *session_id, const char *by)
{
    json_t *body = rl_keyring_recipients(b->keys, session_id, NULL, by);

    rl_log(RL_LOG_INFO, "session %s: key received from device %s, shared with %zu other devices", session_id, by,
           body != NULL ? json_array_size(json_object_get(body, "recipients")) : 0);
    if (body != NULL)
        submit(b, RL_CALL_ADD_RECIPIENTS, NULL, body);
    /* A session that waits for its key to open its project starts now. */
    rl_session_setup_key(b, session_id);
}

/* A device was accepted: the keys it granted while it waited are taken now, and passed on. */
static void share_held(rl_bridge_t *b)
{
    json_t *received = rl_keyring_take_received(b->keys), *item;
    size_t i;

    json_array_foreach(received, i, item)
    {
        share_received(b, json_string_value(json_object_get(item, "session_id")),
                       json_string_value(json_object_get(item, "by")));
    }
    json_decref(received);
}

static void owner_accepted(void *user, const char *device_id)
{
    rl_bridge_t *b = user;

    share_held(b);
    rl_log(RL_LOG_INFO, "device %s confirmed on this machine: shared the keys of %zu sessions", device_id,
           grant_sessions(b, device_id));
}

/* The owner file changed (relay-bridge devices confirm / revoke in another process), or the bridge starts. */
static void owner_changed(void *user, int fd, short revents)
{
    rl_bridge_t *b = user;

    (void)revents;
    if (fd >= 0 && !rl_enrol_watch_drain(fd))
        return;
    if (rl_keyring_owner_sync(b->keys, owner_accepted, b) < 0)
        rl_log(RL_LOG_WARN, "the owner's confirmations (bridge-owner.json) are unreadable, or readable by others");
}

/* The key updates. 1 when f was one of them (handled or refused), 0 otherwise. */
static int handle_key_update(rl_bridge_t *b, rl_frame_t *f)
{
    const char *update_type = f->update_type;
    const char *device_id = json_string_value(json_object_get(f->payload, "device_id"));
    const char *pubkey = json_string_value(json_object_get(f->payload, "pubkey"));
    const char *label = json_string_value(json_object_get(f->payload, "label"));
    const char *platform = json_string_value(json_object_get(f->payload, "platform"));
    char sas[RL_E2E_SAS_TEXT_SIZE];

    if (strcmp(update_type, "device_pending") != 0 && strcmp(update_type, "device_added") != 0 &&
        strcmp(update_type, "device_revoked") != 0 && strcmp(update_type, "session_key_granted") != 0)
        return 0;
    if (b->keys == NULL) {
        rl_log(RL_LOG_DEBUG, "update %s: %s ignored (encryption is off)", f->update_id, update_type);
        return 1;
    }
    label = label != NULL ? label : "";
    platform = platform != NULL ? platform : "";
    if (device_id == NULL) {
        rl_log(RL_LOG_WARN, "update %s: %s without a device_id", f->update_id, update_type);
    } else if (strcmp(update_type, "device_pending") == 0) {
        if (rl_keyring_sas(b->keys, pubkey, sas) != 0 ||
            rl_keyring_pending(b->keys, device_id, pubkey, label, platform) != 0)
            rl_log(RL_LOG_WARN, "update %s: device_pending %s with a malformed pubkey", f->update_id, device_id);
        else
            announce_pending(b, device_id, label, platform, sas);
    } else if (strcmp(update_type, "device_added") == 0) {
        int result = rl_keyring_accept(b->keys, device_id, pubkey, label, platform,
                                       json_string_value(json_object_get(f->payload, "enrol_proof")));
        if (result == -2) {
            rl_log(RL_LOG_WARN,
                   "device_added %s: not the key this bridge showed the emoji for: refused (no session keys go to it)",
                   device_id);
        } else if (result == -3) {
            char text[1024];
            rl_log(RL_LOG_WARN,
                   "device_added %s (%s): confirmed on the phone, with no valid code from this machine: no keys go "
                   "to it until you confirm it here (relay-bridge devices confirm %s)",
                   device_id, label, device_id);
            snprintf(text, sizeof(text),
                     "Device \"%s\" (%s) says it matches, but brought no valid code from this machine.\n"
                     "If it is yours and showed the same emoji, confirm it here:\n  relay-bridge devices confirm %s",
                     label, platform, device_id);
            announce_device(b, "device_unverified", device_id, label, platform, NULL, text);
        } else if (result < 0) {
            rl_log(RL_LOG_WARN, "device_added %s: malformed, or could not be saved", device_id);
        } else {
            /* Accepted now, or again (the phone confirmed after the owner did): the relay may have refused the
             * first wraps while the phone had not confirmed, so they go again. */
            share_held(b);
            rl_log(RL_LOG_INFO, "device %s (%s) %s: shared the keys of %zu sessions", device_id, label,
                   result == 0 ? "accepted" : "confirmed again", grant_sessions(b, device_id));
        }
    } else if (strcmp(update_type, "device_revoked") == 0) {
        if (rl_keyring_revoke(b->keys, device_id))
            rl_log(RL_LOG_INFO, "device %s revoked: its decisions no longer count", device_id);
    } else if (strcmp(device_id, rl_keyring_device_id(b->keys)) != 0) {
        rl_log(RL_LOG_DEBUG, "session_key_granted for device %s: not this bridge", device_id);
    } else {
        const char *sid = json_string_value(json_object_get(f->payload, "session_id"));
        const char *by = json_string_value(json_object_get(f->payload, "wrapped_by_device_id"));
        const char *why = NULL;
        /* A grant is anonymous by construction: take keys only from devices the user confirmed, signed by them. */
        int result =
            rl_keyring_grant(b->keys, sid, json_string_value(json_object_get(f->payload, "wrapped_session_key")), by,
                             json_string_value(json_object_get(f->payload, "grant_sig")), &why);
        if (result == 1)
            rl_log(RL_LOG_INFO, "session_key_granted for %s by %s: %s", sid, by, why);
        else if (result != 0)
            rl_log(RL_LOG_WARN, "session_key_granted for %s by %s refused: %s (the key is not taken)",
                   sid != NULL ? sid : "?", by != NULL ? by : "nobody", why);
        else
            share_received(b, sid, by);
    }
    return 1;
}

/* ---- updates (spec, Bridge updates) -------------------------------------------------------------- */

/* spec: Decision mapping to the agent gateway. */
static const struct {
    const char *decision, *gateway;
} decision_map[] = {
    {"approve", "allow-once"},
    {"approve_always", "allow-always"},
    {"deny", "deny"},
};

static const char *gateway_decision(const char *decision)
{
    size_t i;

    for (i = 0; decision != NULL && i < sizeof(decision_map) / sizeof(decision_map[0]); i++)
        if (strcmp(decision_map[i].decision, decision) == 0)
            return decision_map[i].gateway;
    /* An unknown decision is never taken as consent. */
    return "deny";
}

/* The opened answer_ct of a device_capability.result (a new reference), or NULL when it does not open. */
static json_t *capability_answer(rl_bridge_t *b, const rl_frame_t *f)
{
    const char *ct = json_string_value(json_object_get(f->payload, "answer_ct"));
    json_t *answer = NULL;
    char *text = NULL;
    int result;

    result = ct != NULL && b->keys != NULL && rl_keyring_has(b->keys, f->session_id)
                 ? rl_keyring_open_field(b->keys, f->session_id, "capabilities", ct, &text)
                 : -1;
    if (result == 0)
        answer = json_loads(text, 0, NULL);
    free(text);
    if (!json_is_object(answer)) {
        json_decref(answer);
        return NULL;
    }
    return answer;
}

/*
 * issue 26: in an encrypted session the user's answer comes sealed
 * (answer_ct, blob path capabilities/<sid>): {location} for a location,
 * {name, mime} of the photo for a camera. Its fields join the agent's line
 * as a plain session's would; an answer that does not open is logged and
 * the line says status "unreadable", so the agent is never left waiting.
 */
static void open_capability_answer(rl_bridge_t *b, const rl_frame_t *f, json_t *line)
{
    json_t *answer;

    if (json_object_get(f->payload, "answer_ct") == NULL)
        return;
    answer = capability_answer(b, f);
    if (answer == NULL) {
        rl_log(RL_LOG_WARN, "update %s: the capability answer does not open with this session's keys: unreadable",
               f->update_id);
        json_object_set_new(line, "status", json_string("unreadable"));
        return;
    }
    if (json_is_object(json_object_get(answer, "location")))
        json_object_set(line, "location", json_object_get(answer, "location"));
    /* A photo was opened while its update was parked (open_fetched): the line copied it as it is now. */
    json_decref(answer);
}

/* An update taken in: de-duplicated already, and neither parked nor behind a parked one of its session. */
/*
 * What the relay says of a session's kind (session.encrypted in
 * session.started and session.message): only a session it said is plain gets
 * its files reported and read in clear (rl_bridge_tool_file, read_agent_file).
 */
static void note_session_kind(rl_bridge_t *b, const rl_frame_t *f)
{
    json_t *flag = json_object_get(json_object_get(f->payload, "session"), "encrypted");

    if (f->session_id[0] == '\0' ||
        (strcmp(f->update_type, "session.started") != 0 && strcmp(f->update_type, "session.message") != 0))
        return;
    /* A map that is full forgets nothing it holds: a session it cannot note as plain gets nothing in clear. */
    if (json_is_true(flag) || json_object_get(json_object_get(f->payload, "message"), "text_ct") != NULL) {
        if (rl_strmap_put(b->encrypted, f->session_id, (void *)1) != 0)
            rl_log(RL_LOG_WARN, "session %s: could not remember that it is encrypted", f->session_id);
    } else if (json_is_false(flag) && rl_strmap_put(b->plain, f->session_id, (void *)1) != 0) {
        rl_log(RL_LOG_WARN, "session %s: could not remember that it is plain: its files are not reported",
               f->session_id);
    }
}

/* line (stolen) to the agent, as the jsonl protocol line every adapter takes (adapters ignore what they do not serve).
 */
static void notify_line(rl_bridge_t *b, json_t *line)
{
    /* To the agent of the line's session (the default one for a line of none). */
    if (line != NULL)
        notify_agent(b, json_string_value(json_object_get(line, "session_id")), line);
    json_decref(line);
}

static int waits_for_setup(rl_bridge_t *b, const rl_frame_t *f);
static int park_for_setup(rl_bridge_t *b, rl_frame_t *f);

static void process_update(rl_bridge_t *b, rl_frame_t *f)
{
    uint64_t id = parse_id(f->update_id);
    int turn_pending = 0;

    note_session_kind(b, f);
    if (strcmp(f->update_type, "session.message") == 0) {
        json_t *message = json_object_get(f->payload, "message");
        json_t *payload = NULL;
        turn_state_t *t;
        if (f->session_id[0] == '\0' || f->interaction_id[0] == '\0' || !json_is_object(message)) {
            rl_log(RL_LOG_WARN, "update %s: session.message without a session, interaction or message", f->update_id);
        } else if (find_turn(b, f->session_id, f->interaction_id) != NULL) {
            rl_log(RL_LOG_WARN, "update %s: interaction %s already has a turn", f->update_id, f->interaction_id);
        } else if (waits_for_setup(b, f) && park_for_setup(b, f) == 0) {
            /* Processed again once git made the session's worktree. */
        } else if ((payload = open_message(b, f)) != NULL) {
            /* The first message of a session the bridge has not seen start (a restart) sets it up the same way. */
            const rl_session_setup_t *setup =
                rl_session_setup(b, f->session_id, json_object_get(f->payload, "session"));
            t = open_turn(b, f->session_id, f->interaction_id, id);
            if (t != NULL && (setup == NULL || setup->state != RL_SETUP_READY)) {
                /* Refused (or still without its key, or out of memory): the user reads why; nothing runs. */
                char text[400];
                snprintf(text, sizeof(text), "[the session cannot start: %s: %s]",
                         setup != NULL && setup->state == RL_SETUP_REFUSED ? setup->code : "not_ready",
                         setup != NULL && setup->state == RL_SETUP_REFUSED ? setup->message
                                                                           : "the session is not set up yet");
                turn_pending = id != 0;
                rl_bridge_finish(b, t->turn, "error", NULL, text);
            } else if (t != NULL) {
                agent_slot_t *slot = &b->agents[setup->agent >= 0 ? setup->agent : (int)b->default_agent];
                turn_pending = id != 0;
                slot->adapter->message(slot->agent, t->turn, payload);
            }
        }
        json_decref(payload);
    } else if (handle_key_update(b, f)) {
        /* device_pending, device_added, device_revoked, session_key_granted */
    } else if (strcmp(f->update_type, "session.cancelled") == 0) {
        const char *iid = json_string_value(json_object_get(f->payload, "interaction_id"));
        cancel_agent(b, f->session_id, iid != NULL ? iid : f->interaction_id);
    } else if (strcmp(f->update_type, "approval.resolved") == 0 && !decision_verified(b, f)) {
        /* Logged: the agent is not told, the approval waits for a decision that verifies, or its expiry. */
    } else if (strcmp(f->update_type, "approval.resolved") == 0) {
        json_t *line = json_pack("{s:s, s:O, s:s, s:s, s:s}", "type", "approval", "approval_id",
                                 json_object_get(f->payload, "approval_id"), "decision",
                                 gateway_decision(json_string_value(json_object_get(f->payload, "decision"))),
                                 "session_id", f->session_id, "interaction_id", f->interaction_id);
        if (line != NULL) {
            copy_fields(line, f->payload, (const char *const[]){"scope", "scope_value", NULL});
            notify_agent(b, f->session_id, line);
            json_decref(line);
        }
        forget_approval(b, str_of(f->payload, "approval_id"));
    } else if (strcmp(f->update_type, "approval.expired") == 0) {
        forget_approval(b, str_of(f->payload, "approval_id"));
        json_t *line = json_pack("{s:s, s:O, s:s, s:s}", "type", "approval_expired", "approval_id",
                                 json_object_get(f->payload, "approval_id"), "session_id", f->session_id,
                                 "interaction_id", f->interaction_id);
        if (line != NULL) {
            notify_agent(b, f->session_id, line);
            json_decref(line);
        }
    } else if (strcmp(f->update_type, "device_capability.result") == 0) {
        /* ours: the user's answer (or its refusal, or expiry) as the jsonl line "capability", payload as sent. */
        json_t *line = json_pack("{s:s, s:s, s:s}", "type", "capability", "session_id", f->session_id, "interaction_id",
                                 f->interaction_id);
        if (line != NULL) {
            copy_fields(line, f->payload,
                        (const char *const[]){"request_id", "capability", "status", "location", "attachments", NULL});
            open_capability_answer(b, f, line);
            notify_agent(b, f->session_id, line);
            json_decref(line);
        }
    } else if (strcmp(f->update_type, "session.config") == 0) {
        json_t *option = json_object_get(f->payload, "option");
        if (json_string_value(json_object_get(option, "id")) == NULL ||
            json_string_value(json_object_get(option, "value")) == NULL)
            rl_log(RL_LOG_WARN, "update %s: session.config without option {id, value}", f->update_id);
        else if (config_verified(b, f))
            notify_line(b, json_pack("{s:s, s:s, s:O, s:O?}", "type", "session_config", "session_id", f->session_id,
                                     "option", option, "request_id", json_object_get(f->payload, "request_id")));
    } else if (strcmp(f->update_type, "session.model.changed") == 0) {
        json_t *model = json_object_get(f->payload, "model");
        if (!json_is_string(model))
            model = json_object_get(json_object_get(f->payload, "session"), "model");
        if (json_is_string(model))
            notify_line(
                b, json_pack("{s:s, s:s, s:O}", "type", "session_model", "session_id", f->session_id, "model", model));
    } else if (strcmp(f->update_type, "session.closed") == 0) {
        notify_line(b, json_pack("{s:s, s:s, s:O?}", "type", "session_closed", "session_id", f->session_id, "reason",
                                 json_object_get(f->payload, "reason")));
    } else if (strcmp(f->update_type, "session.started") == 0) {
        /* Its agent and folder are chosen now (session_setup.h); a refused session's agent hears nothing of it. */
        json_t *session = json_object_get(f->payload, "session");
        const rl_session_setup_t *setup = rl_session_setup(b, f->session_id, session);
        if (setup != NULL && setup->state == RL_SETUP_READY && json_is_object(session))
            rl_bridge_session_ready(b, f->session_id, session);
    } else {
        rl_log(RL_LOG_DEBUG, "update %s: type %s ignored", f->update_id, f->update_type);
    }
    if (!turn_pending && id > b->processed_max)
        b->processed_max = id;
    send_ack(b);
}

/* ---- parked updates (see parked_t) ------------------------------------------------------------------ */

/*
 * The array of f's items whose sealed bytes must be downloaded before f is
 * processed, or NULL: a session.message of an encrypted session whose key
 * the bridge holds (its items with meta_ct), or a capability answer with a
 * photo (its first item). Both as open_message and open_capability_answer
 * would open them.
 */
static json_t *sealed_items(rl_bridge_t *b, const rl_frame_t *f)
{
    json_t *message = json_object_get(f->payload, "message"), *items, *item;
    size_t i;

    if (b->keys == NULL || f->session_id[0] == '\0' || !rl_keyring_has(b->keys, f->session_id))
        return NULL;
    if (strcmp(f->update_type, "device_capability.result") == 0) {
        items = json_object_get(f->payload, "attachments");
        return json_object_get(f->payload, "answer_ct") != NULL && json_array_size(items) > 0 ? items : NULL;
    }
    if (strcmp(f->update_type, "session.message") != 0 || f->interaction_id[0] == '\0' ||
        (!json_is_true(json_object_get(json_object_get(f->payload, "session"), "encrypted")) &&
         json_object_get(message, "text_ct") == NULL))
        return NULL;
    items = json_object_get(message, "attachments");
    json_array_foreach(items, i, item)
    {
        if (json_object_get(item, "meta_ct") != NULL)
            return items;
    }
    return NULL;
}

/* 1 when item i of the array sealed_items gave is sealed: a capability's photo is its first, a message's carry meta_ct.
 */
static int sealed_item(const rl_frame_t *f, json_t *item, size_t i)
{
    if (strcmp(f->update_type, "device_capability.result") == 0)
        return i == 0;
    return json_object_get(item, "meta_ct") != NULL;
}

/* Opens item index of f with the bytes its url gave (NULL: the download failed), on the loop. */
static void open_fetched(rl_bridge_t *b, rl_frame_t *f, size_t index, const char *bytes, size_t len)
{
    json_t *items = sealed_items(b, f), *answer = NULL;

    if (strcmp(f->update_type, "device_capability.result") == 0)
        answer = capability_answer(b, f);
    /* A photo is described by the capability's answer_ct, an attachment by its own meta_ct. */
    rl_sealed_attachment_open(b->keys, f->session_id, json_array_get(items, index),
                              answer != NULL ? json_object_get(answer, "attachment") : NULL, bytes, len);
    json_decref(answer);
}

/*
 * 1 when f is a message whose session waits for git to make its worktree (its setup is made now when f is the
 * session's first word, as processing it would).
 */
static int waits_for_setup(rl_bridge_t *b, const rl_frame_t *f)
{
    const rl_session_setup_t *setup;

    if (strcmp(f->update_type, "session.message") != 0 || f->session_id[0] == '\0')
        return 0;
    setup = rl_session_setup(b, f->session_id, json_object_get(f->payload, "session"));
    return setup != NULL && setup->state == RL_SETUP_MAKING;
}

static int session_parked(rl_bridge_t *b, const char *session_id)
{
    parked_t *p;

    for (p = b->parked; session_id[0] != '\0' && p != NULL; p = p->next)
        if (strcmp(p->frame.session_id, session_id) == 0)
            return 1;
    return 0;
}

/*
 * Processes, in arrival order, each parked update that awaits no download
 * and has no earlier parked update of its session; the rest stay parked.
 */
static void run_parked(rl_bridge_t *b)
{
    json_t *held = json_object(); /* sessions with an update still parked before the one looked at */
    parked_t **pp = &b->parked;

    while (*pp != NULL && held != NULL) {
        parked_t *p = *pp;
        /* Checked here, not by process_update, which would park it again behind its session's later updates. */
        if (p->waiting > 0 || json_object_get(held, p->frame.session_id) != NULL || waits_for_setup(b, &p->frame)) {
            json_object_set_new(held, p->frame.session_id, json_true());
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        b->nparked--;
        rl_log(RL_LOG_DEBUG, "update %s taken out of the parked ones", p->frame.update_id);
        process_update(b, &p->frame);
        rl_frame_free(&p->frame);
        free(p);
    }
    json_decref(held);
}

/*
 * Parks f when it needs downloads or an earlier update of its session is
 * parked (taking f's update: the caller's frame is left empty), and starts
 * its downloads. 0 when f is to be processed now.
 */
static int park(rl_bridge_t *b, rl_frame_t *f)
{
    json_t *items = sealed_items(b, f), *item;
    int behind = session_parked(b, f->session_id);
    parked_t *p, **tail;
    size_t i;

    if (items == NULL && !behind)
        return 0;
    p = b->nparked < PARKED_MAX ? calloc(1, sizeof(*p)) : NULL;
    if (p == NULL) {
        rl_log(RL_LOG_WARN, "%zu updates are parked already: update %s is processed now, out of its session's order",
               b->nparked, f->update_id);
        /* Its sealed items fail as download_failed, each logged: the agent never gets a sealed url. */
        json_array_foreach(items, i, item)
        {
            if (sealed_item(f, item, i))
                open_fetched(b, f, i, NULL, 0);
        }
        return 0;
    }
    p->frame = *f;
    memset(f, 0, sizeof(*f));
    p->update_id = parse_id(p->frame.update_id);
    for (tail = &b->parked; *tail != NULL; tail = &(*tail)->next) {
    }
    *tail = p;
    b->nparked++;
    json_array_foreach(items, i, item)
    {
        const char *url = json_string_value(json_object_get(item, "url"));
        if (!sealed_item(&p->frame, item, i))
            continue;
        if (url != NULL && rl_fetcher_submit(b->fetcher, url, p, i) == 0) {
            p->waiting++;
            continue;
        }
        if (url != NULL)
            rl_log(RL_LOG_WARN, "sealed attachment: %d downloads are waiting already: not queued", RL_FETCH_QUEUE_MAX);
        open_fetched(b, &p->frame, i, NULL, 0);
    }
    if (p->waiting > 0)
        rl_log(RL_LOG_DEBUG, "update %s parked: %zu downloads", p->frame.update_id, p->waiting);
    else if (behind)
        rl_log(RL_LOG_DEBUG, "update %s parked behind an earlier update of session %s", p->frame.update_id,
               p->frame.session_id);
    run_parked(b);
    return 1;
}

/*
 * Parks f (taking its update) until its session's setup is made: 0, or -1 when too many are parked already (f is
 * then processed now, and its session refuses it as not ready). f came from the socket (run_parked keeps a
 * parked message of a session still waiting in its place).
 */
static int park_for_setup(rl_bridge_t *b, rl_frame_t *f)
{
    parked_t *p = b->nparked < PARKED_MAX ? calloc(1, sizeof(*p)) : NULL, **tail;

    if (p == NULL) {
        rl_log(RL_LOG_WARN, "%zu updates are parked already: update %s cannot wait for its session's worktree",
               b->nparked, f->update_id);
        return -1;
    }
    p->frame = *f;
    memset(f, 0, sizeof(*f));
    p->update_id = parse_id(p->frame.update_id);
    /* No update of its session is parked (park() would have parked f behind it): the tail keeps their order. */
    for (tail = &b->parked; *tail != NULL; tail = &(*tail)->next) {
    }
    *tail = p;
    b->nparked++;
    rl_log(RL_LOG_DEBUG, "update %s parked until its session's worktree is made", p->frame.update_id);
    return 0;
}

void rl_bridge_setup_made(rl_bridge_t *b)
{
    run_parked(b);
}

/* Downloads the fetcher finished (its ready callback): their items open, and the updates they completed are processed.
 */
static void handle_fetched(void *user)
{
    rl_bridge_t *b = user;
    rl_fetch_t *job = rl_fetcher_results(b->fetcher);

    while (job != NULL) {
        rl_fetch_t *next = job->next;
        parked_t *p = job->owner;
        open_fetched(b, &p->frame, job->index, job->body, job->len);
        p->waiting--;
        rl_fetch_free(job);
        job = next;
    }
    run_parked(b);
}

/*
 * An attachment's url is followed only when it is a signed file link of the
 * relay this bridge is paired with (rl_fetch_link_allowed): any other, which
 * only a hostile or broken relay sends, could make the bridge or its agent
 * request an address of the bridge's own network (--files-url names one more
 * origin, the relay's public one, when the bridge reaches the relay by
 * another URL). Such an item loses its url
 * and fails as download_failed, logged, before anything reads it.
 */
static void drop_foreign_links(rl_bridge_t *b, rl_frame_t *f, json_t *items)
{
    json_t *item;
    size_t i;

    json_array_foreach(items, i, item)
    {
        const char *url = json_string_value(json_object_get(item, "url"));
        if (json_object_get(item, "url") == NULL || rl_fetch_link_allowed(b->options->server, url) ||
            (b->options->files_url != NULL && rl_fetch_link_allowed(b->options->files_url, url)))
            continue;
        rl_log(RL_LOG_WARN, "update %s: attachment %s links outside the relay (%s): not fetched, download_failed",
               f->update_id,
               json_string_value(json_object_get(item, "key")) != NULL ? json_string_value(json_object_get(item, "key"))
                                                                       : "?",
               b->options->server);
        json_object_del(item, "url");
        json_object_del(item, "url_expires_at");
        json_object_set_new(item, "error", json_string("download_failed"));
    }
}

static void handle_update(rl_bridge_t *b, rl_frame_t *f)
{
    /* spec (delivery rule 1): at least once; de-duplicate by update_id. An update parked was added here once. */
    if (rl_dedupe_add(b->dedupe, f->update_id) == 0) {
        rl_log(RL_LOG_INFO, "update %s delivered again: skipped (already handled)", f->update_id);
        send_ack(b);
        return;
    }
    rl_log(RL_LOG_DEBUG, "update %s %s", f->update_id, f->update_type);
    drop_foreign_links(b, f, json_object_get(json_object_get(f->payload, "message"), "attachments"));
    drop_foreign_links(b, f, json_object_get(f->payload, "attachments"));
    if (!park(b, f))
        process_update(b, f);
}

/* The most of a file file.read.req sends back: its envelope in base64 stays under the relay's 2 MiB cap. */
#define FILE_READ_MAX (1536 * 1024)

static void send_json(rl_bridge_t *b, json_t *frame)
{
    char *text = frame != NULL ? json_dumps(frame, JSON_COMPACT) : NULL;

    if (text != NULL && b->ws != NULL)
        rl_ws_send_text(b->ws, text, strlen(text));
    free(text);
    json_decref(frame);
}

/*
 * Reads path into a malloc'd buffer: the whole file, or its first FILE_READ_MAX
 * bytes with *size the file's own size (larger than *len: the answer is marked
 * truncated, so that a phone can show the start of a large log and say how
 * large it is). NULL with *code set.
 */
static char *read_file(const char *path, size_t *len, long *size, const char **code)
{
    FILE *f = fopen(path, "rb");
    char *bytes;
    size_t want;

    *code = "not_found";
    if (f == NULL)
        return NULL;
    *size = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        *size = ftell(f);
    if (*size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        *code = "read_failed";
        fclose(f);
        return NULL;
    }
    want = *size > FILE_READ_MAX ? FILE_READ_MAX : (size_t)*size;
    bytes = malloc(want + 1);
    *len = bytes != NULL ? fread(bytes, 1, want, f) : 0;
    fclose(f);
    if (bytes == NULL || *len != want) {
        free(bytes);
        *code = "read_failed";
        return NULL;
    }
    return bytes;
}

/* The bytes of path (as read_file) when it lies inside the agent's folder once its links are resolved; NULL with *code
 * set. */
static char *read_in_folder(rl_bridge_t *b, const char *session_id, const char *path, size_t *len, long *size,
                            const char **code)
{
    char root[4096], *real = realpath(path, NULL), *bytes = NULL;
    const char *folder = rl_bridge_session_cwd(b, session_id);
    size_t rootlen;

    /* The session's project folder when it has one, else the agent's own. */
    if (folder == NULL)
        folder = rl_bridge_cwd(b) != NULL ? rl_bridge_cwd(b) : ".";
    *code = real != NULL ? "forbidden" : "not_found";
    if (real != NULL && realpath(folder, root) != NULL) {
        rootlen = strlen(root);
        if (strncmp(real, root, rootlen) == 0 && (real[rootlen] == '/' || real[rootlen] == '\0'))
            bytes = read_file(real, len, size, code);
    }
    free(real);
    return bytes;
}

/*
 * file.read.req (docs/api.md): the relay vouches for a blind index it has in
 * session_agent_files; the bridge opens path_ct, checks that the path gives
 * that blind index and lies under the agent's folder, and answers the file
 * sealed under the same blob key.
 */
static json_t *read_agent_file(rl_bridge_t *b, json_t *req)
{
    const char *sid = json_string_value(json_object_get(req, "session_id"));
    const char *idx = json_string_value(json_object_get(req, "blind_idx"));
    const char *code = "bad_request";
    char blob[256], check[RL_E2E_BLIND_IDX_SIZE], *path = NULL, *bytes = NULL, *sealed;
    json_t *answer = NULL;
    size_t len = 0;
    long size = 0;

    if (sid == NULL || idx == NULL || snprintf(blob, sizeof(blob), "agent_files/%s/%s", sid, idx) >= (int)sizeof(blob))
        goto out;
    code = "no_session_key";
    if (b->keys == NULL || !rl_keyring_has(b->keys, sid))
        goto out;
    code = "crypto_failed";
    if (rl_keyring_open_path(b->keys, sid, blob, json_string_value(json_object_get(req, "path_ct")), &path) != 0 ||
        rl_keyring_file_index(b->keys, sid, path, check) != 0)
        goto out;
    code = "forbidden";
    if (strcmp(check, idx) != 0)
        goto out;
    bytes = read_in_folder(b, sid, path, &len, &size, &code);
    if (bytes == NULL)
        goto out;
    sealed = rl_keyring_seal_path(b->keys, sid, blob, bytes, len);
    if (sealed == NULL) {
        code = "crypto_failed";
        goto out;
    }
    /* Ours: truncated says the envelope holds only the file's start; size_bytes stays the file's size. */
    answer = json_pack("{s:s, s:I, s:s, s:b, s:b}", "mime_type", "application/octet-stream", "size_bytes",
                       (json_int_t)size, "base64", sealed, "encrypted", 1, "truncated", (size_t)size > len);
    free(sealed);
out:
    if (answer == NULL)
        answer = json_pack("{s:{s:s}}", "error", "code", code);
    free(path);
    free(bytes);
    return answer;
}

/*
 * file.read.req {path} (ours, docs/api.md): a plain session's file, answered
 * in clear with the same folder rules, only for a session the relay said is
 * plain: a relay cannot have an encrypted session's file sent in clear.
 */
static json_t *read_plain_file(rl_bridge_t *b, json_t *req)
{
    const char *sid = json_string_value(json_object_get(req, "session_id"));
    const char *path = json_string_value(json_object_get(req, "path"));
    const char *code = "bad_request";
    char *bytes = NULL, *text;
    json_t *answer = NULL;
    size_t len = 0;
    long size = 0;

    if (sid == NULL || path == NULL)
        goto out;
    code = "session_not_plain";
    if (rl_strmap_get(b->plain, sid) == NULL || rl_strmap_get(b->encrypted, sid) != NULL)
        goto out;
    bytes = read_in_folder(b, sid, path, &len, &size, &code);
    if (bytes == NULL)
        goto out;
    text = malloc(RL_BASE64_ENCODED_SIZE(len));
    if (text == NULL) {
        code = "read_failed";
        goto out;
    }
    rl_base64_encode(bytes, len, text);
    answer = json_pack("{s:s, s:I, s:s, s:b, s:b}", "mime_type", "application/octet-stream", "size_bytes",
                       (json_int_t)size, "base64", text, "encrypted", 0, "truncated", (size_t)size > len);
    free(text);
out:
    if (answer == NULL)
        answer = json_pack("{s:{s:s}}", "error", "code", code);
    free(bytes);
    return answer;
}

void rl_bridge_answer(rl_bridge_t *b, const char *type, json_t *req_id, const char *device_id, json_t *answer)
{
    json_t *frame = NULL;
    char *text = NULL, *sealed = NULL;

    if (json_object_get(answer, "error") != NULL) {
        frame = json_pack("{s:O}", "error", json_object_get(answer, "error"));
    } else if (device_id != NULL && *device_id != '\0') {
        /* spec (docs/api.md "Projects"): sealed to the asking device, which the relay can neither read nor forge. */
        text = json_dumps(answer, JSON_COMPACT);
        if (b->keys != NULL && rl_keyring_accepted(b->keys, device_id) && text != NULL)
            sealed = rl_keyring_seal_to_device(b->keys, device_id, text, strlen(text));
        frame = sealed != NULL ? json_pack("{s:s, s:s, s:s}", "sealed", sealed, "to_device_id", device_id,
                                           "from_device_id", rl_keyring_device_id(b->keys))
                               : json_pack("{s:{s:s, s:s}}", "error", "code", "device_not_accepted", "message",
                                           "the device is not one this machine accepted");
    } else if (b->keys == NULL || b->options->plain_projects) {
        /* --no-e2e: nothing is sealed anywhere on this bridge; --plain-projects: the owner said lists may go plain. */
        frame = json_deep_copy(answer);
    } else {
        frame = json_pack("{s:{s:s, s:s}}", "error", "code", "device_required", "message",
                          "name the asking device: the answer is sealed to it");
    }
    if (text != NULL)
        rl_e2e_wipe(text, strlen(text));
    free(text);
    free(sealed);
    if (frame == NULL)
        return;
    json_object_set_new(frame, "type", json_string(type));
    json_object_set(frame, "req_id", req_id);
    send_json(b, frame);
}

int rl_bridge_project_folder(rl_bridge_t *b, const char *project_id, char *out)
{
    const char *code;

    if (b->projects == NULL)
        return 1;
    return project_id != NULL && rl_projects_find(b->projects, project_id, out, &code) == 0 ? 0 : -1;
}

/*
 * agent_sessions.list.req: the agent's own sessions of a project, asked of
 * the named agent (the default when none) when it keeps them (acp:); the
 * others answer that they keep none.
 */
static void list_agent_sessions(rl_bridge_t *b, json_t *req)
{
    int index = rl_bridge_agent_index(b, json_string_value(json_object_get(req, "agent")));
    agent_slot_t *slot = index >= 0 ? &b->agents[index] : NULL;
    json_t *line, *error;

    if (slot == NULL || slot->adapter != &rl_agent_acp) {
        error = json_pack("{s:{s:s, s:s}}", "error", "code", slot == NULL ? "agent_not_configured" : "unsupported",
                          "message",
                          slot == NULL ? "this machine's relay-bridge has no agent of that name"
                                       : "this agent keeps no sessions of its own");
        rl_bridge_answer(b, "agent_sessions.list.resp", json_object_get(req, "req_id"), NULL, error);
        json_decref(error);
        return;
    }
    line = json_pack("{s:s, s:O, s:O?, s:O?, s:O?}", "type", "agent_sessions_list", "req_id",
                     json_object_get(req, "req_id"), "device_id", json_object_get(req, "device_id"), "project_id",
                     json_object_get(req, "project_id"), "agent", json_object_get(req, "agent"));
    if (line != NULL)
        slot->adapter->notify(slot->agent, line);
    json_decref(line);
}

/*
 * projects.list.req {device_id?} (docs/api.md "Projects"): the list, sealed
 * to the asking device (rl_bridge_answer's rules).
 */
static void list_projects(rl_bridge_t *b, json_t *req)
{
    json_t *answer = json_pack("{s:o}", "projects", b->projects != NULL ? rl_projects_list(b->projects) : json_array());
    const char *device_id = json_string_value(json_object_get(req, "device_id"));

    if (answer != NULL)
        rl_bridge_answer(b, "projects.list.resp", json_object_get(req, "req_id"), device_id, answer);
    json_decref(answer);
}

/* Requests of the relay on the socket: <type>.req answered <type>.resp with the same req_id. */
static void answer_request(rl_bridge_t *b, rl_frame_t *f)
{
    const char *type = json_string_value(json_object_get(f->root, "type"));
    json_t *req_id = json_object_get(f->root, "req_id"), *answer;

    if (type == NULL || !json_is_string(req_id))
        return;
    if (strcmp(type, "file.read.req") == 0)
        answer = json_object_get(f->root, "path") != NULL ? read_plain_file(b, f->root) : read_agent_file(b, f->root);
    else if (strcmp(type, "models.list.req") == 0)
        /* Our adapters run one agent with its own model: nothing to choose from. */
        answer = json_pack("{s:[]}", "models");
    else if (strcmp(type, "agent_sessions.list.req") == 0) {
        list_agent_sessions(b, f->root);
        return;
    } else if (strcmp(type, "projects.list.req") == 0) {
        list_projects(b, f->root);
        return;
    } else
        return;
    json_object_set_new(answer, "type",
                        json_string(strcmp(type, "file.read.req") == 0 ? "file.read.resp" : "models.list.resp"));
    json_object_set(answer, "req_id", req_id);
    send_json(b, answer);
}

static void on_frame(void *user, const char *text, size_t len)
{
    rl_bridge_t *b = user;
    rl_frame_t f;
    char err[128];

    b->last_frame_at = rl_clock_mono_ms();
    if (rl_frame_parse(text, len, &f, err, sizeof(err)) != 0) {
        rl_log(RL_LOG_WARN, "ignored a frame: %s", err);
        return;
    }
    switch (f.type) {
    case RL_FRAME_READY:
        snprintf(b->installation_id, sizeof(b->installation_id), "%s", f.installation_id);
        rl_log(RL_LOG_INFO, "connected as %s", b->installation_id);
        rl_bridge_write_status("connected", b->options->server, b->installation_id);
        break;
    case RL_FRAME_PING:
        /* spec (delivery rule 4): answer ping with pong. */
        rl_ws_send_text(b->ws, "{\"type\":\"pong\"}", 15);
        break;
    case RL_FRAME_UPDATE:
        handle_update(b, &f);
        break;
    case RL_FRAME_OTHER:
        answer_request(b, &f);
        break;
    }
    rl_frame_free(&f);
}

/* ---- the connection ---------------------------------------------------------------------------- */

static void socket_closed(rl_bridge_t *b);

static void unpaired(rl_bridge_t *b, const char *how)
{
    rl_log(RL_LOG_ERROR,
           "the relay no longer accepts this bridge (%s): the installation was revoked or its token is invalid", how);
    rl_log(RL_LOG_ERROR, "pair again with: relay-bridge pair --server %s", b->options->server);
    b->exit_code = RL_BRIDGE_EXIT_UNPAIRED;
    b->stopping = 1;
}

static void schedule_reconnect(rl_bridge_t *b)
{
    long delay = rl_backoff_next(&b->backoff);

    b->reconnect_at = rl_clock_mono_ms() + delay;
    rl_log(RL_LOG_INFO, "reconnecting in %ld ms", delay);
    rl_bridge_write_status("connecting", b->options->server, b->installation_id);
}

/*
 * The first frame on every socket says which bridge this is (docs/api.md,
 * "hello"); then the device key is registered again, as the authors' bridge
 * does on each open, so a relay that lost it or a new key is caught up.
 */
static void say_hello(rl_bridge_t *b)
{
    char frame[128];

    snprintf(frame, sizeof(frame), "{\"type\":\"hello\",\"version\":\"%s\"}", RL_VERSION);
    rl_ws_send_text(b->ws, frame, strlen(frame));
    if (b->keys != NULL)
        submit(b, RL_CALL_REGISTER_DEVICE, NULL,
               json_pack("{s:s, s:s}", "pubkey", rl_keyring_pubkey(b->keys), "label",
                         b->options->label != NULL ? b->options->label : "relay-bridge"));
}

static void connect_socket(rl_bridge_t *b)
{
    char url[1024], err[256];
    rl_ws_options_t o = {
        .url = url, .token = b->options->token, .on_message = on_frame, .user = b, .max_message = 4 * 1024 * 1024};
    long status = 0;
    int result;

    snprintf(url, sizeof(url), "%s/v1/bridge/ws", b->options->server);
    result = rl_ws_connect(&o, &b->ws, &status, err, sizeof(err));
    if (result == RL_WS_E_REFUSED && status == 401) {
        /* spec (delivery rule 4 and Errors): 401 invalid_token, stop reconnecting. */
        unpaired(b, "HTTP 401 invalid_token on connect");
        return;
    }
    if (result != 0) {
        rl_log(RL_LOG_WARN, "connect failed: %s", err);
        b->ws = NULL;
        schedule_reconnect(b);
        return;
    }
    /* spec (delivery rule 5): reset the backoff after a successful open. */
    rl_backoff_reset(&b->backoff);
    b->reconnect_at = -1;
    b->last_frame_at = rl_clock_mono_ms();
    b->acked = 0;
    say_hello(b);
    /* Frames that came with the 101 answer are already read: handle them now, poll() will not say so. */
    if (rl_ws_handle(b->ws) != 0)
        socket_closed(b);
}

static void socket_closed(rl_bridge_t *b)
{
    int code = rl_ws_close_code(b->ws);

    rl_log(RL_LOG_WARN, "socket closed (%d %s)", code, rl_ws_close_reason(b->ws));
    rl_ws_free(b->ws);
    b->ws = NULL;
    if (code == 4401) {
        unpaired(b, "close code 4401");
        return;
    }
    if (code == 1012) {
        /*
         * 1012 (service restart): relayd is stopping on purpose, and another
         * node, or the same relay started again, takes the socket: try now,
         * then back off from the first step if nobody answers yet.
         */
        rl_backoff_reset(&b->backoff);
        b->reconnect_at = rl_clock_mono_ms();
        rl_log(RL_LOG_INFO, "the relay is restarting: reconnecting now");
        rl_bridge_write_status("connecting", b->options->server, b->installation_id);
        return;
    }
    schedule_reconnect(b);
}

/* ---- results from the writer and signals ----------------------------------------------------------- */

/* The answer to the end of a turn's last message: the turn is done (close_turn, and its ack). */
static int ends_turn(const rl_rest_result_t *r)
{
    const turn_state_t *t = r->turn != NULL ? r->turn->owner : NULL;

    return r->call == RL_CALL_END && t != NULL && t->ended && t->message == r->turn;
}

static void handle_results(rl_bridge_t *b)
{
    rl_rest_result_t *r = rl_rest_results(b->rest);

    while (r != NULL) {
        rl_rest_result_t *next = r->next;
        if (ends_turn(r))
            close_turn(b, r->turn->owner);
        else if (!r->ok && r->turn != NULL && r->turn->dropped && r->turn->owner != NULL &&
                 !((turn_state_t *)r->turn->owner)->ended) {
            /* spec (client rule 4): the target is gone, so is the work for it: stop the agent's turn. */
            rl_log(RL_LOG_WARN, "interaction %s: %s, dropping the turn", r->turn->interaction_id, r->code);
            cancel_agent(b, r->turn->session_id, r->turn->interaction_id);
        } else if (r->call == RL_CALL_REGISTER_DEVICE) {
            const char *id = json_string_value(json_object_get(r->result, "device_id"));
            if (r->ok && id != NULL) {
                if (json_is_true(json_object_get(r->result, "pubkey_changed")))
                    rl_log(RL_LOG_INFO, "registered a new device key as %s: devices must confirm it again", id);
                else
                    rl_log(RL_LOG_DEBUG, "device key registered as %s", id);
                rl_keyring_set_device_id(b->keys, id);
            } else {
                rl_log(RL_LOG_WARN,
                       "the relay did not register this bridge's device key (%s): encrypted sessions cannot reach "
                       "this bridge",
                       r->code);
            }
        } else if (r->call == RL_CALL_REQUEST_CAPABILITY) {
            /* The agent learns the relay's request_id (pending), or that its request failed and why. */
            json_t *line = json_pack("{s:s, s:O, s:O, s:O, s:s}", "type", "capability", "session_id",
                                     json_object_get(r->body, "session_id"), "interaction_id",
                                     json_object_get(r->body, "interaction_id"), "capability",
                                     json_object_get(r->body, "capability"), "status", r->ok ? "pending" : "failed");
            if (line != NULL) {
                if (r->ok)
                    copy_fields(line, r->result, (const char *const[]){"request_id", "expires_at", NULL});
                else
                    json_object_set_new(line, "error", json_string(r->code));
                notify_agent(b, json_string_value(json_object_get(r->body, "session_id")), line);
                json_decref(line);
            }
        } else if (r->call == RL_CALL_REQUEST_APPROVAL) {
            json_t *line = NULL;
            const char *id = json_string_value(json_object_get(r->body, "approval_id"));
            if (!r->ok)
                line = json_pack("{s:s, s:s, s:s, s:O, s:O}", "type", "approval", "approval_id", id, "decision", "deny",
                                 "session_id", json_object_get(r->body, "session_id"), "interaction_id",
                                 json_object_get(r->body, "interaction_id"));
            else if (json_is_true(json_object_get(r->result, "auto_resolved")) &&
                     rl_strmap_get(b->asked, str_of(r->body, "approval_id")) != NULL && !granted(b, r->body)) {
                rl_log(RL_LOG_WARN,
                       "approval %s in an encrypted session: the relay resolved it by a grant no signed decision "
                       "made here: refused, the agent is told deny",
                       str_of(r->body, "approval_id"));
                line = json_pack("{s:s, s:s, s:s, s:O, s:O}", "type", "approval", "approval_id", id, "decision", "deny",
                                 "session_id", json_object_get(r->body, "session_id"), "interaction_id",
                                 json_object_get(r->body, "interaction_id"));
            } else if (json_is_true(json_object_get(r->result, "auto_resolved")))
                line = json_pack("{s:s, s:s, s:s, s:O, s:O}", "type", "approval", "approval_id", id, "decision",
                                 gateway_decision(json_string_value(json_object_get(r->result, "decision"))),
                                 "session_id", json_object_get(r->body, "session_id"), "interaction_id",
                                 json_object_get(r->body, "interaction_id"));
            if (line != NULL || !r->ok)
                forget_approval(b, str_of(r->body, "approval_id"));
            if (line != NULL) {
                if (!r->ok)
                    json_object_set_new(line, "error", json_string(r->code));
                notify_agent(b, json_string_value(json_object_get(r->body, "session_id")), line);
                json_decref(line);
            }
        }
        rl_rest_result_free(r);
        r = next;
    }
    if (rl_rest_revoked(b->rest))
        unpaired(b, "410 installation_revoked");
}

/*
 * At a stop, after the writes still queued went out: a turn whose end the relay answered meanwhile is done, and
 * its ack goes before the socket closes. Without it the relay would replay the message the agent has already
 * answered, and the next run would answer it again (docs/bridge.md, SIGTERM). Nothing else of the results is
 * acted on: the agents are gone by then.
 */
static void ack_ended_turns(rl_bridge_t *b)
{
    rl_rest_result_t *r = rl_rest_results(b->rest);

    while (r != NULL) {
        rl_rest_result_t *next = r->next;
        if (ends_turn(r))
            close_turn(b, r->turn->owner);
        rl_rest_result_free(r);
        r = next;
    }
}

static void handle_signals(rl_bridge_t *b)
{
    struct signalfd_siginfo si;

    while (read(b->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGCHLD) {
            rl_child_reap();
        } else {
            rl_log(RL_LOG_INFO, "stopping on signal %u", si.ssi_signo);
            b->stopping = 1;
        }
    }
}

/* ---- the loop ---------------------------------------------------------------------------------- */

static long next_timer(rl_bridge_t *b)
{
    long due = b->ws == NULL && b->reconnect_at >= 0 ? b->reconnect_at : -1;
    turn_state_t *t;

    if (b->ws != NULL)
        due = b->last_frame_at + SILENCE_MS;
    for (t = b->turns; t != NULL; t = t->next) {
        long d = rl_batch_due(&t->batch);
        if (d >= 0 && (due < 0 || d < due))
            due = d;
    }
    return due;
}

static void run_timers(rl_bridge_t *b)
{
    long now = rl_clock_mono_ms();
    turn_state_t *t;

    for (t = b->turns; t != NULL; t = t->next) {
        long d = rl_batch_due(&t->batch);
        if (d >= 0 && d <= now)
            flush_turn(b, t, 0);
    }
    if (b->ws != NULL && now - b->last_frame_at >= SILENCE_MS) {
        rl_log(RL_LOG_WARN, "no frame from the relay for %ld s: reconnecting", SILENCE_MS / 1000);
        rl_ws_free(b->ws);
        b->ws = NULL;
        schedule_reconnect(b);
    } else if (b->ws == NULL && b->reconnect_at >= 0 && b->reconnect_at <= now && !b->stopping) {
        connect_socket(b);
    }
}

static void loop(rl_bridge_t *b)
{
    watches_t *w = &b->watches;

    while (!b->stopping) {
        struct pollfd *fds;
        size_t nw = w->count, i;
        int n = 0, ws_slot = -1, timeout;
        long due = next_timer(b);

        if (watches_prepare(w) != 0) {
            rl_bridge_fail(b, "out of memory");
            break;
        }
        fds = w->fds;
        fds[n++] = (struct pollfd){.fd = b->sigfd, .events = POLLIN};
        fds[n++] = (struct pollfd){.fd = rl_rest_fd(b->rest), .events = POLLIN};
        fds[n++] = (struct pollfd){.fd = rl_jobs_fd(b->jobs), .events = POLLIN};
        if (b->ws != NULL) {
            ws_slot = n;
            fds[n++] = (struct pollfd){.fd = rl_ws_fd(b->ws), .events = rl_ws_events(b->ws)};
        }
        if (nw > 0)
            memcpy(w->snapshot, w->items, sizeof(watch_t) * nw);
        for (i = 0; i < nw; i++)
            fds[(size_t)n + i] = (struct pollfd){.fd = w->snapshot[i].fd, .events = w->snapshot[i].events};
        timeout = due < 0 ? -1 : due <= rl_clock_mono_ms() ? 0 : (int)(due - rl_clock_mono_ms());
        if (poll(fds, (nfds_t)((size_t)n + nw), timeout) < 0 && errno != EINTR) {
            rl_bridge_fail(b, "poll failed");
            break;
        }
        if (fds[0].revents != 0)
            handle_signals(b);
        if (fds[1].revents != 0)
            handle_results(b);
        if (fds[2].revents != 0)
            rl_jobs_dispatch(b->jobs);
        if (ws_slot >= 0 && b->ws != NULL && fds[ws_slot].revents != 0 && rl_ws_handle(b->ws) != 0)
            socket_closed(b);
        for (i = 0; i < nw; i++) {
            const watch_t *seen = &w->snapshot[i];
            size_t k;
            if (fds[(size_t)n + i].revents == 0)
                continue;
            /* A callback may have unwatched this fd (or another): call only live watches. */
            for (k = 0; k < w->count; k++) {
                if (w->items[k].fd == seen->fd && w->items[k].cb == seen->cb && w->items[k].user == seen->user) {
                    seen->cb(seen->user, seen->fd, fds[(size_t)n + i].revents);
                    break;
                }
            }
        }
        run_timers(b);
        /* Frames queued by this turn (acks, pongs) go out now. */
        if (b->ws != NULL && (rl_ws_events(b->ws) & POLLOUT) && rl_ws_handle(b->ws) != 0)
            socket_closed(b);
    }
}

/*
 * The agents of options, checked (names, schemes, one default) before anything
 * starts: 0, or -1 with the reason logged.
 */
static int plan_agents(rl_bridge_t *b, const rl_bridge_options_t *o)
{
    rl_bridge_agent_spec_t one = {"default", o->agent};
    const rl_bridge_agent_spec_t *specs = o->nagents > 0 ? o->agents : &one;
    size_t n = o->nagents > 0 ? o->nagents : (o->agent != NULL ? 1 : 0), i, j;
    const char *arg;

    if (n == 0 || n > RL_BRIDGE_AGENTS_MAX) {
        rl_log(RL_LOG_ERROR, "run needs one --agent to %d", RL_BRIDGE_AGENTS_MAX);
        return -1;
    }
    for (i = 0; i < n; i++) {
        agent_slot_t *slot = &b->agents[i];
        if (specs[i].name == NULL || !rl_agent_name_valid(specs[i].name, strlen(specs[i].name))) {
            rl_log(RL_LOG_ERROR, "agent names are 1-32 of a-z, 0-9, _ and -");
            return -1;
        }
        for (j = 0; j < i; j++) {
            if (strcmp(b->agents[j].name, specs[i].name) == 0) {
                rl_log(RL_LOG_ERROR, "two agents are named %s", specs[i].name);
                return -1;
            }
        }
        slot->adapter = specs[i].spec != NULL ? rl_agent_find(specs[i].spec, &arg) : NULL;
        if (slot->adapter == NULL) {
            rl_log(RL_LOG_ERROR, "agent %s: --agent must be exec:COMMAND, jsonl:COMMAND, acp:COMMAND or openai:URL",
                   specs[i].name);
            return -1;
        }
        snprintf(slot->name, sizeof(slot->name), "%s", specs[i].name);
    }
    b->nagents = n;
    b->default_agent = 0;
    if (o->default_agent != NULL) {
        int found = rl_bridge_agent_index(b, o->default_agent);
        if (found < 0) {
            rl_log(RL_LOG_ERROR, "--default-agent %s: no agent has that name", o->default_agent);
            return -1;
        }
        b->default_agent = (size_t)found;
    }
    return 0;
}

/* Starts every agent of the plan: 0, or -1 (the reason logged by its adapter). */
static int start_agents(rl_bridge_t *b, const rl_bridge_options_t *o)
{
    const rl_bridge_agent_spec_t *specs = o->nagents > 0 ? o->agents : NULL;
    const char *arg;
    size_t i;

    for (i = 0; i < b->nagents; i++) {
        agent_slot_t *slot = &b->agents[i];
        rl_agent_find(specs != NULL ? specs[i].spec : o->agent, &arg);
        if (slot->adapter->create(b, slot->name, arg, &slot->agent) != 0) {
            rl_log(RL_LOG_ERROR, "agent %s could not start", slot->name);
            return -1;
        }
        rl_log(RL_LOG_INFO, "agent %s: %s%s", slot->name, slot->adapter->scheme,
               i == b->default_agent ? " (the default)" : "");
    }
    /* An exec agent writes no manifest line: the bridge says which agents it has itself. */
    if (b->agents[b->default_agent].adapter == &rl_agent_exec)
        send_manifest(b);
    return 0;
}

int rl_bridge_run(const rl_bridge_options_t *options)
{
    rl_bridge_t b;
    rl_rest_options_t rest_options = {0};
    rl_client_t *client = NULL;
    turn_state_t *t;
    size_t i;

    memset(&b, 0, sizeof(b));
    b.options = options;
    b.sigfd = -1;
    b.ownerfd = -1;
    b.reconnect_at = -1;
    snprintf(b.installation_id, sizeof(b.installation_id), "%s",
             options->installation_id != NULL ? options->installation_id : "");
    if (plan_agents(&b, options) != 0)
        return RL_BRIDGE_EXIT_USAGE;
    if (options->nroots > 0) {
        char err[256];
        b.projects = rl_projects_open(options->roots, options->nroots, err, sizeof(err));
        if (b.projects == NULL) {
            rl_log(RL_LOG_ERROR, "%s", err);
            return RL_BRIDGE_EXIT_USAGE;
        }
    }
    rl_backoff_init(&b.backoff, options->backoff_first_ms, options->backoff_cap_ms);
    /* Threads inherit this mask: signals reach the loop through the signalfd only. */
    sigemptyset(&blocked_signals);
    sigaddset(&blocked_signals, SIGCHLD);
    sigaddset(&blocked_signals, SIGINT);
    sigaddset(&blocked_signals, SIGTERM);
    sigaddset(&blocked_signals, SIGHUP);
    sigprocmask(SIG_BLOCK, &blocked_signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    b.sigfd = signalfd(-1, &blocked_signals, SFD_NONBLOCK | SFD_CLOEXEC);
    b.dedupe = rl_dedupe_new(0);
    if (b.sigfd < 0 || b.dedupe == NULL || rl_client_new(options->server, NULL, &client) != 0) {
        rl_log(RL_LOG_ERROR, "cannot start (bad server URL or out of resources)");
        b.exit_code = RL_BRIDGE_EXIT_ERROR;
        goto out;
    }
    rest_options.outage_ms = options->retry_window_ms >= 0 ? options->retry_window_ms : RL_BRIDGE_RETRY_WINDOW_MS;
    b.rest = rl_rest_start(client, options->token, &rest_options);
    if (b.rest == NULL) {
        rl_client_free(client);
        b.exit_code = RL_BRIDGE_EXIT_ERROR;
        goto out;
    }
    b.jobs = rl_jobs_start();
    b.fetcher = b.jobs != NULL ? rl_fetcher_start(b.jobs, handle_fetched, &b) : NULL;
    if (b.fetcher == NULL) {
        rl_log(RL_LOG_ERROR, "cannot start the job queue");
        b.exit_code = RL_BRIDGE_EXIT_ERROR;
        goto out;
    }
    /* Before the agents: they may post a session's state as soon as they run. */
    b.states = rl_strmap_new(REMEMBERED_MAX);
    b.setups = rl_setups_new();
    if (b.states == NULL || b.setups == NULL || start_agents(&b, options) != 0) {
        b.exit_code = RL_BRIDGE_EXIT_ERROR;
        goto out;
    }
    b.encrypted = rl_strmap_new(REMEMBERED_MAX);
    b.plain = rl_strmap_new(REMEMBERED_MAX);
    b.config_ts = rl_strmap_new(REMEMBERED_MAX);
    b.asked = rl_strmap_new(REMEMBERED_MAX);
    b.decided = rl_strmap_new(DECIDED_MAX);
    if (b.encrypted == NULL || b.plain == NULL || b.asked == NULL || b.decided == NULL || b.config_ts == NULL ||
        b.states == NULL) {
        b.exit_code = RL_BRIDGE_EXIT_ERROR;
        goto out;
    }
    if (!options->no_e2e) {
        char err[256];
        b.keys = rl_keyring_open(err, sizeof(err));
        if (b.keys == NULL) {
            rl_log(RL_LOG_ERROR, "encryption: %s (or run with --no-e2e)", err);
            b.exit_code = RL_BRIDGE_EXIT_ERROR;
            goto out;
        }
        b.ownerfd = rl_enrol_watch_open();
        if (b.ownerfd >= 0)
            rl_bridge_watch(&b, b.ownerfd, POLLIN, owner_changed, &b);
        else
            rl_log(RL_LOG_WARN, "cannot watch the config folder: devices confirmed here count from the next start");
        owner_changed(&b, -1, 0);
    }
    rl_log(RL_LOG_INFO, "starting with %zu agents, %zu project roots", b.nagents, options->nroots);
    connect_socket(&b);
    loop(&b);
out:
    /*
     * Before the agent goes: the jobs (a model call, a prompt's fetch, a sealed attachment's download) end
     * now and are done, as stopped. Parked updates were never acked, so the relay replays them to the next
     * run (spec delivery rule 3), whose de-duplication starts afresh.
     */
    rl_jobs_stop(b.jobs);
    rl_fetcher_stop(b.fetcher);
    if (b.parked != NULL)
        rl_log(RL_LOG_INFO, "%zu updates still parked are left to the relay's replay", b.nparked);
    while (b.parked != NULL) {
        parked_t *p = b.parked;
        b.parked = p->next;
        rl_frame_free(&p->frame);
        free(p);
    }
    for (i = 0; i < b.nagents; i++) {
        if (b.agents[i].agent != NULL)
            b.agents[i].adapter->destroy(b.agents[i].agent);
        json_decref(b.agents[i].manifest);
    }
    /* On a plain stop, give writes already queued (a turn's last deltas and its end) a moment to go out. */
    if (b.rest != NULL && b.exit_code == RL_BRIDGE_EXIT_OK) {
        long deadline = rl_clock_mono_ms() + 5000;
        while (rl_rest_pending(b.rest) > 0 && rl_clock_mono_ms() < deadline)
            poll(NULL, 0, 20);
        ack_ended_turns(&b);
    }
    if (b.ws != NULL) {
        rl_ws_close(b.ws, 1000, "bridge stopping");
        rl_ws_handle(b.ws);
        rl_ws_free(b.ws);
    }
    rl_rest_stop(b.rest);
    while (b.turns != NULL) {
        t = b.turns;
        b.turns = t->next;
        rl_batch_free(&t->batch);
        rl_reply_free(&t->reply);
        rl_turn_unref(t->message);
        rl_turn_unref(t->turn);
        free(t);
    }
    rl_dedupe_free(b.dedupe);
    rl_setups_free(b.setups);
    rl_projects_free(b.projects);
    rl_keyring_free(b.keys);
    rl_strmap_free(b.encrypted, NULL);
    rl_strmap_free(b.plain, NULL);
    rl_strmap_free(b.asked, asked_free);
    rl_strmap_free(b.decided, NULL);
    rl_strmap_free(b.config_ts, free);
    rl_strmap_free(b.states, state_free);
    while (b.grants != NULL) {
        grant_t *g = b.grants;
        b.grants = g->next;
        free(g->action);
        free(g->scope);
        free(g->value);
        free(g);
    }
    free(b.watches.items);
    free(b.watches.snapshot);
    free(b.watches.fds);
    if (b.sigfd >= 0)
        close(b.sigfd);
    if (b.ownerfd >= 0)
        close(b.ownerfd);
    rl_bridge_write_status("stopped", options->server, b.installation_id);
    return b.exit_code;
}
