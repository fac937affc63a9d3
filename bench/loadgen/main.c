/*
 * relaybench: the load generator of bench/. One program, one mode per
 * command; bench/run.sh drives them. See bench/README.md.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
} modes[] = {
    {"mint", mode_mint, "--key DATA/issuer.key --template TOKEN --prefix P --from A --count N [--width W]"},
    {"setup", mode_setup, "--url H:P --users FILE --count N --streaming S --out STATE [--src-base IP --per-ip K]"},
    {"warm", mode_warm, "--url H:P --users FILE   (prints the GET /v1/me body size)"},
    {"stream", mode_stream,
     "--url H:P --state STATE --target relayd|nchan --rate R --installations N [--conns C --warmup S --duration S "
     "--delta-bytes B --label L --server-pids P,P --out FILE --sub-url H:P --perf-ctl FIFO]"},
    {"hold", mode_hold, "--url H:P --state STATE --ready FILE [--sse N --sse-users A:B] [--ws A:B] [--src-base IP --src-count K]"},
    {"durability", mode_durability, "--url H:P --state STATE --inst A:B --pid PID --journal FILE [--round R --kill-after-ms T]"},
    {"verify", mode_verify, "--url H:P --state STATE --journal FILE [--journal FILE...]"},
};

int main(int argc, char **argv)
{
    size_t i;

    signal(SIGPIPE, SIG_IGN);
    if (argc >= 2) {
        for (i = 0; i < sizeof(modes) / sizeof(modes[0]); ++i) {
            if (strcmp(argv[1], modes[i].name) != 0)
                continue;
            /* `--tls 1` in any mode: every connection it opens speaks TLS (relayd with --tls-cert). */
            if (opt_long(argc - 2, argv + 2, "tls", 0) != 0 && net_tls_client() != 0)
                die("cannot set up TLS");
            return modes[i].run(argc - 2, argv + 2);
        }
    }
    fprintf(stderr, "usage (every mode also takes --tls 1):\n");
    for (i = 0; i < sizeof(modes) / sizeof(modes[0]); ++i)
        fprintf(stderr, "  relaybench %s %s\n", modes[i].name, modes[i].usage);
    return 2;
}
