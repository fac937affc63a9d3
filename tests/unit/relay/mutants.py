#!/usr/bin/env python3
"""
Checks that the domain's unit tests can fail: each row breaks one rule in
src/relay (a text replaced once), rebuilds that module's test, runs it and
expects it to fail, then puts the source back. Not part of ctest: run it by
hand from the repository root after a build in build/
(python3 tests/unit/relay/mutants.py [module ...]). A row whose text is no
longer found once in its file says SKIP: the code moved; update the row.
"""
import subprocess
import sys

# (the module whose test must fail, the file, the text of the rule, what breaks it)
muts = [
 ("sessions", "src/relay/sessions.c", "session.deleted_at + op->delete_grace <= op->now", "session.deleted_at + op->delete_grace < op->now"),
 ("sessions", "src/relay/sessions.c", "        if (strcmp(session.state, target) == 0)\n            op->changed = 0;\n", ""),
 ("approvals", "src/relay/approvals.c", 'if (strcmp(approval.state, "resolved") == 0) {', 'if (0) {'),
 ("approvals", "src/relay/approvals.c", "approval.expires_at <= op->now", "approval.expires_at < op->now"),
 ("grants", "src/relay/grants.c", "return subject != NULL && strcmp(subject, grant->scope_value) == 0;", "return subject != NULL && strncmp(subject, grant->scope_value, 2) == 0;"),
 ("grants", "src/relay/grants.c", "if (strcmp(id, op->grant_id) == 0) {", "if (1) {"),
 ("updates", "src/relay/updates.c", "return result == RL_E_NOT_FOUND ? RL_E_INSTALLATION_NOT_FOUND : result;", "return result;"),
 ("updates", "src/relay/updates.c", '"scope", scope,\n                     "scope_value", scope_value);', '"scope", scope,\n                     "scope_value", scope_value != NULL ? scope_value : "");'),
 ("bridge_ws", "src/relay/bridge_ws.c", "|| value <= 0 || value > sent_up_to)", "|| value <= 0)"),
 ("target", "src/relay/target.c", "interaction.created_at + target->followup_ms < target->now", "interaction.created_at + target->followup_ms <= target->now"),
 ("target", "src/relay/target.c", "    if (session->deleted_at != RL_NO_TIME)\n        return RL_E_SESSION_DELETED;\n", ""),
 ("messages", "src/relay/messages.c", "(result == 0 && strcmp(reply_to.session_id, op->session_id) != 0)", "0"),
 ("messages", "src/relay/messages.c", "    result = rl_idempotency_check(txn, &op->idem, &stored);\n    if (result == 1) {", "    result = rl_idempotency_check(txn, &op->idem, &stored);\n    if (result == 1 && 0) {"),
 ("deltas", "src/relay/deltas.c", "return strcmp(seen, body_hash) == 0 ? DELTA_REPLAY : RL_E_IDEMPOTENCY_CONFLICT;\n    seen = json", "return DELTA_REPLAY;\n    seen = json"),
 ("deltas", "src/relay/deltas.c", "return next == first->seq ? 0 : RL_E_CONFLICT;", "return 0;"),
 ("deltas", "src/relay/deltas.c", "    if (message->text_bytes > cap || delta_len > cap - message->text_bytes)", "    if (message->text_bytes > cap || delta_len > cap - message->text_bytes + 1)"),
 ("deltas", "src/relay/deltas.c", "qsort(rows, n, sizeof(*rows), by_message_then_seq);", "(void)by_message_then_seq;"),
 ("idempotency", "src/relay/idempotency.c", "if (row.created_at < idem->expired_before) {", "if (row.created_at <= idem->expired_before) {"),
 ("idempotency", "src/relay/idempotency.c", "if (strcmp(row.body_hash, idem->body_hash) != 0)", "if (0)"),
 ("idempotency", "src/relay/idempotency.c", "JSON_COMPACT | JSON_SORT_KEYS", "JSON_COMPACT"),
 ("bridge", "src/relay/bridge.c", "op->at = now - relay->config.followup_window - 1;", "op->at = now - relay->config.followup_window;"),
 ("deltas", "src/relay/deltas.c", "now <= message->keys_until_ms ?", "now < message->keys_until_ms ?"),
 ("bridge", "src/relay/bridge.c", '    if (strcmp(message->state, "streaming") != 0)\n        return RL_E_MESSAGE_FINALIZED;\n', ""),
 ("bridge", "src/relay/bridge.c", 'if (strcmp(task.status, "created") != 0 && strcmp(task.status, "progressing") != 0)', 'if (0)'),
 ("bridge", "src/relay/bridge.c", '{"end_turn", "stop"}', '{"end_turn", "end_turn"}'),
 ("deltas", "src/relay/deltas.c", "return deltas->exclusive && !batch->shared && deltas->changing == 0 && !batch->doubted;", "return deltas->exclusive && !batch->shared && !batch->doubted;"),
 ("deltas", "src/relay/deltas.c", "return deltas->exclusive && !batch->shared && deltas->changing == 0 && !batch->doubted;", "return deltas->exclusive && !batch->shared && deltas->changing == 0;"),
 ("deltas", "src/relay/deltas.c", "return deltas->exclusive && !batch->shared && deltas->changing == 0 && !batch->doubted;", "return !batch->shared && deltas->changing == 0 && !batch->doubted;"),
 ("deltas", "src/relay/deltas.c", "    if (deltas->pending != NULL && deltas->pending->count > 0)\n        deltas->pending->doubted = 1;", ""),
 ("deltas", "src/relay/deltas.c", "if (first->installation_id == NULL || batch->trusted)", "if (first->installation_id == NULL)"),
 ("deltas", "src/relay/deltas.c", "    if (deltas->changing > 0)\n        --deltas->changing;", ""),
]
only = sys.argv[1:]
missed = 0
for test, path, old, new in muts:
    if only and test not in only: continue
    src = open(path).read()
    if src.count(old) != 1:
        print("SKIP (pattern count %d)" % src.count(old), test, old[:60]); continue
    open(path, 'w').write(src.replace(old, new))
    try:
        b = subprocess.run(["make", "-C", "build", "unit_relay_test_" + test], capture_output=True, text=True)
        if b.returncode != 0:
            print("BUILD FAIL", test, old[:60]); print(b.stdout[-800:], b.stderr[-800:]); continue
        r = subprocess.run(["build/unit_relay_test_" + test], capture_output=True, text=True)
        failed = [l.split()[-1] for l in r.stdout.splitlines() if l.startswith("[  FAILED  ] test_")]
        missed += r.returncode == 0
        print("CAUGHT" if r.returncode != 0 else "MISSED", test, "|", old.strip()[:70].replace("\n", " "), "|", ",".join(sorted(set(failed))))
    finally:
        open(path, 'w').write(src)
# Rebuild with the sources as they are.
subprocess.run(["make", "-C", "build", "rl_relay"], capture_output=True)
sys.exit(1 if missed else 0)
