/*
 * What the generator's modes share: the installation list written by
 * `setup`, command-line options, and small helpers.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "net.h"

/* One line of the state file: a user, the installation it paired, and what streaming needs. */
typedef struct {
    char user[64];
    char user_token[1024];
    char bridge_token[128];
    char installation_id[64];
    char session_id[64];
    char interaction_id[64];
    char message_id[64];
} inst_rec_t;

/* Reads the state file; returns the number of records (malloc'd array in *out) or -1. */
int state_read(const char *path, inst_rec_t **out);
int state_write_line(FILE *f, const inst_rec_t *r);

/* Option parsing: --name value pairs after the mode. */
const char *opt_str(int argc, char **argv, const char *name, const char *fallback);
long opt_long(int argc, char **argv, const char *name, long fallback);
double opt_double(int argc, char **argv, const char *name, double fallback);
/* "A:B" → [a, b); a bare "N" → [0, N). */
int opt_range(int argc, char **argv, const char *name, long *a, long *b);

/* The string value of key in a flat JSON text (first occurrence), copied into out. 0 or -1. */
int json_find_string(const char *json, const char *key, char *out, size_t outsz);

/* CPU seconds (user + system) used by process pid so far, from /proc; -1 when unknown. */
double proc_cpu_seconds(int pid);
/* Resident set size in KiB from /proc/PID/status; -1 when unknown. */
long proc_rss_kib(int pid);

void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

int mode_mint(int argc, char **argv);
int mode_setup(int argc, char **argv);
int mode_warm(int argc, char **argv);
int mode_stream(int argc, char **argv);
int mode_hold(int argc, char **argv);
int mode_durability(int argc, char **argv);
int mode_verify(int argc, char **argv);

#endif
