/* The acp agent's file methods, confined to the working folder (bridge/acp_fs.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "bridge/acp_fs.h"
#include "bridge/jsonrpc.h"

typedef struct place {
    char top[PATH_MAX];  /* a temporary folder: holds root and a file outside it */
    char root[PATH_MAX]; /* the working folder, resolved */
} place_t;

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *slurp(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    size_t n;

    if (f == NULL)
        return NULL;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int setup(void **state)
{
    place_t *p = calloc(1, sizeof(*p));
    char path[PATH_MAX + 64], work[PATH_MAX + 16];

    snprintf(p->top, sizeof(p->top), "/tmp/rl-acp-fs-XXXXXX");
    assert_non_null(mkdtemp(p->top));
    snprintf(work, sizeof(work), "%s/work", p->top);
    assert_int_equal(mkdir(work, 0700), 0);
    assert_non_null(realpath(work, p->root));
    snprintf(path, sizeof(path), "%s/secret.txt", p->top);
    put(path, "secret\n");
    snprintf(path, sizeof(path), "%s/notes.txt", p->root);
    put(path, "one\ntwo\nthree\n");
    snprintf(path, sizeof(path), "%s/sub", p->root);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/link.txt", p->root);
    snprintf(work, sizeof(work), "%s/secret.txt", p->top);
    assert_int_equal(symlink(work, path), 0);
    snprintf(path, sizeof(path), "%s/out", p->root);
    assert_int_equal(symlink(p->top, path), 0);
    *state = p;
    return 0;
}

static int teardown(void **state)
{
    place_t *p = *state;
    char command[PATH_MAX + 16];

    snprintf(command, sizeof(command), "rm -rf '%s'", p->top);
    assert_int_equal(system(command), 0);
    free(p);
    return 0;
}

static int read_at(place_t *p, const char *rel, json_int_t line, json_int_t limit, char *text, size_t size)
{
    char path[PATH_MAX + 64];
    const char *why = NULL;
    json_t *content = NULL;
    int code;

    /* "/x" is x in the working folder; a path under the temporary folder is taken as it is */
    snprintf(path, sizeof(path), "%s%s", rel[0] == '/' && strncmp(rel, p->top, strlen(p->top)) != 0 ? p->root : "",
             rel);
    code = rl_acp_fs_read(p->root, path, line, limit, &content, &why);
    if (code == 0) {
        snprintf(text, size, "%s", json_string_value(content));
        json_decref(content);
    } else {
        assert_non_null(why);
        assert_null(content);
    }
    return code;
}

static void test_reads_inside_with_lines(void **state)
{
    place_t *p = *state;
    char text[256];

    assert_int_equal(read_at(p, "/notes.txt", 0, 0, text, sizeof(text)), 0);
    assert_string_equal(text, "one\ntwo\nthree\n");
    assert_int_equal(read_at(p, "/notes.txt", 2, 1, text, sizeof(text)), 0);
    assert_string_equal(text, "two\n");
    assert_int_equal(read_at(p, "/notes.txt", 3, 0, text, sizeof(text)), 0);
    assert_string_equal(text, "three\n");
    assert_int_equal(read_at(p, "/notes.txt", 9, 2, text, sizeof(text)), 0);
    assert_string_equal(text, "");
    assert_int_equal(read_at(p, "/missing.txt", 0, 0, text, sizeof(text)), RL_JSONRPC_RESOURCE_NOT_FOUND);
    assert_int_equal(read_at(p, "/sub", 0, 0, text, sizeof(text)), RL_JSONRPC_RESOURCE_NOT_FOUND);
}

static void test_nothing_outside_is_reached(void **state)
{
    place_t *p = *state;
    char text[256], path[PATH_MAX + 64];
    const char *why = NULL;

    /* a link inside that leads out, a folder link, "..", a relative path, the file outside itself */
    assert_int_equal(read_at(p, "/link.txt", 0, 0, text, sizeof(text)), RL_JSONRPC_INVALID_PARAMS);
    assert_int_equal(read_at(p, "/out/secret.txt", 0, 0, text, sizeof(text)), RL_JSONRPC_INVALID_PARAMS);
    assert_int_equal(read_at(p, "/../secret.txt", 0, 0, text, sizeof(text)), RL_JSONRPC_INVALID_PARAMS);
    assert_int_equal(read_at(p, "/./notes.txt", 0, 0, text, sizeof(text)), RL_JSONRPC_INVALID_PARAMS);
    assert_int_equal(read_at(p, "notes.txt", 0, 0, text, sizeof(text)), RL_JSONRPC_INVALID_PARAMS);
    snprintf(path, sizeof(path), "%s/secret.txt", p->top);
    assert_int_equal(read_at(p, path, 0, 0, text, sizeof(text)), RL_JSONRPC_INVALID_PARAMS);
    /* a sibling folder whose name starts with the root's is outside too */
    snprintf(path, sizeof(path), "%s2", p->root);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s2/x.txt", p->root);
    assert_int_equal(rl_acp_fs_write(p->root, path, "x", 1, &why), RL_JSONRPC_INVALID_PARAMS);
    assert_null(slurp(path));
    /* writes: through the link, into the linked folder, next to the root */
    snprintf(path, sizeof(path), "%s/link.txt", p->root);
    assert_int_equal(rl_acp_fs_write(p->root, path, "pwned", 5, &why), RL_JSONRPC_INVALID_PARAMS);
    snprintf(path, sizeof(path), "%s/out/new.txt", p->root);
    assert_int_equal(rl_acp_fs_write(p->root, path, "pwned", 5, &why), RL_JSONRPC_INVALID_PARAMS);
    snprintf(path, sizeof(path), "%s/secret.txt", p->top);
    assert_string_equal(slurp(path), "secret\n");
    snprintf(path, sizeof(path), "%s/new.txt", p->top);
    assert_null(slurp(path));
    assert_int_equal(rl_acp_fs_write(p->root, NULL, "x", 1, &why), RL_JSONRPC_INVALID_PARAMS);
}

static void test_writes_create_and_replace(void **state)
{
    place_t *p = *state;
    char path[PATH_MAX + 64];
    const char *why = NULL;

    snprintf(path, sizeof(path), "%s/notes.txt", p->root);
    assert_int_equal(rl_acp_fs_write(p->root, path, "new\n", 4, &why), 0);
    assert_string_equal(slurp(path), "new\n");
    snprintf(path, sizeof(path), "%s/sub/fresh.txt", p->root);
    assert_int_equal(rl_acp_fs_write(p->root, path, "fresh", 5, &why), 0);
    assert_string_equal(slurp(path), "fresh");
    /* the folder of a new file must exist; a folder is not a file */
    snprintf(path, sizeof(path), "%s/nope/fresh.txt", p->root);
    assert_int_equal(rl_acp_fs_write(p->root, path, "x", 1, &why), RL_JSONRPC_RESOURCE_NOT_FOUND);
    snprintf(path, sizeof(path), "%s/sub/", p->root);
    assert_int_not_equal(rl_acp_fs_write(p->root, path, "x", 1, &why), 0);
}

static void test_large_and_binary_files_are_refused(void **state)
{
    place_t *p = *state;
    char path[PATH_MAX + 64], text[16];
    FILE *f;

    snprintf(path, sizeof(path), "%s/big.bin", p->root);
    f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fseek(f, RL_ACP_FS_READ_MAX, SEEK_SET), 0);
    fputc('x', f);
    fclose(f);
    assert_int_equal(read_at(p, "/big.bin", 0, 0, text, sizeof(text)), RL_JSONRPC_INVALID_PARAMS);
    snprintf(path, sizeof(path), "%s/bad.txt", p->root);
    put(path, "\xff\xfe bad");
    assert_int_equal(read_at(p, "/bad.txt", 0, 0, text, sizeof(text)), RL_JSONRPC_INVALID_PARAMS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reads_inside_with_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nothing_outside_is_reached, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writes_create_and_replace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_and_binary_files_are_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
