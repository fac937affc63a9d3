#include "common.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void die(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "relaybench: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void copy_field(char *dst, size_t dstsz, const char *src)
{
    if (strcmp(src, "-") == 0)
        src = "";
    snprintf(dst, dstsz, "%s", src);
}

int state_read(const char *path, inst_rec_t **out)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    inst_rec_t *recs = NULL;
    size_t n = 0, cap = 0;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *fields[7], *save = NULL, *tok;
        int nf = 0;

        line[strcspn(line, "\r\n")] = '\0';
        for (tok = strtok_r(line, "\t", &save); tok != NULL && nf < 7; tok = strtok_r(NULL, "\t", &save))
            fields[nf++] = tok;
        if (nf < 2)
            continue;
        while (nf < 7)
            fields[nf++] = "-";
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            recs = realloc(recs, cap * sizeof(*recs));
            if (recs == NULL)
                die("out of memory");
        }
        copy_field(recs[n].user, sizeof(recs[n].user), fields[0]);
        copy_field(recs[n].user_token, sizeof(recs[n].user_token), fields[1]);
        copy_field(recs[n].bridge_token, sizeof(recs[n].bridge_token), fields[2]);
        copy_field(recs[n].installation_id, sizeof(recs[n].installation_id), fields[3]);
        copy_field(recs[n].session_id, sizeof(recs[n].session_id), fields[4]);
        copy_field(recs[n].interaction_id, sizeof(recs[n].interaction_id), fields[5]);
        copy_field(recs[n].message_id, sizeof(recs[n].message_id), fields[6]);
        ++n;
    }
    fclose(f);
    *out = recs;
    return (int)n;
}

static const char *dash(const char *s)
{
    return s[0] != '\0' ? s : "-";
}

int state_write_line(FILE *f, const inst_rec_t *r)
{
    return fprintf(f, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", dash(r->user), dash(r->user_token), dash(r->bridge_token),
                   dash(r->installation_id), dash(r->session_id), dash(r->interaction_id), dash(r->message_id));
}

const char *opt_str(int argc, char **argv, const char *name, const char *fallback)
{
    int i;

    for (i = 0; i + 1 < argc; ++i) {
        if (argv[i][0] == '-' && argv[i][1] == '-' && strcmp(argv[i] + 2, name) == 0)
            return argv[i + 1];
    }
    return fallback;
}

long opt_long(int argc, char **argv, const char *name, long fallback)
{
    const char *v = opt_str(argc, argv, name, NULL);
    return v != NULL ? strtol(v, NULL, 10) : fallback;
}

double opt_double(int argc, char **argv, const char *name, double fallback)
{
    const char *v = opt_str(argc, argv, name, NULL);
    return v != NULL ? strtod(v, NULL) : fallback;
}

int opt_range(int argc, char **argv, const char *name, long *a, long *b)
{
    const char *v = opt_str(argc, argv, name, NULL);
    const char *colon;

    if (v == NULL)
        return -1;
    colon = strchr(v, ':');
    if (colon == NULL) {
        *a = 0;
        *b = strtol(v, NULL, 10);
    } else {
        *a = strtol(v, NULL, 10);
        *b = strtol(colon + 1, NULL, 10);
    }
    return 0;
}

int json_find_string(const char *json, const char *key, char *out, size_t outsz)
{
    char pattern[128];
    const char *p, *end;
    size_t len;

    snprintf(pattern, sizeof(pattern), "\"%s\":\"", key);
    p = json != NULL ? strstr(json, pattern) : NULL;
    if (p == NULL)
        return -1;
    p += strlen(pattern);
    end = strchr(p, '"');
    if (end == NULL)
        return -1;
    len = (size_t)(end - p);
    if (len >= outsz)
        return -1;
    memcpy(out, p, len);
    out[len] = '\0';
    return 0;
}

/*
 * From the scheduler's own accounting (/proc/PID/task/TID/schedstat, nanoseconds on the CPU),
 * summed over the threads: tick-based utime/stime under-counts short bursts on a virtual machine.
 */
double proc_cpu_seconds(int pid)
{
    char path[64];
    struct dirent *d;
    double total = 0;
    int found = 0;
    DIR *dir;

    if (pid <= 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    dir = opendir(path);
    if (dir == NULL)
        return -1;
    while ((d = readdir(dir)) != NULL) {
        char file[320];
        unsigned long long ns;
        FILE *f;

        if (d->d_name[0] == '.')
            continue;
        snprintf(file, sizeof(file), "/proc/%d/task/%s/schedstat", pid, d->d_name);
        f = fopen(file, "r");
        if (f == NULL)
            continue;
        if (fscanf(f, "%llu", &ns) == 1) {
            total += (double)ns / 1e9;
            found = 1;
        }
        fclose(f);
    }
    closedir(dir);
    return found ? total : -1;
}

long proc_rss_kib(int pid)
{
    char path[64], line[256];
    long kib = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kib = strtol(line + 6, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kib;
}
