/*
 * The evidence on which relay-bridge accepts a client device (docs/api.md,
 * "A device the machine accepted"; docs/bridge.md, "Devices"): what the
 * relay cannot make. Two kinds, each in a file of the config folder (0600),
 * written under one lock file so that relay-bridge run and the devices
 * commands of another process never lose each other's writes:
 *
 *   bridge-enrol.json   one-time enrolment codes (their keys, never the
 *                       codes), made by `relay-bridge devices add` or pair;
 *   bridge-owner.json   the owner's own word, said on this machine:
 *                       `relay-bridge devices confirm ID` / `revoke ID`.
 *
 * Any thread; each call reads the files afresh (they are small, and written
 * by other processes).
 */
#ifndef RL_BRIDGE_ENROL_H
#define RL_BRIDGE_ENROL_H

#include <jansson.h>
#include <stddef.h>

#include "e2e/e2e.h"

/* How long a code lives unless told otherwise: a day, used once. */
#define RL_ENROL_TTL_MS (24L * 3600L * 1000L)

/*
 * A fresh code, shown as code (with dashes), alive ttl_ms from now; its key
 * is saved and expired codes are dropped. 0, or -1 when the file cannot be written.
 */
int rl_enrol_code_new(long ttl_ms, char code[RL_E2E_ENROL_TEXT]);

/*
 * Spends the live code whose key makes proof the enrol_proof of (bridge
 * device, device, pubkey): 0 when one does (it is removed), -1 when none does.
 */
int rl_enrol_code_spend(const char *bridge_device_id, const char *device_id, const char *pubkey, const char *proof);

/* How many live codes wait, and when the last of them expires (ms since the epoch; 0 when none). */
size_t rl_enrol_codes_live(long long *last_expiry_ms);

/*
 * The owner's word: confirm keeps (device_id, pubkey), revoke records
 * device_id as refused (and drops a confirmation of it). 0 or -1.
 */
int rl_enrol_owner_confirm(const char *device_id, const char *pubkey);
int rl_enrol_owner_revoke(const char *device_id);

/*
 * The owner file as {confirmed: {device_id: pubkey}, revoked: [device_id]}
 * (a new reference; empty ones when there is no file). NULL when it is
 * unreadable or readable by others (errno EPERM).
 */
json_t *rl_enrol_owner_load(void);

/*
 * An inotify descriptor that becomes readable when the owner file is
 * written (-1 when it cannot be made: then only a restart sees the owner's
 * word). rl_enrol_watch_drain reads what is pending: 1 when the owner file
 * was among it.
 */
int rl_enrol_watch_open(void);
int rl_enrol_watch_drain(int fd);

#endif
