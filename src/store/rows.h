/*
 * Each row type of store.h described once: its columns in the order the
 * statements list them, each as X(T, column, field, type) with T the row's
 * struct (libuv's UV_ERRNO_MAP style). From one description come the
 * column list of its SELECTs and INSERT (RL_ROW_COLUMNS), the INSERT's
 * placeholders (RL_ROW_MARKS) and the descriptor that binds and reads it
 * (RL_ROW_DESCRIBE), so a column is added in one place.
 *
 * Each macro takes F for its first column and N for the others (a list
 * has no separator before its first item), and T.
 */
#ifndef RL_STORE_ROWS_H
#define RL_STORE_ROWS_H

#include <stddef.h>

#include "store/sql.h"

#define RL_ROW_USER(F, N, T) F(T, id, id, TEXT) N(T, created_at, created_at, INT)

#define RL_ROW_PAIRING(F, N, T)                                                                                        \
    F(T, poll_hash, poll_hash, TEXT)                                                                                   \
    N(T, code_hash, code_hash, TEXT)                                                                                   \
    N(T, installation_id, installation_id, TEXT)                                                                       \
    N(T, connector_type, connector_type, TEXT)                                                                         \
    N(T, host_label, host_label, TEXT)                                                                                 \
    N(T, state, state, TEXT)                                                                                           \
    N(T, user_id, user_id, TEXT)                                                                                       \
    N(T, created_at, created_at, INT)                                                                                  \
    N(T, expires_at, expires_at, INT)                                                                                  \
    N(T, claimed_at, claimed_at, TIME)                                                                                 \
    N(T, redeem_by, redeem_by, TEXT)

#define RL_ROW_INSTALLATION(F, N, T)                                                                                   \
    F(T, id, id, TEXT)                                                                                                 \
    N(T, user_id, user_id, TEXT)                                                                                       \
    N(T, token_hash, token_hash, TEXT)                                                                                 \
    N(T, token_env, token_env, TEXT)                                                                                   \
    N(T, connector_type, connector_type, TEXT)                                                                         \
    N(T, host_label, host_label, TEXT)                                                                                 \
    N(T, custom_display_name, custom_display_name, TEXT)                                                               \
    N(T, custom_emoji, custom_emoji, TEXT)                                                                             \
    N(T, state, state, TEXT)                                                                                           \
    N(T, manifest, manifest, TEXT)                                                                                     \
    N(T, created_at, created_at, INT)                                                                                  \
    N(T, revoked_at, revoked_at, TIME)                                                                                 \
    N(T, bridge_version, bridge_version, TEXT)

#define RL_ROW_SESSION(F, N, T)                                                                                        \
    F(T, id, id, TEXT)                                                                                                 \
    N(T, user_id, user_id, TEXT)                                                                                       \
    N(T, installation_id, installation_id, TEXT)                                                                       \
    N(T, title, title, TEXT)                                                                                           \
    N(T, state, state, TEXT)                                                                                           \
    N(T, created_at, created_at, INT)                                                                                  \
    N(T, updated_at, updated_at, INT)                                                                                  \
    N(T, deleted_at, deleted_at, TIME)                                                                                 \
    N(T, encrypted, encrypted, BOOL)                                                                                   \
    N(T, model, model, TEXT)                                                                                           \
    N(T, agent, agent, TEXT)                                                                                           \
    N(T, project, project, TEXT)                                                                                       \
    N(T, resume, resume, TEXT)                                                                                         \
    N(T, agent_state, agent_state, TEXT)

#define RL_ROW_INTERACTION(F, N, T)                                                                                    \
    F(T, id, id, TEXT) N(T, session_id, session_id, TEXT) N(T, created_at, created_at, INT)

#define RL_ROW_MESSAGE(F, N, T)                                                                                        \
    F(T, id, id, TEXT)                                                                                                 \
    N(T, session_id, session_id, TEXT)                                                                                 \
    N(T, interaction_id, interaction_id, TEXT)                                                                         \
    N(T, role, role, TEXT)                                                                                             \
    N(T, text, text, TEXT)                                                                                             \
    N(T, attachments, attachments, TEXT)                                                                               \
    N(T, reply_to, reply_to, TEXT)                                                                                     \
    N(T, usage, usage, TEXT)                                                                                           \
    N(T, finish_reason, finish_reason, TEXT)                                                                           \
    N(T, state, state, TEXT)                                                                                           \
    N(T, created_at, created_at, INT)                                                                                  \
    N(T, finalized_at, finalized_at, TIME)                                                                             \
    N(T, placeholder, placeholder, INT32)

/* The run's text is the column `delta`, bytes with a length (text_len). */
#define RL_ROW_DELTA_RUN(F, N, T)                                                                                      \
    F(T, message_id, message_id, TEXT)                                                                                 \
    N(T, seq, seq, INT)                                                                                                \
    N(T, seq_last, seq_last, INT)                                                                                      \
    N(T, delta, text, BYTES)                                                                                           \
    N(T, keys, keys, TEXT)

#define RL_ROW_IDEMPOTENCY(F, N, T)                                                                                    \
    F(T, owner, owner, TEXT)                                                                                           \
    N(T, scope, scope, TEXT)                                                                                           \
    N(T, key, key, TEXT)                                                                                               \
    N(T, body_hash, body_hash, TEXT)                                                                                   \
    N(T, response, response, TEXT)                                                                                     \
    N(T, created_at, created_at, INT)

#define RL_ROW_TASK(F, N, T)                                                                                           \
    F(T, installation_id, installation_id, TEXT)                                                                       \
    N(T, task_id, task_id, TEXT)                                                                                       \
    N(T, session_id, session_id, TEXT)                                                                                 \
    N(T, interaction_id, interaction_id, TEXT)                                                                         \
    N(T, kind, kind, TEXT)                                                                                             \
    N(T, name, name, TEXT)                                                                                             \
    N(T, status, status, TEXT)                                                                                         \
    N(T, status_label, status_label, TEXT)                                                                             \
    N(T, created_at, created_at, INT)                                                                                  \
    N(T, updated_at, updated_at, INT)                                                                                  \
    N(T, args, args, TEXT)                                                                                             \
    N(T, partial_result, partial_result, TEXT)                                                                         \
    N(T, result, result, TEXT)                                                                                         \
    N(T, error, error, TEXT)

#define RL_ROW_APPROVAL(F, N, T)                                                                                       \
    F(T, id, id, TEXT)                                                                                                 \
    N(T, installation_id, installation_id, TEXT)                                                                       \
    N(T, user_id, user_id, TEXT)                                                                                       \
    N(T, session_id, session_id, TEXT)                                                                                 \
    N(T, interaction_id, interaction_id, TEXT)                                                                         \
    N(T, request, request, TEXT)                                                                                       \
    N(T, state, state, TEXT)                                                                                           \
    N(T, decision, decision, TEXT)                                                                                     \
    N(T, scope, scope, TEXT)                                                                                           \
    N(T, scope_value, scope_value, TEXT)                                                                               \
    N(T, created_at, created_at, INT)                                                                                  \
    N(T, expires_at, expires_at, INT)                                                                                  \
    N(T, resolved_at, resolved_at, TIME)                                                                               \
    N(T, decision_sig, decision_sig, TEXT)                                                                             \
    N(T, device_id, device_id, TEXT)

#define RL_ROW_CAPABILITY(F, N, T)                                                                                     \
    F(T, id, id, TEXT)                                                                                                 \
    N(T, installation_id, installation_id, TEXT)                                                                       \
    N(T, user_id, user_id, TEXT)                                                                                       \
    N(T, session_id, session_id, TEXT)                                                                                 \
    N(T, interaction_id, interaction_id, TEXT)                                                                         \
    N(T, capability, capability, TEXT)                                                                                 \
    N(T, request, request, TEXT)                                                                                       \
    N(T, state, state, TEXT)                                                                                           \
    N(T, answer, answer, TEXT)                                                                                         \
    N(T, created_at, created_at, INT)                                                                                  \
    N(T, expires_at, expires_at, INT)                                                                                  \
    N(T, answered_at, answered_at, TIME)

#define RL_ROW_GRANT(F, N, T)                                                                                          \
    F(T, installation_id, installation_id, TEXT)                                                                       \
    N(T, action, action, TEXT)                                                                                         \
    N(T, scope, scope, TEXT)                                                                                           \
    N(T, scope_value, scope_value, TEXT)                                                                               \
    N(T, created_at, created_at, INT)

#define RL_ROW_UPDATE(F, N, T)                                                                                         \
    F(T, installation_id, installation_id, TEXT)                                                                       \
    N(T, update_id, update_id, INT)                                                                                    \
    N(T, type, type, TEXT)                                                                                             \
    N(T, session_id, session_id, TEXT)                                                                                 \
    N(T, interaction_id, interaction_id, TEXT)                                                                         \
    N(T, payload, payload, TEXT)                                                                                       \
    N(T, created_at, created_at, INT)

#define RL_ROW_ATTACHMENT(F, N, T)                                                                                     \
    F(T, key, key, TEXT)                                                                                               \
    N(T, user_id, user_id, TEXT)                                                                                       \
    N(T, mime, mime, TEXT)                                                                                             \
    N(T, size, size, INT)                                                                                              \
    N(T, name, name, TEXT)                                                                                             \
    N(T, created_at, created_at, INT)                                                                                  \
    N(T, used_at, used_at, TIME)                                                                                       \
    N(T, doomed_at, doomed_at, TIME)

#define RL_ROW_LOGIN_CODE(F, N, T)                                                                                     \
    F(T, code_hash, code_hash, TEXT)                                                                                   \
    N(T, user_id, user_id, TEXT)                                                                                       \
    N(T, created_at, created_at, INT)                                                                                  \
    N(T, expires_at, expires_at, INT)

#define RL_ROW_PUSH_SUBSCRIPTION(F, N, T)                                                                              \
    F(T, endpoint, endpoint, TEXT)                                                                                     \
    N(T, user_id, user_id, TEXT)                                                                                       \
    N(T, p256dh, p256dh, TEXT)                                                                                         \
    N(T, auth, auth, TEXT)                                                                                             \
    N(T, created_at, created_at, INT)

/* End-to-end encryption (issue 26): a device's public key, a session key wrapped for a device, a file an agent touched.
 */
#define RL_ROW_DEVICE(F, N, T)                                                                                         \
    F(T, id, id, TEXT)                                                                                                 \
    N(T, user_id, user_id, TEXT)                                                                                       \
    N(T, installation_id, installation_id, TEXT)                                                                       \
    N(T, platform, platform, TEXT)                                                                                     \
    N(T, label, label, TEXT)                                                                                           \
    N(T, pubkey, pubkey, TEXT)                                                                                         \
    N(T, created_at, created_at, INT)                                                                                  \
    N(T, revoked_at, revoked_at, TIME)

#define RL_ROW_RECIPIENT(F, N, T)                                                                                      \
    F(T, session_id, session_id, TEXT)                                                                                 \
    N(T, device_id, device_id, TEXT)                                                                                   \
    N(T, wrapped_session_key, wrapped_session_key, TEXT)                                                               \
    N(T, wrapped_by_device_id, wrapped_by_device_id, TEXT)                                                             \
    N(T, created_at, created_at, INT)                                                                                  \
    N(T, grant_sig, grant_sig, TEXT)

/* size_bytes is NULL when unknown (RL_NO_TIME in the row). */
#define RL_ROW_AGENT_FILE(F, N, T)                                                                                     \
    F(T, session_id, session_id, TEXT)                                                                                 \
    N(T, path_blind_idx, path_blind_idx, TEXT)                                                                         \
    N(T, tool, tool, TEXT)                                                                                             \
    N(T, mime, mime, TEXT)                                                                                             \
    N(T, path_ct, path_ct, TEXT)                                                                                       \
    N(T, display_name_ct, display_name_ct, TEXT)                                                                       \
    N(T, size_bytes, size_bytes, TIME)                                                                                 \
    N(T, updated_at, updated_at, INT)

/* ---- what comes from a description -------------------------------------------------------------- */

#define RL_ROW_NAME_F_(T, column, field, type)  #column
#define RL_ROW_NAME_N_(T, column, field, type)  ", " #column
#define RL_ROW_QNAME_F_(Q, column, field, type) Q #column
#define RL_ROW_QNAME_N_(Q, column, field, type) ", " Q #column
#define RL_ROW_MARK_F_(T, column, field, type)  "?"
#define RL_ROW_MARK_N_(T, column, field, type)  ", ?"

/* "id, created_at": a string literal, to build statements from. */
#define RL_ROW_COLUMNS(ROW) ROW(RL_ROW_NAME_F_, RL_ROW_NAME_N_, _)
/* The same, each name after the string literal q ("m."). */
#define RL_ROW_COLUMNS_OF(q, ROW) ROW(RL_ROW_QNAME_F_, RL_ROW_QNAME_N_, q)
/* "?, ?": one placeholder per column. */
#define RL_ROW_MARKS(ROW) ROW(RL_ROW_MARK_F_, RL_ROW_MARK_N_, _)
/* INSERT INTO table(every column) VALUES (...) ON CONFLICT DO NOTHING: the row as rl_sql__insert binds it. */
#define RL_ROW_INSERT(table, ROW)                                                                                      \
    "INSERT INTO " table "(" RL_ROW_COLUMNS(ROW) ") VALUES (" RL_ROW_MARKS(ROW) ") ON CONFLICT DO NOTHING"

#define RL_ROW_LEN_TEXT_(T, field)  0
#define RL_ROW_LEN_INT_(T, field)   0
#define RL_ROW_LEN_TIME_(T, field)  0
#define RL_ROW_LEN_INT32_(T, field) 0
#define RL_ROW_LEN_BOOL_(T, field)  0
#define RL_ROW_LEN_BYTES_(T, field) offsetof(T, field##_len)
#define RL_ROW_COLUMN_(T, column, field, type)                                                                         \
    {#column, RL_SQL_##type, offsetof(T, field), RL_ROW_LEN_##type##_(T, field)},

/* static const rl_sql_row_t name: the descriptor of struct T as ROW describes it. */
#define RL_ROW_DESCRIBE(name, T, ROW)                                                                                  \
    static const rl_sql_column_t name##_columns[] = {ROW(RL_ROW_COLUMN_, RL_ROW_COLUMN_, T)};                          \
    static const rl_sql_row_t name = {name##_columns, (int)(sizeof(name##_columns) / sizeof(name##_columns[0])),       \
                                      sizeof(T)}

#endif
