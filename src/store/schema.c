/*
 * The relay's schema as one list of steps (schema.h). A step is the same
 * SQL on both engines (both) where it can be, and each engine's own
 * (sqlite, postgres) where their types or their histories differ:
 * INTEGER and BIGINT, BYTEA for bytes, a table rebuilt in SQLite where
 * PostgreSQL alters it in place, SQLite's json1 where PostgreSQL has jsonb.
 *
 * The histories: SQLite has a step per change from the first release on
 * (1 to 10 before PostgreSQL existed); PostgreSQL began at the schema of
 * SQLite 10 in one step, given as step 10's postgres SQL, and has had a
 * step beside each of SQLite's since. Versions are counted per engine (a
 * step without SQL for an engine is no version of it): SQLite's version N
 * is step N, PostgreSQL's version N is step N + 9. A new step goes at the
 * end, with SQL for both engines (both when it is the same), so that the
 * engines keep step with each other from here on.
 *
 * A store's version is the number of its steps run, kept in its
 * schema_version table: a step once released is never changed, only
 * followed by another.
 */
#include <stddef.h>

#include "store/schema.h"

typedef struct step {
    const char *both;     /* the same SQL on both engines, or NULL */
    const char *sqlite;   /* SQLite's own, or NULL (with both NULL: no SQLite step) */
    const char *postgres; /* PostgreSQL's own, or NULL (with both NULL: no PostgreSQL step) */
} step_t;

static const step_t steps[] = {
    /* 1: every table of the relay, even where later features fill them. */
    {.sqlite = "CREATE TABLE users ("
               "  id TEXT PRIMARY KEY,"
               "  created_at INTEGER NOT NULL);"
               "CREATE TABLE installations ("
               "  id TEXT PRIMARY KEY,"
               "  user_id TEXT NOT NULL REFERENCES users(id),"
               "  token_hash TEXT,"
               "  token_env TEXT NOT NULL DEFAULT 'live',"
               "  connector_type TEXT NOT NULL,"
               "  host_label TEXT NOT NULL,"
               "  custom_display_name TEXT,"
               "  custom_emoji TEXT,"
               "  state TEXT NOT NULL DEFAULT 'live',"
               "  manifest TEXT,"
               "  next_update_id INTEGER NOT NULL DEFAULT 1,"
               "  acked_update_id INTEGER NOT NULL DEFAULT 0,"
               "  created_at INTEGER NOT NULL,"
               "  revoked_at INTEGER);"
               "CREATE INDEX installations_user ON installations(user_id);"
               "CREATE TABLE pairings ("
               "  poll_hash TEXT PRIMARY KEY,"
               "  code_hash TEXT NOT NULL,"
               "  installation_id TEXT NOT NULL,"
               "  connector_type TEXT NOT NULL,"
               "  host_label TEXT NOT NULL,"
               "  state TEXT NOT NULL,"
               "  user_id TEXT,"
               "  created_at INTEGER NOT NULL,"
               "  expires_at INTEGER NOT NULL,"
               "  claimed_at INTEGER);"
               "CREATE UNIQUE INDEX pairings_live_code ON pairings(code_hash) WHERE state = 'pending';"
               "CREATE TABLE sessions ("
               "  id TEXT PRIMARY KEY,"
               "  user_id TEXT NOT NULL REFERENCES users(id),"
               "  installation_id TEXT NOT NULL REFERENCES installations(id),"
               "  title TEXT,"
               "  state TEXT NOT NULL DEFAULT 'active',"
               "  created_at INTEGER NOT NULL,"
               "  updated_at INTEGER NOT NULL,"
               "  deleted_at INTEGER);"
               "CREATE INDEX sessions_user ON sessions(user_id);"
               "CREATE TABLE interactions ("
               "  id TEXT PRIMARY KEY,"
               "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
               "  created_at INTEGER NOT NULL);"
               "CREATE TABLE messages ("
               "  id TEXT PRIMARY KEY,"
               "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
               "  interaction_id TEXT,"
               "  role TEXT NOT NULL,"
               "  text TEXT NOT NULL,"
               "  attachments TEXT,"
               "  reply_to TEXT,"
               "  usage TEXT,"
               "  finish_reason TEXT,"
               "  state TEXT NOT NULL,"
               "  created_at INTEGER NOT NULL,"
               "  finalized_at INTEGER);"
               "CREATE INDEX messages_session ON messages(session_id, created_at);"
               "CREATE TABLE approvals ("
               "  id TEXT PRIMARY KEY,"
               "  installation_id TEXT NOT NULL,"
               "  session_id TEXT NOT NULL,"
               "  interaction_id TEXT NOT NULL,"
               "  request TEXT NOT NULL,"
               "  state TEXT NOT NULL,"
               "  decision TEXT,"
               "  scope TEXT,"
               "  scope_value TEXT,"
               "  created_at INTEGER NOT NULL,"
               "  expires_at INTEGER NOT NULL,"
               "  resolved_at INTEGER);"
               "CREATE TABLE grants ("
               "  installation_id TEXT NOT NULL,"
               "  action TEXT NOT NULL,"
               "  scope TEXT NOT NULL,"
               "  scope_value TEXT NOT NULL,"
               "  created_at INTEGER NOT NULL,"
               "  PRIMARY KEY (installation_id, action, scope, scope_value));"
               "CREATE TABLE idempotency ("
               "  owner TEXT NOT NULL,"
               "  scope TEXT NOT NULL,"
               "  key TEXT NOT NULL,"
               "  body_hash TEXT NOT NULL,"
               "  response TEXT NOT NULL,"
               "  created_at INTEGER NOT NULL,"
               "  PRIMARY KEY (owner, scope, key));"
               "CREATE TABLE updates ("
               "  installation_id TEXT NOT NULL,"
               "  update_id INTEGER NOT NULL,"
               "  type TEXT NOT NULL,"
               "  session_id TEXT,"
               "  interaction_id TEXT,"
               "  payload TEXT NOT NULL,"
               "  created_at INTEGER NOT NULL,"
               "  PRIMARY KEY (installation_id, update_id));"},
    /* 2: uploaded attachments, and the index that pages a session's history. */
    {.sqlite = "CREATE TABLE attachments ("
               "  key TEXT PRIMARY KEY,"
               "  user_id TEXT NOT NULL,"
               "  mime TEXT NOT NULL,"
               "  size INTEGER NOT NULL,"
               "  name TEXT,"
               "  created_at INTEGER NOT NULL);"
               "CREATE INDEX sessions_deleted ON sessions(deleted_at) WHERE deleted_at IS NOT NULL;"
               "CREATE INDEX updates_created ON updates(created_at);"},
    /* 3: streamed messages as append-only deltas, task state, approval owners. */
    {.sqlite = "ALTER TABLE messages ADD COLUMN placeholder INTEGER NOT NULL DEFAULT 0;"
               "CREATE TABLE message_deltas ("
               "  message_id TEXT NOT NULL,"
               "  seq INTEGER NOT NULL,"
               "  delta TEXT NOT NULL,"
               "  PRIMARY KEY (message_id, seq));"
               "CREATE TABLE tasks ("
               "  installation_id TEXT NOT NULL,"
               "  task_id TEXT NOT NULL,"
               "  session_id TEXT NOT NULL,"
               "  interaction_id TEXT NOT NULL,"
               "  kind TEXT,"
               "  name TEXT,"
               "  status TEXT NOT NULL,"
               "  status_label TEXT,"
               "  created_at INTEGER NOT NULL,"
               "  updated_at INTEGER NOT NULL,"
               "  PRIMARY KEY (installation_id, task_id));"
               "ALTER TABLE approvals ADD COLUMN user_id TEXT;"
               "CREATE INDEX approvals_pending ON approvals(expires_at) WHERE state = 'pending';"
               "CREATE INDEX idempotency_created ON idempotency(created_at);"},
    /*
     * 4: the two tables written on every streamed delta are clustered on
     * their keys, so that an insert touches one B-tree instead of a table
     * and its key index (half the pages each commit writes to the WAL).
     */
    {.sqlite = "CREATE TABLE message_deltas_new ("
               "  message_id TEXT NOT NULL,"
               "  seq INTEGER NOT NULL,"
               "  delta TEXT NOT NULL,"
               "  PRIMARY KEY (message_id, seq)) WITHOUT ROWID;"
               "INSERT INTO message_deltas_new SELECT message_id, seq, delta FROM message_deltas;"
               "DROP TABLE message_deltas;"
               "ALTER TABLE message_deltas_new RENAME TO message_deltas;"
               "CREATE TABLE idempotency_new ("
               "  owner TEXT NOT NULL,"
               "  scope TEXT NOT NULL,"
               "  key TEXT NOT NULL,"
               "  body_hash TEXT NOT NULL,"
               "  response TEXT NOT NULL,"
               "  created_at INTEGER NOT NULL,"
               "  PRIMARY KEY (owner, scope, key)) WITHOUT ROWID;"
               "INSERT INTO idempotency_new SELECT owner, scope, key, body_hash, response, created_at FROM idempotency;"
               "DROP TABLE idempotency;"
               "ALTER TABLE idempotency_new RENAME TO idempotency;"
               "CREATE INDEX idempotency_created ON idempotency(created_at);"},
    /*
     * 5: a delta's idempotency key lives in its own row instead of a row of
     * its own in `idempotency` (one B-tree insert per delta, not two); when
     * the message ends, its keys move to one `delta_keys` row per message,
     * kept as long as other idempotency records.
     */
    {.sqlite = "ALTER TABLE message_deltas ADD COLUMN key TEXT;"
               "ALTER TABLE message_deltas ADD COLUMN body_hash TEXT;"
               "CREATE TABLE delta_keys ("
               "  message_id TEXT PRIMARY KEY,"
               "  keys TEXT NOT NULL,"
               "  created_at INTEGER NOT NULL) WITHOUT ROWID;"
               "CREATE INDEX delta_keys_created ON delta_keys(created_at);"},
    /*
     * 6: a batch writes one row per message, not per delta: the row holds
     * the deltas of seq..seq_last joined, and their keys as a JSON array of
     * [key, body hash] pairs (rows of schema 5 keep key and body_hash).
     */
    {.sqlite = "ALTER TABLE message_deltas ADD COLUMN seq_last INTEGER;"
               "ALTER TABLE message_deltas ADD COLUMN keys TEXT;"},
    /*
     * 7: every streamed-delta row in the shape of schema 6 (the rows of
     * schema 5 carried one key each in key and body_hash), so that the
     * backend reads one shape. Deltas stored before schema 5 keep their keys
     * in `idempotency`.
     */
    {.sqlite =
         "UPDATE message_deltas SET keys = json_array(json_array(key, body_hash)) WHERE keys IS NULL AND key IS NOT NULL;"
         "UPDATE message_deltas SET keys = '[]' WHERE keys IS NULL;"
         "UPDATE message_deltas SET seq_last = seq WHERE seq_last IS NULL;"},
    /* 8: the messages still streaming, for the sweep that ends those left open past their window. */
    {.sqlite = "CREATE INDEX messages_streaming ON messages(created_at) WHERE state = 'streaming';"},
    /* 9: the secrets every node of a relay shares: the token-signing and URL-signing keys. */
    {.sqlite = "CREATE TABLE secrets ("
               "  name TEXT PRIMARY KEY,"
               "  value TEXT NOT NULL,"
               "  created_at INTEGER NOT NULL) WITHOUT ROWID;"},
    /*
     * 10: the web client: sign-in codes (their SHA-256, single use, short
     * lived) and Web Push subscriptions (the keys the messages are
     * encrypted for must be kept as they are).
     */
    {.sqlite = "CREATE TABLE login_codes ("
               "  code_hash TEXT PRIMARY KEY,"
               "  user_id TEXT NOT NULL,"
               "  created_at INTEGER NOT NULL,"
               "  expires_at INTEGER NOT NULL);"
               "CREATE INDEX login_codes_expires ON login_codes(expires_at);"
               "CREATE TABLE push_subscriptions ("
               "  endpoint TEXT PRIMARY KEY,"
               "  user_id TEXT NOT NULL REFERENCES users(id),"
               "  p256dh TEXT NOT NULL,"
               "  auth TEXT NOT NULL,"
               "  created_at INTEGER NOT NULL);"
               "CREATE INDEX push_subscriptions_user ON push_subscriptions(user_id, created_at);",
     /* PostgreSQL 1: every table of the relay as of SQLite schema 10. */
     .postgres =
         "CREATE TABLE users ("
         "  id TEXT PRIMARY KEY,"
         "  created_at BIGINT NOT NULL);"
         "CREATE TABLE installations ("
         "  id TEXT PRIMARY KEY,"
         "  user_id TEXT NOT NULL REFERENCES users(id),"
         "  token_hash TEXT,"
         "  token_env TEXT NOT NULL DEFAULT 'live',"
         "  connector_type TEXT NOT NULL,"
         "  host_label TEXT NOT NULL,"
         "  custom_display_name TEXT,"
         "  custom_emoji TEXT,"
         "  state TEXT NOT NULL DEFAULT 'live',"
         "  manifest TEXT,"
         "  next_update_id BIGINT NOT NULL DEFAULT 1,"
         "  acked_update_id BIGINT NOT NULL DEFAULT 0,"
         "  created_at BIGINT NOT NULL,"
         "  revoked_at BIGINT);"
         "CREATE INDEX installations_user ON installations(user_id);"
         "CREATE TABLE pairings ("
         "  poll_hash TEXT PRIMARY KEY,"
         "  code_hash TEXT NOT NULL,"
         "  installation_id TEXT NOT NULL,"
         "  connector_type TEXT NOT NULL,"
         "  host_label TEXT NOT NULL,"
         "  state TEXT NOT NULL,"
         "  user_id TEXT,"
         "  created_at BIGINT NOT NULL,"
         "  expires_at BIGINT NOT NULL,"
         "  claimed_at BIGINT);"
         "CREATE UNIQUE INDEX pairings_live_code ON pairings(code_hash) WHERE state = 'pending';"
         "CREATE TABLE sessions ("
         "  id TEXT PRIMARY KEY,"
         "  user_id TEXT NOT NULL REFERENCES users(id),"
         "  installation_id TEXT NOT NULL REFERENCES installations(id),"
         "  title TEXT,"
         "  state TEXT NOT NULL DEFAULT 'active',"
         "  created_at BIGINT NOT NULL,"
         "  updated_at BIGINT NOT NULL,"
         "  deleted_at BIGINT);"
         "CREATE INDEX sessions_user ON sessions(user_id);"
         "CREATE INDEX sessions_deleted ON sessions(deleted_at) WHERE deleted_at IS NOT NULL;"
         "CREATE TABLE interactions ("
         "  id TEXT PRIMARY KEY,"
         "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
         "  created_at BIGINT NOT NULL);"
         /* PostgreSQL does not index the referencing side: without it a purge's cascade reads the whole table. */
         "CREATE INDEX interactions_session ON interactions(session_id);"
         /* seq orders a session's messages by insertion, as SQLite's rowid does. */
         "CREATE TABLE messages ("
         "  id TEXT PRIMARY KEY,"
         "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
         "  interaction_id TEXT,"
         "  role TEXT NOT NULL,"
         "  text TEXT NOT NULL,"
         "  attachments TEXT,"
         "  reply_to TEXT,"
         "  usage TEXT,"
         "  finish_reason TEXT,"
         "  state TEXT NOT NULL,"
         "  created_at BIGINT NOT NULL,"
         "  finalized_at BIGINT,"
         "  placeholder INTEGER NOT NULL DEFAULT 0,"
         "  seq BIGSERIAL NOT NULL);"
         "CREATE INDEX messages_session ON messages(session_id, seq);"
         "CREATE INDEX messages_streaming ON messages(created_at) WHERE state = 'streaming';"
         "CREATE TABLE approvals ("
         "  id TEXT PRIMARY KEY,"
         "  installation_id TEXT NOT NULL,"
         "  session_id TEXT NOT NULL,"
         "  interaction_id TEXT NOT NULL,"
         "  request TEXT NOT NULL,"
         "  state TEXT NOT NULL,"
         "  decision TEXT,"
         "  scope TEXT,"
         "  scope_value TEXT,"
         "  created_at BIGINT NOT NULL,"
         "  expires_at BIGINT NOT NULL,"
         "  resolved_at BIGINT,"
         "  user_id TEXT);"
         "CREATE INDEX approvals_pending ON approvals(expires_at) WHERE state = 'pending';"
         "CREATE TABLE grants ("
         "  installation_id TEXT NOT NULL,"
         "  action TEXT NOT NULL,"
         "  scope TEXT NOT NULL,"
         "  scope_value TEXT NOT NULL,"
         "  created_at BIGINT NOT NULL,"
         "  PRIMARY KEY (installation_id, action, scope, scope_value));"
         "CREATE TABLE idempotency ("
         "  owner TEXT NOT NULL,"
         "  scope TEXT NOT NULL,"
         "  key TEXT NOT NULL,"
         "  body_hash TEXT NOT NULL,"
         "  response TEXT NOT NULL,"
         "  created_at BIGINT NOT NULL,"
         "  PRIMARY KEY (owner, scope, key));"
         "CREATE INDEX idempotency_created ON idempotency(created_at);"
         "CREATE TABLE updates ("
         "  installation_id TEXT NOT NULL,"
         "  update_id BIGINT NOT NULL,"
         "  type TEXT NOT NULL,"
         "  session_id TEXT,"
         "  interaction_id TEXT,"
         "  payload TEXT NOT NULL,"
         "  created_at BIGINT NOT NULL,"
         "  PRIMARY KEY (installation_id, update_id));"
         "CREATE INDEX updates_created ON updates(created_at);"
         "CREATE TABLE attachments ("
         "  key TEXT PRIMARY KEY,"
         "  user_id TEXT NOT NULL,"
         "  mime TEXT NOT NULL,"
         "  size BIGINT NOT NULL,"
         "  name TEXT,"
         "  created_at BIGINT NOT NULL);"
         /*
          * A run's text is bytes with a length (the contract): BYTEA holds any
          * byte, where TEXT refuses NUL. SQLite's key and body_hash columns of
          * schema 5 are gone: schema 7 moved every key into keys.
          */
         "CREATE TABLE message_deltas ("
         "  message_id TEXT NOT NULL,"
         "  seq BIGINT NOT NULL,"
         "  seq_last BIGINT NOT NULL,"
         "  delta BYTEA NOT NULL,"
         "  keys TEXT NOT NULL,"
         "  PRIMARY KEY (message_id, seq));"
         "CREATE TABLE delta_keys ("
         "  message_id TEXT PRIMARY KEY,"
         "  keys TEXT NOT NULL,"
         "  created_at BIGINT NOT NULL);"
         "CREATE INDEX delta_keys_created ON delta_keys(created_at);"
         "CREATE TABLE tasks ("
         "  installation_id TEXT NOT NULL,"
         "  task_id TEXT NOT NULL,"
         "  session_id TEXT NOT NULL,"
         "  interaction_id TEXT NOT NULL,"
         "  kind TEXT,"
         "  name TEXT,"
         "  status TEXT NOT NULL,"
         "  status_label TEXT,"
         "  created_at BIGINT NOT NULL,"
         "  updated_at BIGINT NOT NULL,"
         "  PRIMARY KEY (installation_id, task_id));"
         /* The secrets every node of a relay shares: the token-signing and URL-signing keys. */
         "CREATE TABLE secrets ("
         "  name TEXT PRIMARY KEY,"
         "  value TEXT NOT NULL,"
         "  created_at BIGINT NOT NULL);"
         /* The web client's sign-in codes (their SHA-256) and Web Push subscriptions. */
         "CREATE TABLE login_codes ("
         "  code_hash TEXT PRIMARY KEY,"
         "  user_id TEXT NOT NULL,"
         "  created_at BIGINT NOT NULL,"
         "  expires_at BIGINT NOT NULL);"
         "CREATE INDEX login_codes_expires ON login_codes(expires_at);"
         "CREATE TABLE push_subscriptions ("
         "  endpoint TEXT PRIMARY KEY,"
         "  user_id TEXT NOT NULL REFERENCES users(id),"
         "  p256dh TEXT NOT NULL,"
         "  auth TEXT NOT NULL,"
         "  created_at BIGINT NOT NULL);"
         "CREATE INDEX push_subscriptions_user ON push_subscriptions(user_id, created_at);"},
    /*
     * 11: an approval id is unique per installation, not across the relay
     * (issue 11): one installation's ids neither block nor reveal another's.
     * A user's decision finds the approval by (user_id, id).
     */
    {.sqlite =
         "CREATE TABLE approvals_new ("
         "  id TEXT NOT NULL,"
         "  installation_id TEXT NOT NULL,"
         "  user_id TEXT,"
         "  session_id TEXT NOT NULL,"
         "  interaction_id TEXT NOT NULL,"
         "  request TEXT NOT NULL,"
         "  state TEXT NOT NULL,"
         "  decision TEXT,"
         "  scope TEXT,"
         "  scope_value TEXT,"
         "  created_at INTEGER NOT NULL,"
         "  expires_at INTEGER NOT NULL,"
         "  resolved_at INTEGER,"
         "  PRIMARY KEY (installation_id, id));"
         "INSERT INTO approvals_new(id, installation_id, user_id, session_id, interaction_id, request, state, decision,"
         "  scope, scope_value, created_at, expires_at, resolved_at)"
         "  SELECT id, installation_id, user_id, session_id, interaction_id, request, state, decision, scope, scope_value,"
         "  created_at, expires_at, resolved_at FROM approvals;"
         "DROP TABLE approvals;"
         "ALTER TABLE approvals_new RENAME TO approvals;"
         "CREATE INDEX approvals_pending ON approvals(expires_at) WHERE state = 'pending';"
         "CREATE INDEX approvals_of_user ON approvals(user_id, id);",
     /* PostgreSQL 2: an approval id is unique per installation; a user's decision finds it by (user_id, id). */
     .postgres = "ALTER TABLE approvals DROP CONSTRAINT approvals_pkey;"
                 "ALTER TABLE approvals ADD PRIMARY KEY (installation_id, id);"
                 "CREATE INDEX approvals_of_user ON approvals(user_id, id);"},
    /*
     * 12: attachments go when nothing references them any more (issue 11):
     * which sessions use each one (kept with the session, gone with its
     * purge), when it was first used, and when it was marked for removal
     * (its file is unlinked before the row goes). The uses of messages
     * stored before are filled in from their attachments.
     */
    {.sqlite = "ALTER TABLE attachments ADD COLUMN used_at INTEGER;"
               "ALTER TABLE attachments ADD COLUMN doomed_at INTEGER;"
               "CREATE TABLE attachment_uses ("
               "  key TEXT NOT NULL,"
               "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
               "  PRIMARY KEY (key, session_id)) WITHOUT ROWID;"
               "CREATE INDEX attachment_uses_session ON attachment_uses(session_id);"
               "INSERT OR IGNORE INTO attachment_uses(key, session_id)"
               "  SELECT json_extract(j.value, '$.key'), m.session_id FROM messages m, json_each(m.attachments) j"
               "  WHERE m.attachments IS NOT NULL AND json_valid(m.attachments)"
               "  AND json_extract(j.value, '$.key') IN (SELECT key FROM attachments);"
               "UPDATE attachments SET used_at = created_at WHERE key IN (SELECT key FROM attachment_uses);"
               "CREATE INDEX attachments_of_user ON attachments(user_id);"
               "CREATE INDEX attachments_unused ON attachments(created_at) WHERE used_at IS NULL AND doomed_at IS NULL;"
               "CREATE INDEX attachments_used ON attachments(used_at) WHERE used_at IS NOT NULL AND doomed_at IS NULL;"
               "CREATE INDEX attachments_doomed ON attachments(doomed_at) WHERE doomed_at IS NOT NULL;",
     /*
      * PostgreSQL 3: which sessions use each attachment, when it was first
      * used and when it was marked for removal; the uses of messages stored
      * before are filled in from their attachments.
      */
     .postgres =
         "ALTER TABLE attachments ADD COLUMN used_at BIGINT;"
         "ALTER TABLE attachments ADD COLUMN doomed_at BIGINT;"
         "CREATE TABLE attachment_uses ("
         "  key TEXT NOT NULL,"
         "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
         "  PRIMARY KEY (key, session_id));"
         "CREATE INDEX attachment_uses_session ON attachment_uses(session_id);"
         "INSERT INTO attachment_uses(key, session_id)"
         "  SELECT DISTINCT j->>'key', m.session_id FROM messages m, jsonb_array_elements(m.attachments::jsonb) j"
         "  WHERE m.attachments LIKE '[%' AND j->>'key' IN (SELECT key FROM attachments);"
         "UPDATE attachments SET used_at = created_at WHERE key IN (SELECT key FROM attachment_uses);"
         "CREATE INDEX attachments_of_user ON attachments(user_id);"
         "CREATE INDEX attachments_unused ON attachments(created_at) WHERE used_at IS NULL AND doomed_at IS NULL;"
         "CREATE INDEX attachments_used ON attachments(used_at) WHERE used_at IS NOT NULL AND doomed_at IS NULL;"
         "CREATE INDEX attachments_doomed ON attachments(doomed_at) WHERE doomed_at IS NOT NULL;"},
    /*
     * 13: a session's timeline (issue 22): tasks keep their arguments and
     * results (JSON text) for as long as their session, and go with it
     * instead of a day after their last update; approvals go with their
     * session too. Tasks and approvals are read by session in time order.
     * Those whose session is already gone are dropped now.
     */
    {.sqlite = "ALTER TABLE tasks ADD COLUMN args TEXT;"
               "ALTER TABLE tasks ADD COLUMN partial_result TEXT;"
               "ALTER TABLE tasks ADD COLUMN result TEXT;"
               "ALTER TABLE tasks ADD COLUMN error TEXT;"
               "DELETE FROM tasks WHERE session_id NOT IN (SELECT id FROM sessions);"
               "DELETE FROM approvals WHERE session_id NOT IN (SELECT id FROM sessions);"
               "CREATE INDEX tasks_session ON tasks(session_id, created_at, task_id);"
               "CREATE INDEX approvals_session ON approvals(session_id, created_at, id);",
     /*
      * PostgreSQL 4: a session's timeline: tasks keep their arguments and
      * results for as long as their session and go with it, as approvals do;
      * the three kinds are read by session in time order.
      */
     .postgres = "ALTER TABLE tasks ADD COLUMN args TEXT;"
                 "ALTER TABLE tasks ADD COLUMN partial_result TEXT;"
                 "ALTER TABLE tasks ADD COLUMN result TEXT;"
                 "ALTER TABLE tasks ADD COLUMN error TEXT;"
                 "DELETE FROM tasks WHERE session_id NOT IN (SELECT id FROM sessions);"
                 "DELETE FROM approvals WHERE session_id NOT IN (SELECT id FROM sessions);"
                 "CREATE INDEX tasks_session ON tasks(session_id, created_at, task_id COLLATE \"C\");"
                 "CREATE INDEX approvals_session ON approvals(session_id, created_at, id COLLATE \"C\");"
                 "CREATE INDEX messages_session_time ON messages(session_id, created_at, seq);"},
    /*
     * 14: device capability requests (issue 28), kept like approvals: by
     * the relay's id, pending ones by user and by expiry for the sweep.
     */
    {.sqlite = "CREATE TABLE capability_requests ("
               "  id TEXT PRIMARY KEY,"
               "  installation_id TEXT NOT NULL,"
               "  user_id TEXT NOT NULL,"
               "  session_id TEXT NOT NULL,"
               "  interaction_id TEXT NOT NULL,"
               "  capability TEXT NOT NULL,"
               "  request TEXT NOT NULL,"
               "  state TEXT NOT NULL,"
               "  answer TEXT,"
               "  created_at INTEGER NOT NULL,"
               "  expires_at INTEGER NOT NULL,"
               "  answered_at INTEGER);"
               "CREATE INDEX capability_requests_pending ON capability_requests(expires_at) WHERE state = 'pending';"
               "CREATE INDEX capability_requests_of_user ON capability_requests(user_id, created_at);"
               "CREATE INDEX capability_requests_session ON capability_requests(session_id);",
     /* PostgreSQL 5: device capability requests (issue 28), kept like approvals. */
     .postgres = "CREATE TABLE capability_requests ("
                 "  id TEXT PRIMARY KEY,"
                 "  installation_id TEXT NOT NULL,"
                 "  user_id TEXT NOT NULL,"
                 "  session_id TEXT NOT NULL,"
                 "  interaction_id TEXT NOT NULL,"
                 "  capability TEXT NOT NULL,"
                 "  request TEXT NOT NULL,"
                 "  state TEXT NOT NULL,"
                 "  answer TEXT,"
                 "  created_at BIGINT NOT NULL,"
                 "  expires_at BIGINT NOT NULL,"
                 "  answered_at BIGINT);"
                 "CREATE INDEX capability_requests_pending ON capability_requests(expires_at) WHERE state = 'pending';"
                 "CREATE INDEX capability_requests_of_user ON capability_requests(user_id, created_at);"
                 "CREATE INDEX capability_requests_session ON capability_requests(session_id);"},
    /*
     * 15: end-to-end encryption (issue 26): devices (public keys), which
     * bridges each client device confirmed, the session keys wrapped for
     * each device, the files agents touched (by blind index); a session's
     * encrypted flag and model, an installation's bridge version.
     */
    {.sqlite = "ALTER TABLE sessions ADD COLUMN encrypted INTEGER NOT NULL DEFAULT 0;"
               "ALTER TABLE sessions ADD COLUMN model TEXT;"
               "ALTER TABLE installations ADD COLUMN bridge_version TEXT;"
               "CREATE TABLE devices ("
               "  id TEXT PRIMARY KEY,"
               "  user_id TEXT NOT NULL,"
               "  installation_id TEXT,"
               "  platform TEXT NOT NULL,"
               "  label TEXT,"
               "  pubkey TEXT NOT NULL,"
               "  created_at INTEGER NOT NULL,"
               "  revoked_at INTEGER);"
               "CREATE INDEX devices_of_user ON devices(user_id, created_at) WHERE revoked_at IS NULL;"
               "CREATE TABLE device_confirmations ("
               "  device_id TEXT NOT NULL,"
               "  bridge_device_id TEXT NOT NULL,"
               "  at INTEGER NOT NULL,"
               "  PRIMARY KEY (device_id, bridge_device_id)) WITHOUT ROWID;"
               "CREATE INDEX device_confirmations_bridge ON device_confirmations(bridge_device_id);"
               "CREATE TABLE session_recipients ("
               "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
               "  device_id TEXT NOT NULL,"
               "  wrapped_session_key TEXT NOT NULL,"
               "  wrapped_by_device_id TEXT,"
               "  created_at INTEGER NOT NULL,"
               "  PRIMARY KEY (session_id, device_id)) WITHOUT ROWID;"
               "CREATE INDEX session_recipients_device ON session_recipients(device_id, created_at);"
               "CREATE TABLE session_agent_files ("
               "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
               "  path_blind_idx TEXT NOT NULL,"
               "  tool TEXT NOT NULL,"
               "  size_bytes INTEGER,"
               "  mime TEXT,"
               "  path_ct TEXT NOT NULL,"
               "  display_name_ct TEXT NOT NULL,"
               "  updated_at INTEGER NOT NULL,"
               "  PRIMARY KEY (session_id, path_blind_idx)) WITHOUT ROWID;",
     /* PostgreSQL 6: end-to-end encryption (issue 26). */
     .postgres = "ALTER TABLE sessions ADD COLUMN encrypted BOOLEAN NOT NULL DEFAULT FALSE;"
                 "ALTER TABLE sessions ADD COLUMN model TEXT;"
                 "ALTER TABLE installations ADD COLUMN bridge_version TEXT;"
                 "CREATE TABLE devices ("
                 "  id TEXT PRIMARY KEY,"
                 "  user_id TEXT NOT NULL,"
                 "  installation_id TEXT,"
                 "  platform TEXT NOT NULL,"
                 "  label TEXT,"
                 "  pubkey TEXT NOT NULL,"
                 "  created_at BIGINT NOT NULL,"
                 "  revoked_at BIGINT);"
                 "CREATE INDEX devices_of_user ON devices(user_id, created_at) WHERE revoked_at IS NULL;"
                 "CREATE TABLE device_confirmations ("
                 "  device_id TEXT NOT NULL,"
                 "  bridge_device_id TEXT NOT NULL,"
                 "  at BIGINT NOT NULL,"
                 "  PRIMARY KEY (device_id, bridge_device_id));"
                 "CREATE INDEX device_confirmations_bridge ON device_confirmations(bridge_device_id);"
                 "CREATE TABLE session_recipients ("
                 "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
                 "  device_id TEXT NOT NULL,"
                 "  wrapped_session_key TEXT NOT NULL,"
                 "  wrapped_by_device_id TEXT,"
                 "  created_at BIGINT NOT NULL,"
                 "  PRIMARY KEY (session_id, device_id));"
                 "CREATE INDEX session_recipients_device ON session_recipients(device_id, created_at);"
                 "CREATE TABLE session_agent_files ("
                 "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
                 "  path_blind_idx TEXT NOT NULL,"
                 "  tool TEXT NOT NULL,"
                 "  size_bytes BIGINT,"
                 "  mime TEXT,"
                 "  path_ct TEXT NOT NULL,"
                 "  display_name_ct TEXT NOT NULL,"
                 "  updated_at BIGINT NOT NULL,"
                 "  PRIMARY KEY (session_id, path_blind_idx));"},
    /* A client checks a grant it fetches back as it checks the event (docs/api.md, "Signed grants"). */
    {.both = "ALTER TABLE session_recipients ADD COLUMN grant_sig TEXT;"},
    /* An encrypted session's first decision keeps its signature: a retry is told apart from another (issue 34). */
    {.both = "ALTER TABLE approvals ADD COLUMN decision_sig TEXT;"
             "ALTER TABLE approvals ADD COLUMN device_id TEXT;"},
    /* Who may redeem a pairing (docs/api.md, "Who redeems a pairing"); rows from before: the poll token only. */
    {.both = "ALTER TABLE pairings ADD COLUMN redeem_by TEXT;"
             "UPDATE pairings SET redeem_by = 'poll_token';"},
    /* issue 36: a session's agent, project (JSON, or an encrypted one's envelope), resumed agent session, state. */
    {.both = "ALTER TABLE sessions ADD COLUMN agent TEXT;"
             "ALTER TABLE sessions ADD COLUMN project TEXT;"
             "ALTER TABLE sessions ADD COLUMN resume TEXT;"
             "ALTER TABLE sessions ADD COLUMN agent_state TEXT;"},
};

#define NSTEPS (sizeof(steps) / sizeof(steps[0]))

static const char *sql_of(const step_t *step, rl_schema_dialect_t dialect)
{
    if (step->both != NULL)
        return step->both;
    return dialect == RL_SCHEMA_SQLITE ? step->sqlite : step->postgres;
}

int rl_schema_target(rl_schema_dialect_t dialect)
{
    size_t i;
    int n = 0;

    for (i = 0; i < NSTEPS; ++i)
        n += sql_of(&steps[i], dialect) != NULL;
    return n;
}

const char *rl_schema_step(rl_schema_dialect_t dialect, int version)
{
    size_t i;
    int n = 0;

    for (i = 0; i < NSTEPS; ++i) {
        const char *sql = sql_of(&steps[i], dialect);
        if (sql != NULL && n++ == version)
            return sql;
    }
    return NULL;
}
