/*
 * relay-bridge's keyring: what it seals for each call (the table), which
 * devices it accepts, whose decisions it takes. A temporary config folder
 * per run (RELAY_CONFIG_DIR).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "bridge/enrol.h"
#include "bridge/keyring.h"
#include "common/base64.h"
#include "e2e/keystore.h"

static char dir[64];

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/rl_keyring_test.XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    setenv("RELAY_CONFIG_DIR", dir, 1);
    return rl_e2e_init();
}

static int teardown(void **state)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A client device: its key pair and the hex of its public key. */
typedef struct phone {
    rl_e2e_keypair_t kp;
    char pub[RL_E2E_PUBHEX_SIZE];
} phone_t;

static void new_phone(phone_t *p)
{
    assert_int_equal(rl_e2e_keypair_new(&p->kp), 0);
    rl_e2e_pub_hex(p->kp.pub, p->pub);
}

static void test_files_are_private_and_kept(void **state)
{
    char err[256], path[256], pub[RL_E2E_PUBHEX_SIZE];
    rl_keyring_t *k = rl_keyring_open(err, sizeof(err));
    struct stat st;

    assert_non_null(k);
    snprintf(pub, sizeof(pub), "%s", rl_keyring_pubkey(k));
    assert_int_equal(strlen(pub), 64);
    rl_keyring_set_device_id(k, "dev_bridge");
    rl_keyring_free(k);
    snprintf(path, sizeof(path), "%s/bridge-device.json", dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    k = rl_keyring_open(err, sizeof(err));
    assert_non_null(k);
    assert_string_equal(rl_keyring_pubkey(k), pub);
    assert_string_equal(rl_keyring_device_id(k), "dev_bridge");
    rl_keyring_free(k);
}

static void test_only_the_device_the_emoji_were_shown_for_is_accepted(void **state)
{
    char err[256], sas[RL_E2E_SAS_TEXT_SIZE], theirs[RL_E2E_SAS_TEXT_SIZE];
    rl_keyring_t *k = rl_keyring_open(err, sizeof(err));
    phone_t phone, mallory;
    uint8_t bridge_pub[32], bytes[4];

    new_phone(&phone);
    new_phone(&mallory);
    /* The phone computes the same emoji from the bridge's public key. */
    assert_int_equal(rl_keyring_sas(k, phone.pub, sas), 0);
    assert_int_equal(rl_e2e_pub_parse(rl_keyring_pubkey(k), bridge_pub), 0);
    assert_int_equal(rl_e2e_sas(phone.kp.sec, bridge_pub, bytes), 0);
    rl_e2e_sas_text(bytes, theirs);
    assert_string_equal(sas, theirs);
    /* device_added with no device_pending before, or with another key than the one shown: refused. */
    assert_int_equal(rl_keyring_accept(k, "dev_phone", phone.pub, "phone", "web", NULL), -2);
    assert_int_equal(rl_keyring_pending(k, "dev_phone", phone.pub, "phone", "web"), 0);
    assert_int_equal(rl_keyring_accept(k, "dev_phone", mallory.pub, "phone", "web", NULL), -2);
    assert_false(rl_keyring_accepted(k, "dev_phone"));
    /* The right key on the relay's word alone: it waits (issue 34: the relay can say that of its own key). */
    assert_int_equal(rl_keyring_accept(k, "dev_phone", phone.pub, "phone", "web", NULL), -3);
    assert_false(rl_keyring_accepted(k, "dev_phone"));
    /* The owner's word, said on this machine, with that key. */
    assert_int_equal(rl_enrol_owner_confirm("dev_phone", phone.pub), 0);
    assert_int_equal(rl_keyring_accept(k, "dev_phone", phone.pub, "phone", "web", NULL), 0);
    assert_true(rl_keyring_accepted(k, "dev_phone"));
    /* Again (a redelivery, or the phone confirming after the owner): already accepted. */
    assert_int_equal(rl_keyring_accept(k, "dev_phone", phone.pub, "phone", "web", NULL), 1);
    assert_int_equal(rl_keyring_pending(k, "dev_x", "zz", NULL, NULL), -1);
    rl_keyring_free(k);
    /* Kept across a restart; forgotten on revoke. */
    k = rl_keyring_open(err, sizeof(err));
    assert_true(rl_keyring_accepted(k, "dev_phone"));
    assert_int_equal(rl_keyring_revoke(k, "dev_phone"), 1);
    assert_false(rl_keyring_accepted(k, "dev_phone"));
    assert_int_equal(rl_keyring_revoke(k, "dev_phone"), 0);
    rl_keyring_free(k);
}

/* The enrol_proof a device makes from code for the bridge of k. */
static void proof_of(rl_keyring_t *k, const char *code, const char *device_id, const char *pub,
                     char proof[RL_E2E_SIG_SIZE])
{
    uint8_t key[32];

    assert_int_equal(rl_e2e_enrol_key(code, key), 0);
    assert_int_equal(rl_e2e_enrol_proof(key, rl_keyring_device_id(k), device_id, pub, proof), 0);
}

static void test_a_code_from_this_machine_accepts_one_device(void **state)
{
    char err[256], code[RL_E2E_ENROL_TEXT], proof[RL_E2E_SIG_SIZE], other_proof[RL_E2E_SIG_SIZE];
    rl_keyring_t *k = rl_keyring_open(err, sizeof(err));
    phone_t phone, second, mallory;
    long long last;

    (void)state;
    new_phone(&phone);
    new_phone(&second);
    new_phone(&mallory);
    rl_keyring_set_device_id(k, "dev_bridge");
    assert_int_equal(rl_enrol_code_new(RL_ENROL_TTL_MS, code), 0);
    assert_int_equal(rl_enrol_codes_live(&last), 1);
    assert_int_equal(rl_keyring_pending(k, "dev_phone", phone.pub, "phone", "ios"), 0);
    assert_int_equal(rl_keyring_pending(k, "dev_mal", mallory.pub, "phone", "ios"), 0);
    /* The relay saw the phone's proof: it binds the phone's id and key, so it is no proof for another. */
    proof_of(k, code, "dev_phone", phone.pub, proof);
    assert_int_equal(rl_keyring_accept(k, "dev_mal", mallory.pub, "phone", "ios", proof), -3);
    /* A proof made for another bridge device, or with another code, is none either. */
    {
        uint8_t key[32];
        char guessed[RL_E2E_ENROL_TEXT];
        rl_e2e_enrol_new(guessed);
        assert_int_equal(rl_e2e_enrol_key(code, key), 0);
        assert_int_equal(rl_e2e_enrol_proof(key, "dev_other_bridge", "dev_phone", phone.pub, other_proof), 0);
        assert_int_equal(rl_keyring_accept(k, "dev_phone", phone.pub, "phone", "ios", other_proof), -3);
        proof_of(k, guessed, "dev_phone", phone.pub, other_proof);
        assert_int_equal(rl_keyring_accept(k, "dev_phone", phone.pub, "phone", "ios", other_proof), -3);
    }
    assert_int_equal(rl_keyring_accept(k, "dev_phone", phone.pub, "phone", "ios", proof), 0);
    assert_true(rl_keyring_accepted(k, "dev_phone"));
    assert_false(rl_keyring_accepted(k, "dev_mal"));
    /* Used once: the same code makes no second device. */
    assert_int_equal(rl_enrol_codes_live(&last), 0);
    assert_int_equal(rl_keyring_pending(k, "dev_second", second.pub, "laptop", "web"), 0);
    proof_of(k, code, "dev_second", second.pub, proof);
    assert_int_equal(rl_keyring_accept(k, "dev_second", second.pub, "laptop", "web", proof), -3);
    assert_false(rl_keyring_accepted(k, "dev_second"));
    /* An expired code is none. */
    assert_int_equal(rl_enrol_code_new(-1, code), 0);
    proof_of(k, code, "dev_second", second.pub, proof);
    assert_int_equal(rl_keyring_accept(k, "dev_second", second.pub, "laptop", "web", proof), -3);
    rl_keyring_free(k);
}

static int accepted_calls;
static void count_accepted(void *user, const char *device_id)
{
    (void)user;
    (void)device_id;
    accepted_calls++;
}

static void test_the_owner_confirms_and_revokes_on_this_machine(void **state)
{
    char err[256];
    rl_keyring_t *k = rl_keyring_open(err, sizeof(err));
    phone_t phone, mallory;
    json_t *list;

    (void)state;
    new_phone(&phone);
    new_phone(&mallory);
    assert_int_equal(rl_keyring_pending(k, "dev_tab", phone.pub, "tablet", "web"), 0);
    /* A confirmation of another key than the one the emoji were shown for accepts nothing. */
    assert_int_equal(rl_enrol_owner_confirm("dev_tab", mallory.pub), 0);
    accepted_calls = 0;
    assert_int_equal(rl_keyring_owner_sync(k, count_accepted, NULL), 0);
    assert_false(rl_keyring_accepted(k, "dev_tab"));
    assert_int_equal(rl_enrol_owner_confirm("dev_tab", phone.pub), 0);
    assert_int_equal(rl_keyring_owner_sync(k, count_accepted, NULL), 1);
    assert_int_equal(accepted_calls, 1);
    assert_true(rl_keyring_accepted(k, "dev_tab"));
    list = rl_keyring_devices(k);
    {
        json_t *row;
        size_t i;
        int seen = 0;
        json_array_foreach(list, i, row)
        {
            if (strcmp(json_string_value(json_object_get(row, "device_id")), "dev_tab") == 0) {
                assert_string_equal(json_string_value(json_object_get(row, "verified")), "owner");
                seen = 1;
            }
        }
        assert_true(seen);
    }
    json_decref(list);
    /* The owner's revocation holds even when the relay never says device_revoked. */
    assert_int_equal(rl_enrol_owner_revoke("dev_tab"), 0);
    assert_int_equal(rl_keyring_owner_sync(k, count_accepted, NULL), 0);
    assert_false(rl_keyring_accepted(k, "dev_tab"));
    rl_keyring_free(k);
}

static void test_devices_accepted_before_evidence_wait_again(void **state)
{
    char err[256], path[4096];
    rl_keyring_t *k;
    phone_t phone;
    json_t *doc, *list;
    FILE *f;

    (void)state;
    new_phone(&phone);
    /* The file of an older relay-bridge: accepted on device_added, no "verified". */
    doc = json_pack("{s:{s:{s:s, s:s, s:s}}, s:{}}", "devices", "dev_old", "pubkey", phone.pub, "label", "old phone",
                    "platform", "ios", "pending");
    snprintf(path, sizeof(path), "%s/bridge-devices.json", getenv("RELAY_CONFIG_DIR"));
    f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(json_dumpf(doc, f, 0), 0);
    fclose(f);
    chmod(path, 0600);
    json_decref(doc);
    k = rl_keyring_open(err, sizeof(err));
    assert_non_null(k);
    assert_false(rl_keyring_accepted(k, "dev_old"));
    list = rl_keyring_devices(k);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "state")), "waiting");
    assert_true(json_is_true(json_object_get(json_array_get(list, 0), "reverify")));
    json_decref(list);
    /* Confirmed again on this machine, it is back. */
    assert_int_equal(rl_enrol_owner_confirm("dev_old", phone.pub), 0);
    assert_int_equal(rl_keyring_owner_sync(k, NULL, NULL), 1);
    assert_true(rl_keyring_accepted(k, "dev_old"));
    rl_keyring_free(k);
}

/* What a client device sends the bridge for key: the wrap, and its grant_sig (malloc'd wrap; sig filled). */
static char *signed_wrap(rl_keyring_t *k, const phone_t *p, const char *device_id, const char *session_id,
                         const uint8_t key[32], char sig[RL_E2E_SIG_SIZE])
{
    uint8_t bridge_pub[32];
    char *wrapped;

    assert_int_equal(rl_e2e_pub_parse(rl_keyring_pubkey(k), bridge_pub), 0);
    wrapped = rl_e2e_wrap(bridge_pub, key, 32);
    assert_non_null(wrapped);
    assert_int_equal(rl_e2e_grant_sig(p->kp.sec, bridge_pub, session_id, wrapped, device_id, sig), 0);
    return wrapped;
}

static void test_keys_granted_wrapped_and_rotated(void **state)
{
    char err[256], sig[RL_E2E_SIG_SIZE], first_sig[RL_E2E_SIG_SIZE];
    rl_keyring_t *k = rl_keyring_open(err, sizeof(err));
    phone_t phone, other;
    uint8_t key1[32], key2[32], got[32];
    char *wrapped, *first, *sealed, *plain;
    const char *why = NULL;
    json_t *body;

    new_phone(&phone);
    new_phone(&other);
    rl_keyring_set_device_id(k, "dev_bridge");
    /* No accepted device yet: nothing to wrap for. */
    assert_int_equal(rl_keyring_create(k, "ses_0"), 0);
    assert_null(rl_keyring_recipients(k, "ses_0", NULL, NULL));
    assert_int_equal(rl_keyring_pending(k, "dev_p", phone.pub, NULL, NULL), 0);
    assert_int_equal(rl_enrol_owner_confirm("dev_p", phone.pub), 0);
    assert_int_equal(rl_keyring_accept(k, "dev_p", phone.pub, "p", "cli", NULL), 0);
    assert_int_equal(rl_keyring_pending(k, "dev_o", other.pub, NULL, NULL), 0);
    assert_int_equal(rl_enrol_owner_confirm("dev_o", other.pub), 0);
    assert_int_equal(rl_keyring_accept(k, "dev_o", other.pub, "o", "web", NULL), 0);

    rl_e2e_session_key_new(key1);
    first = signed_wrap(k, &phone, "dev_p", "ses_1", key1, first_sig);
    assert_int_equal(rl_keyring_grant(k, "ses_1", first, "dev_p", first_sig, &why), 0);
    assert_true(rl_keyring_has(k, "ses_1"));
    /* A wrap for someone else does not open, signed or not. */
    {
        uint8_t bridge_pub[32];
        assert_int_equal(rl_e2e_pub_parse(rl_keyring_pubkey(k), bridge_pub), 0);
        wrapped = rl_e2e_wrap(phone.kp.pub, key1, 32);
        assert_int_equal(rl_e2e_grant_sig(phone.kp.sec, bridge_pub, "ses_2", wrapped, "dev_p", sig), 0);
    }
    assert_int_equal(rl_keyring_grant(k, "ses_2", wrapped, "dev_p", sig, &why), -1);
    assert_string_equal(why, "the key does not unwrap with this bridge's key");
    free(wrapped);
    assert_false(rl_keyring_has(k, "ses_2"));

    /* One wrap for each accepted device, minus the one excepted. */
    body = rl_keyring_recipients(k, "ses_1", NULL, "dev_o");
    assert_non_null(body);
    assert_string_equal(json_string_value(json_object_get(body, "session_id")), "ses_1");
    assert_int_equal(json_array_size(json_object_get(body, "recipients")), 1);
    {
        json_t *r = json_array_get(json_object_get(body, "recipients"), 0);
        assert_string_equal(json_string_value(json_object_get(r, "device_id")), "dev_p");
        assert_int_equal(
            rl_e2e_unwrap_key(phone.kp.sec, json_string_value(json_object_get(r, "wrapped_session_key")), got), 0);
        assert_memory_equal(got, key1, 32);
        /* Signed by the bridge for that phone (docs/api.md, "Signed grants"): another device's key does not verify it.
         */
        {
            const char *w = json_string_value(json_object_get(r, "wrapped_session_key"));
            const char *s = json_string_value(json_object_get(r, "grant_sig"));
            uint8_t bridge_pub[32];
            assert_non_null(s);
            assert_int_equal(rl_e2e_pub_parse(rl_keyring_pubkey(k), bridge_pub), 0);
            assert_int_equal(rl_e2e_grant_verify(phone.kp.sec, bridge_pub, "ses_1", w, "dev_bridge", s), 0);
            assert_int_equal(rl_e2e_grant_verify(other.kp.sec, bridge_pub, "ses_1", w, "dev_bridge", s), RL_E2E_E_AUTH);
            assert_int_equal(rl_e2e_grant_verify(phone.kp.sec, bridge_pub, "ses_2", w, "dev_bridge", s), RL_E2E_E_AUTH);
        }
    }
    json_decref(body);

    /* A rotation: sealed with the new key, the old messages still open. */
    sealed = rl_keyring_seal(k, "ses_1", "messages", "before", 6);
    rl_e2e_session_key_new(key2);
    wrapped = signed_wrap(k, &other, "dev_o", "ses_1", key2, sig);
    assert_int_equal(rl_keyring_grant(k, "ses_1", wrapped, "dev_o", sig, &why), 0);
    free(wrapped);
    assert_int_equal(rl_keyring_open_field(k, "ses_1", "messages", sealed, &plain), 0);
    assert_string_equal(plain, "before");
    free(plain);
    free(sealed);
    sealed = rl_keyring_seal(k, "ses_1", "messages", "after", 5);
    assert_int_equal(rl_e2e_open_field(key2, "messages/ses_1", sealed, &plain, NULL), 0);
    assert_string_equal(plain, "after");
    free(plain);
    free(sealed);
    /* The first grant replayed (a relay may: it saw it) takes the bridge back to no older key. */
    assert_int_equal(rl_keyring_grant(k, "ses_1", first, "dev_p", first_sig, &why), 0);
    sealed = rl_keyring_seal(k, "ses_1", "messages", "still new", 9);
    assert_int_equal(rl_e2e_open_field(key2, "messages/ses_1", sealed, &plain, NULL), 0);
    assert_string_equal(plain, "still new");
    free(plain);
    free(sealed);
    free(first);
    rl_keyring_free(k);
}

/*
 * The relay's attack: a key of its own, sealed to the bridge (a sealed box
 * needs only the public key), in the name of a device the bridge accepted.
 * Without that device's grant_sig it is refused and nothing is kept.
 */
static void test_grants_without_the_devices_signature_are_refused(void **state)
{
    char err[256], sig[RL_E2E_SIG_SIZE], forged[RL_E2E_SIG_SIZE], *wrapped, *sealed, *plain;
    rl_keyring_t *k = rl_keyring_open(err, sizeof(err));
    phone_t phone, relay;
    uint8_t mine[32], injected[32], bridge_pub[32];
    const char *why = NULL;

    new_phone(&phone);
    new_phone(&relay);
    assert_int_equal(rl_e2e_pub_parse(rl_keyring_pubkey(k), bridge_pub), 0);
    assert_int_equal(rl_keyring_pending(k, "dev_p2", phone.pub, NULL, NULL), 0);
    assert_int_equal(rl_enrol_owner_confirm("dev_p2", phone.pub), 0);
    assert_int_equal(rl_keyring_accept(k, "dev_p2", phone.pub, "p", "web", NULL), 0);
    assert_int_equal(rl_keyring_create(k, "ses_9"), 0);
    sealed = rl_keyring_seal(k, "ses_9", "messages", "mine", 4);
    rl_e2e_session_key_new(injected);
    rl_e2e_session_key_new(mine);
    wrapped = rl_e2e_wrap(bridge_pub, injected, 32);

    /* No signature at all (what an older client, or a relay, sends). */
    assert_int_equal(rl_keyring_grant(k, "ses_9", wrapped, "dev_p2", NULL, &why), -1);
    assert_string_equal(why, "no grant_sig");
    assert_int_equal(rl_keyring_grant(k, "ses_9", wrapped, "dev_p2", "", &why), -1);
    assert_string_equal(why, "no grant_sig");
    /* Signed with a key the relay holds (its own X25519 pair): not the device's pairwise key. */
    assert_int_equal(rl_e2e_grant_sig(relay.kp.sec, bridge_pub, "ses_9", wrapped, "dev_p2", forged), 0);
    assert_int_equal(rl_keyring_grant(k, "ses_9", wrapped, "dev_p2", forged, &why), -1);
    assert_string_equal(why, "grant_sig does not verify");
    assert_int_equal(rl_keyring_grant(k, "ses_9", wrapped, "dev_p2", "not a signature", &why), -1);
    assert_string_equal(why, "grant_sig does not verify");
    /* A signature the device really made, for another session or another wrap, does not carry over. */
    assert_int_equal(rl_e2e_grant_sig(phone.kp.sec, bridge_pub, "ses_8", wrapped, "dev_p2", sig), 0);
    assert_int_equal(rl_keyring_grant(k, "ses_9", wrapped, "dev_p2", sig, &why), -1);
    assert_string_equal(why, "grant_sig does not verify");
    {
        char *theirs = signed_wrap(k, &phone, "dev_p2", "ses_9", mine, sig);
        free(theirs);
    }
    assert_int_equal(rl_keyring_grant(k, "ses_9", wrapped, "dev_p2", sig, &why), -1);
    assert_string_equal(why, "grant_sig does not verify");
    /* Named after a device this bridge never accepted, or nobody. */
    assert_int_equal(rl_e2e_grant_sig(relay.kp.sec, bridge_pub, "ses_9", wrapped, "dev_r", forged), 0);
    assert_int_equal(rl_keyring_grant(k, "ses_9", wrapped, "dev_r", forged, &why), -1);
    assert_string_equal(why, "not wrapped by a device this bridge accepted (unconfirmed, revoked or none named)");
    assert_int_equal(rl_keyring_grant(k, "ses_9", wrapped, NULL, forged, &why), -1);
    assert_int_equal(rl_keyring_grant(k, NULL, wrapped, "dev_p2", forged, &why), -1);
    assert_string_equal(why, "malformed grant");

    /* None of it was kept: the bridge still seals under its own key, and nothing opens under the injected one. */
    assert_int_equal(rl_keyring_open_field(k, "ses_9", "messages", sealed, &plain), 0);
    assert_string_equal(plain, "mine");
    free(plain);
    free(sealed);
    sealed = rl_keyring_seal(k, "ses_9", "messages", "still mine", 10);
    assert_int_not_equal(rl_e2e_open_field(injected, "messages/ses_9", sealed, &plain, NULL), 0);
    free(sealed);
    free(wrapped);

    /* A revoked device's grant is refused too, even well signed. */
    wrapped = signed_wrap(k, &phone, "dev_p2", "ses_9", mine, sig);
    assert_int_equal(rl_keyring_revoke(k, "dev_p2"), 1);
    assert_int_equal(rl_keyring_grant(k, "ses_9", wrapped, "dev_p2", sig, &why), -1);
    free(wrapped);
    rl_keyring_free(k);
}

/* Opens body's field with key under kind/ses_1. */
static char *opened(const uint8_t key[32], const char *kind, json_t *body, const char *field)
{
    char path[64], *plain = NULL;

    snprintf(path, sizeof(path), "%s/ses_1", kind);
    assert_non_null(json_string_value(json_object_get(body, field)));
    assert_int_equal(rl_e2e_open_field(key, path, json_string_value(json_object_get(body, field)), &plain, NULL), 0);
    return plain;
}

static void test_every_content_field_is_sealed(void **state)
{
    char err[256], *plain;
    rl_keyring_t *k = rl_keyring_open(err, sizeof(err));
    uint8_t key[32];
    json_t *body;

    assert_int_equal(rl_keyring_create(k, "ses_1"), 0);
    /* The keystore keeps the key made; read it back from the file for the check. */
    {
        char path[256];
        rl_keystore_t *ks;
        snprintf(path, sizeof(path), "%s/bridge-session-keys.json", dir);
        ks = rl_keystore_load(path);
        assert_non_null(ks);
        memcpy(key, rl_keystore_key(ks, "ses_1", 0), 32);
        rl_keystore_free(ks);
    }

    body = json_pack("{s:s, s:s, s:s}", "session_id", "ses_1", "delta", "some words", "idempotency_key", "k1");
    assert_int_equal(rl_keyring_seal_call(k, RL_CALL_DELTA, "ses_1", body), 0);
    assert_null(json_object_get(body, "delta"));
    plain = opened(key, "messages", body, "delta_ct");
    assert_string_equal(plain, "some words");
    free(plain);
    assert_string_equal(json_string_value(json_object_get(body, "idempotency_key")), "k1");
    json_decref(body);

    body = json_pack("{s:s, s:s}", "session_id", "ses_1", "text", "");
    assert_int_equal(rl_keyring_seal_call(k, RL_CALL_SEND_MESSAGE, "ses_1", body), 0);
    assert_string_equal(json_string_value(json_object_get(body, "text_ct")), "AA==");
    json_decref(body);

    body = json_pack("{s:s, s:s, s:s, s:{s:s}, s:s}", "session_id", "ses_1", "task_id", "t1", "status_label", "Running",
                     "args", "command", "ls", "name", "shell");
    assert_int_equal(rl_keyring_seal_call(k, RL_CALL_CREATE_TASK, "ses_1", body), 0);
    assert_null(json_object_get(body, "args"));
    assert_null(json_object_get(body, "status_label"));
    plain = opened(key, "tasks", body, "args_ct");
    assert_string_equal(plain, "{\"command\":\"ls\"}");
    free(plain);
    plain = opened(key, "tasks", body, "status_label_ct");
    assert_string_equal(plain, "Running");
    free(plain);
    json_decref(body);

    body = json_pack("{s:s, s:s, s:s, s:[i], s:n}", "session_id", "ses_1", "task_id", "t1", "error", "boom", "result",
                     1, "status_label");
    assert_int_equal(rl_keyring_seal_call(k, RL_CALL_FINISH_TASK, "ses_1", body), 0);
    assert_null(json_object_get(body, "status_label"));
    assert_null(json_object_get(body, "status_label_ct"));
    plain = opened(key, "tasks", body, "error_ct");
    assert_string_equal(plain, "boom");
    free(plain);
    plain = opened(key, "tasks", body, "result_ct");
    assert_string_equal(plain, "[1]");
    free(plain);
    json_decref(body);

    body = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "session_id", "ses_1", "approval_id", "apr_1", "title",
                     "Run a command", "message", "wants ls", "command", "ls", "severity", "medium", "action", "exec");
    assert_int_equal(rl_keyring_seal_call(k, RL_CALL_REQUEST_APPROVAL, "ses_1", body), 0);
    assert_null(json_object_get(body, "title"));
    assert_null(json_object_get(body, "message"));
    assert_null(json_object_get(body, "command"));
    assert_string_equal(json_string_value(json_object_get(body, "severity")), "medium");
    plain = opened(key, "approvals", body, "details_ct");
    {
        json_t *details = json_loads(plain, 0, NULL);
        assert_string_equal(json_string_value(json_object_get(details, "title")), "Run a command");
        assert_string_equal(json_string_value(json_object_get(details, "command")), "ls");
        json_decref(details);
    }
    free(plain);
    json_decref(body);
    rl_keyring_free(k);
}

static void test_decisions_of_accepted_devices_only(void **state)
{
    char err[256], sig[RL_E2E_SIG_SIZE];
    const char *why = NULL;
    rl_keyring_t *k = rl_keyring_open(err, sizeof(err));
    phone_t phone, stranger;
    uint8_t bridge_pub[32];

    new_phone(&phone);
    new_phone(&stranger);
    assert_int_equal(rl_e2e_pub_parse(rl_keyring_pubkey(k), bridge_pub), 0);
    assert_int_equal(rl_e2e_decision_sig(phone.kp.sec, bridge_pub, "apr_1", "ses_1", "approve", NULL, "dev_ph", sig),
                     0);
    /* Not accepted yet. */
    assert_int_equal(rl_keyring_verify_decision(k, "apr_1", "ses_1", "approve", NULL, "dev_ph", sig, &why), -1);
    assert_non_null(strstr(why, "not accepted"));
    assert_int_equal(rl_keyring_pending(k, "dev_ph", phone.pub, NULL, NULL), 0);
    assert_int_equal(rl_enrol_owner_confirm("dev_ph", phone.pub), 0);
    assert_int_equal(rl_keyring_accept(k, "dev_ph", phone.pub, "", "cli", NULL), 0);
    assert_int_equal(rl_keyring_verify_decision(k, "apr_1", "ses_1", "approve", NULL, "dev_ph", sig, &why), 0);
    /* The relay turning approve into approve_always, or naming another approval: refused. */
    assert_int_equal(rl_keyring_verify_decision(k, "apr_1", "ses_1", "approve_always", NULL, "dev_ph", sig, &why), -1);
    assert_string_equal(why, "decision_sig does not verify");
    assert_int_equal(rl_keyring_verify_decision(k, "apr_2", "ses_1", "approve", NULL, "dev_ph", sig, &why), -1);
    assert_int_equal(rl_keyring_verify_decision(k, "apr_1", "ses_1", "approve", NULL, "dev_ph", NULL, &why), -1);
    assert_string_equal(why, "no decision_sig");
    /* A stranger's key signing in the name of the accepted device. */
    assert_int_equal(rl_e2e_decision_sig(stranger.kp.sec, bridge_pub, "apr_1", "ses_1", "approve", NULL, "dev_ph", sig),
                     0);
    assert_int_equal(rl_keyring_verify_decision(k, "apr_1", "ses_1", "approve", NULL, "dev_ph", sig, &why), -1);
    /* Revoked: its decisions no longer count. */
    assert_int_equal(rl_e2e_decision_sig(phone.kp.sec, bridge_pub, "apr_1", "ses_1", "approve", NULL, "dev_ph", sig),
                     0);
    rl_keyring_revoke(k, "dev_ph");
    assert_int_equal(rl_keyring_verify_decision(k, "apr_1", "ses_1", "approve", NULL, "dev_ph", sig, &why), -1);
    rl_keyring_free(k);
}

static void test_settings_of_accepted_devices_only_and_answers_sealed_to_them(void **state)
{
    char err[256], sig[RL_E2E_SIG_SIZE], *sealed;
    const char *why = NULL;
    rl_keyring_t *k = rl_keyring_open(err, sizeof(err));
    phone_t phone;
    uint8_t bridge_pub[32], box[256], plain[64];
    int len;

    (void)state;
    new_phone(&phone);
    assert_int_equal(rl_e2e_pub_parse(rl_keyring_pubkey(k), bridge_pub), 0);
    assert_int_equal(
        rl_e2e_config_sig(phone.kp.sec, bridge_pub, "ses_1", "mode", "plan", 1700000000000LL, "dev_cf", sig), 0);
    assert_int_equal(rl_keyring_verify_config(k, "ses_1", "mode", "plan", 1700000000000LL, "dev_cf", sig, &why), -1);
    assert_non_null(strstr(why, "not accepted"));
    assert_null(rl_keyring_seal_to_device(k, "dev_cf", "x", 1));
    assert_int_equal(rl_keyring_pending(k, "dev_cf", phone.pub, NULL, NULL), 0);
    assert_int_equal(rl_enrol_owner_confirm("dev_cf", phone.pub), 0);
    assert_int_equal(rl_keyring_accept(k, "dev_cf", phone.pub, "", "cli", NULL), 0);
    assert_int_equal(rl_keyring_verify_config(k, "ses_1", "mode", "plan", 1700000000000LL, "dev_cf", sig, &why), 0);
    /* Another value, another time, another session: each is signed. */
    assert_int_equal(
        rl_keyring_verify_config(k, "ses_1", "mode", "bypassPermissions", 1700000000000LL, "dev_cf", sig, &why), -1);
    assert_string_equal(why, "config_sig does not verify");
    assert_int_equal(rl_keyring_verify_config(k, "ses_1", "mode", "plan", 1700000000001LL, "dev_cf", sig, &why), -1);
    assert_int_equal(rl_keyring_verify_config(k, "ses_2", "mode", "plan", 1700000000000LL, "dev_cf", sig, &why), -1);
    assert_int_equal(rl_keyring_verify_config(k, "ses_1", "mode", "plan", 1700000000000LL, "dev_cf", NULL, &why), -1);
    assert_string_equal(why, "no config_sig");
    /* An answer sealed to the device: nonce || crypto_box_easy, which it opens with the bridge's public key. */
    sealed = rl_keyring_seal_to_device(k, "dev_cf", "{\"sessions\":[]}", 15);
    assert_non_null(sealed);
    len = (int)rl_base64_decode(sealed, strlen(sealed), box);
    assert_int_equal(len, 24 + 16 + 15);
    assert_int_equal(crypto_box_open_easy(plain, box + 24, (unsigned long long)len - 24, box, bridge_pub, phone.kp.sec),
                     0);
    assert_memory_equal(plain, "{\"sessions\":[]}", 15);
    free(sealed);
    rl_keyring_free(k);
}

static void test_a_waiting_devices_grant_is_held_until_it_is_accepted(void **state)
{
    char err[256], sig[RL_E2E_SIG_SIZE], *wrapped;
    rl_keyring_t *k = rl_keyring_open(err, sizeof(err));
    phone_t phone;
    uint8_t key[32];
    const char *why = NULL;
    json_t *received;

    (void)state;
    new_phone(&phone);
    rl_e2e_session_key_new(key);
    assert_int_equal(rl_keyring_pending(k, "dev_wait", phone.pub, "phone", "web"), 0);
    wrapped = signed_wrap(k, &phone, "dev_wait", "ses_held", key, sig);
    /* Unsigned: refused outright, held or not. */
    assert_int_equal(rl_keyring_grant(k, "ses_held", wrapped, "dev_wait", NULL, &why), -1);
    /* Signed by the waiting key: held, not taken. */
    assert_int_equal(rl_keyring_grant(k, "ses_held", wrapped, "dev_wait", sig, &why), 1);
    assert_false(rl_keyring_has(k, "ses_held"));
    received = rl_keyring_take_received(k);
    assert_int_equal(json_array_size(received), 0);
    json_decref(received);
    /* Kept across a restart, taken when the owner accepts the device. */
    rl_keyring_free(k);
    k = rl_keyring_open(err, sizeof(err));
    assert_int_equal(rl_enrol_owner_confirm("dev_wait", phone.pub), 0);
    assert_int_equal(rl_keyring_owner_sync(k, NULL, NULL), 1);
    assert_true(rl_keyring_has(k, "ses_held"));
    received = rl_keyring_take_received(k);
    assert_int_equal(json_array_size(received), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(received, 0), "by")), "dev_wait");
    json_decref(received);
    free(wrapped);
    rl_keyring_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files_are_private_and_kept),
        cmocka_unit_test(test_only_the_device_the_emoji_were_shown_for_is_accepted),
        cmocka_unit_test(test_keys_granted_wrapped_and_rotated),
        cmocka_unit_test(test_grants_without_the_devices_signature_are_refused),
        cmocka_unit_test(test_every_content_field_is_sealed),
        cmocka_unit_test(test_decisions_of_accepted_devices_only),
        cmocka_unit_test(test_settings_of_accepted_devices_only_and_answers_sealed_to_them),
        /* These leave accepted devices behind: after the tests that start from none. */
        cmocka_unit_test(test_a_code_from_this_machine_accepts_one_device),
        cmocka_unit_test(test_the_owner_confirms_and_revokes_on_this_machine),
        cmocka_unit_test(test_devices_accepted_before_evidence_wait_again),
        cmocka_unit_test(test_a_waiting_devices_grant_is_held_until_it_is_accepted),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
