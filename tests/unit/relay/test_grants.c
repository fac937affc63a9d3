/*
 * Grants (spec "Approval": approve_always stores a permanent grant for
 * (action, scope, scope_value); later requests matching it are resolved
 * without asking) and the user's list and revoke (docs/api.md "Grants"),
 * against a real store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "relay/turn/grants.c"
#include "store_fixture.h"

#define INST_B "inst_bbbbbbbbbbbbbbbb"

static json_t *request(const char *session_id, const char *command, const char *host)
{
    return json_pack("{s:s?, s:s?, s:s?}", "session_id", session_id, "command", command, "host", host);
}

static int covers(const char *scope, const char *value, json_t *req)
{
    rl_grant_row_t grant = {FIX_INSTALLATION, "shell", scope, value, 1000};
    int covered = rl_grant_covers(&grant, req);

    json_decref(req);
    return covered;
}

/*
 * A grant covers a request by its scope: all covers every request of the
 * action; session the session it names; tool the command (the spec's
 * approveCommandAlways); domain the host. Nothing else matches, and a
 * request without the field is not covered.
 */
static void test_scope_matching(void **state)
{
    (void)state;
    assert_true(covers("all", "", request(NULL, NULL, NULL)));
    assert_true(covers("session", FIX_SESSION, request(FIX_SESSION, "ls", NULL)));
    assert_false(covers("session", FIX_SESSION, request("ses_other", "ls", NULL)));
    assert_true(covers("tool", "ls -l", request(FIX_SESSION, "ls -l", NULL)));
    assert_false(covers("tool", "ls -l", request(FIX_SESSION, "ls -la", NULL)));
    assert_false(covers("tool", "ls", request(FIX_SESSION, NULL, NULL)));
    assert_true(covers("domain", "example.com", request(NULL, NULL, "example.com")));
    assert_false(covers("domain", "example.com", request(NULL, NULL, "evil.example.com")));
    /* The scope names the field: a tool grant is not a domain grant for the same text. */
    assert_false(covers("tool", "example.com", request(NULL, NULL, "example.com")));
    assert_false(covers("unknown", "", request(FIX_SESSION, "", "")));
}

/* spec: approve_always without a scope grants all; without a value it takes the request's (tool: its command). */
static void test_grant_of_decision(void **state)
{
    json_t *approval = json_pack("{s:s, s:s, s:s}", "session_id", FIX_SESSION, "command", "make", "host", "h.example");
    const char *scope = NULL, *value = NULL;

    (void)state;
    rl_grant_of_decision(approval, &scope, &value);
    assert_string_equal(scope, "all");
    assert_string_equal(value, "");
    scope = "tool", value = NULL;
    rl_grant_of_decision(approval, &scope, &value);
    assert_string_equal(value, "make");
    scope = "domain", value = NULL;
    rl_grant_of_decision(approval, &scope, &value);
    assert_string_equal(value, "h.example");
    scope = "session", value = NULL;
    rl_grant_of_decision(approval, &scope, &value);
    assert_string_equal(value, FIX_SESSION);
    /* A value the user named is kept. */
    scope = "tool", value = "make test";
    rl_grant_of_decision(approval, &scope, &value);
    assert_string_equal(value, "make test");
    json_decref(approval);
}

static int seed_grants_run(rl_txn_t *txn, void *arg)
{
    static const rl_grant_row_t grants[] = {
        {FIX_INSTALLATION, "shell", "tool", "ls", 1000},
        {FIX_INSTALLATION, "write", "all", "", 1001},
        {INST_B, "shell", "all", "", 1002},
    };
    size_t i;
    int result = seed_world_run(txn, arg);

    if (result == 0)
        result = seed_installation(txn, INST_B, "bob");
    for (i = 0; i < sizeof(grants) / sizeof(grants[0]) && result == 0; ++i)
        result = RL_TXN(txn, grant_insert_ignore, &grants[i]);
    /* The same tuple again is kept once. */
    return result != 0 ? result : RL_TXN(txn, grant_insert_ignore, &grants[0]);
}

struct find {
    const char *installation_id, *action;
    json_t *request;
    char scope[16];
};

static int find_run(rl_txn_t *txn, void *arg)
{
    struct find *f = arg;
    rl_grant_row_t grant;
    int result = rl_grant_find(txn, f->installation_id, f->action, f->request, &grant);

    if (result == 0)
        snprintf(f->scope, sizeof(f->scope), "%s", grant.scope);
    return result == RL_E_NOT_FOUND ? 0 : result;
}

/* The scope of the grant that answers a request, or "" when the user is asked. */
static const char *find(rl_store_t *store, const char *installation_id, const char *action, json_t *req)
{
    static struct find f;

    f = (struct find){installation_id, action, req, ""};
    assert_int_equal(in_txn(store, find_run, &f), 0);
    json_decref(req);
    return f.scope;
}

/* A grant is the installation's and the action's: another installation's grant, or another action's, answers nothing.
 */
static void test_find_matches_installation_and_action(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(in_txn(store, seed_grants_run, NULL), 0);
    assert_string_equal(find(store, FIX_INSTALLATION, "shell", request(FIX_SESSION, "ls", NULL)), "tool");
    assert_string_equal(find(store, FIX_INSTALLATION, "shell", request(FIX_SESSION, "rm", NULL)), "");
    assert_string_equal(find(store, FIX_INSTALLATION, "write", request(FIX_SESSION, "rm", NULL)), "all");
    assert_string_equal(find(store, FIX_INSTALLATION, "fetch", request(FIX_SESSION, "ls", NULL)), "");
    /* Bob's installation grants all of shell; that says nothing of alice's. */
    assert_string_equal(find(store, INST_B, "shell", request(NULL, "rm", NULL)), "all");
}

static size_t listed;
static char first_id[RL_GRANT_ID_LEN + 1];

static void check_grants(rl_store_op_t *base)
{
    struct user_grants *op = (void *)base;

    listed = op->count;
    first_id[0] = '\0';
    if (base->result == 0 && op->count > 0)
        rl_grant_id(&op->grants[0], first_id);
}

static int list(rl_store_t *store, const char *user_id)
{
    struct user_grants *op = rl_store_op_new(&grants_list_type, sizeof(*op));

    op->user_id = rl_op_str(op, user_id);
    listed = (size_t)-1;
    return run_op(store, op, check_grants);
}

static int revoke_grant(rl_store_t *store, const char *user_id, const char *grant_id)
{
    struct user_grants *op = rl_store_op_new(&grant_revoke_type, sizeof(*op));

    op->user_id = rl_op_str(op, user_id);
    op->grant_id = rl_op_str(op, grant_id);
    return run_op(store, op, check_grants);
}

static int regrant_run(rl_txn_t *txn, void *arg)
{
    rl_grant_row_t grant = {FIX_INSTALLATION, "shell", "tool", "ls", 900};

    (void)arg;
    return RL_TXN(txn, grant_insert_ignore, &grant);
}

/*
 * docs/api.md: the user sees the grants of their installations and revokes
 * one by id; another user's grant is 404 grant_not_found; a revoked grant
 * no longer answers requests, and made again it has the same id.
 */
static void test_list_and_revoke(void **state)
{
    rl_store_t *store = *state;
    char id[RL_GRANT_ID_LEN + 1];

    assert_int_equal(in_txn(store, seed_grants_run, NULL), 0);
    assert_int_equal(list(store, FIX_USER), 0);
    assert_int_equal(listed, 2);
    snprintf(id, sizeof(id), "%s", first_id);
    assert_int_equal(strncmp(id, "grt_", 4), 0);
    assert_int_equal(revoke_grant(store, "bob", id), RL_E_GRANT_NOT_FOUND);
    assert_int_equal(revoke_grant(store, FIX_USER, id), 0);
    assert_string_equal(first_id, id);
    assert_string_equal(find(store, FIX_INSTALLATION, "shell", request(FIX_SESSION, "ls", NULL)), "");
    assert_int_equal(revoke_grant(store, FIX_USER, id), RL_E_GRANT_NOT_FOUND);
    assert_int_equal(list(store, FIX_USER), 0);
    assert_int_equal(listed, 1);
    assert_int_equal(in_txn(store, regrant_run, NULL), 0);
    assert_int_equal(list(store, FIX_USER), 0);
    assert_int_equal(listed, 2);
    assert_string_equal(first_id, id);
}

/* A grant's id is a hash of its tuple: the same tuple gives the same id, parts do not run into each other. */
static void test_grant_ids(void **state)
{
    rl_grant_row_t a = {FIX_INSTALLATION, "shell", "tool", "ab", 1}, b = {FIX_INSTALLATION, "shell", "tool", "ab", 2};
    rl_grant_row_t c = {FIX_INSTALLATION, "shellt", "ool", "ab", 1};
    char ida[RL_GRANT_ID_LEN + 1], idb[RL_GRANT_ID_LEN + 1], idc[RL_GRANT_ID_LEN + 1];

    (void)state;
    rl_grant_id(&a, ida);
    rl_grant_id(&b, idb);
    rl_grant_id(&c, idc);
    assert_string_equal(ida, idb);
    assert_string_not_equal(ida, idc);
    assert_int_equal(strlen(ida), RL_GRANT_ID_LEN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scope_matching),
        cmocka_unit_test(test_grant_of_decision),
        INLINE(test_find_matches_installation_and_action),
        INLINE(test_list_and_revoke),
        cmocka_unit_test(test_grant_ids),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
