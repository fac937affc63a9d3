/*
 * relayd backup and relayd restore (docs/operations.md, "Backups"): a
 * relay's SQLite store, its signing keys and its attachments, copied while
 * relayd runs, and put back into an empty data folder. A PostgreSQL store
 * is backed up with pg_dump instead (the same page says how).
 */
#ifndef RL_RELAY_BACKUP_H
#define RL_RELAY_BACKUP_H

/* The name of the file that describes a backup folder (JSON: versions, time, counts). */
#define RL_BACKUP_MANIFEST "backup.json"

/*
 * relayd backup DEST [--data DIR] [--store sqlite:PATH] [--attachments DIR]:
 * writes a new folder DEST (it must not exist, or be empty) holding
 * relay.db, the key files of the data folder and attachments/, built
 * beside DEST and renamed into place once complete, so that a failed
 * backup leaves nothing. Does not take the data folder's lock: it runs
 * beside relayd. Returns the exit status (0, 1 failure, 2 usage).
 */
int rl_backup_command(int argc, char **argv);
/*
 * relayd restore SRC [--data DIR] [--attachments DIR]: fills an empty (or
 * missing) data folder from a backup folder, under the folder's lock, and
 * removes what it wrote if anything fails. Returns the exit status.
 */
int rl_restore_command(int argc, char **argv);

#endif
