/*
 * The relay's schema, one list for both SQL engines (schema.c): each step
 * moves it one version up, with the SQL each engine runs for it. Each
 * driver runs its engine's steps in order, once, each in a transaction
 * (sqlite.c, postgres.c), and counts its own versions: a step without SQL
 * for an engine is no version of that engine's.
 *
 * Internal to src/store.
 */
#ifndef RL_STORE_SCHEMA_H
#define RL_STORE_SCHEMA_H

typedef enum rl_schema_dialect {
    RL_SCHEMA_SQLITE,
    RL_SCHEMA_POSTGRES,
} rl_schema_dialect_t;

/* The schema version this relayd migrates a store of the dialect to (the number of its steps). */
int rl_schema_target(rl_schema_dialect_t dialect);
/* The SQL that moves a store of the dialect from version to version + 1 (0 <= version < target). */
const char *rl_schema_step(rl_schema_dialect_t dialect, int version);

#endif
