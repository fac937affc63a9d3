/* Unit tests for src/common/qr.c: the printed cells against the code libqrencode makes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifdef RL_HAVE_QRENCODE
#include <qrencode.h>
#endif

#include "common/qr.h"

#define LINK "https://relay.example/login#code=ABCDEFGHJKMN"

/* What rl_qr_print wrote, as one string. */
static char *printed(const char *text, int *result)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);

    assert_non_null(f);
    *result = rl_qr_print(f, text);
    fclose(f);
    return out;
}

#ifdef RL_HAVE_QRENCODE
/* Module (x, y) of the code, light outside it (the quiet zone). */
static int dark(const QRcode *qr, int x, int y)
{
    return x >= 0 && y >= 0 && x < qr->width && y < qr->width && (qr->data[y * qr->width + x] & 1);
}

static void test_cells_match_the_code(void **state)
{
    QRcode *qr = QRcode_encodeString(LINK, 0, QR_ECLEVEL_L, QR_MODE_8, 1);
    int result, x, y, lines = 0;
    char *text = printed(LINK, &result), *p;

    (void)state;
    assert_non_null(qr);
    assert_int_equal(result, 0);
    p = text;
    /* Each line: two spaces, then one cell a column: the top module is the upper half, the bottom the lower. */
    for (y = -2; y < qr->width + 2; y += 2, ++lines) {
        assert_memory_equal(p, "  ", 2);
        p += 2;
        for (x = -2; x < qr->width + 2; ++x) {
            int top = dark(qr, x, y), bottom = dark(qr, x, y + 1);
            const char *cell = top && bottom ? " " : top ? "\u2584" : bottom ? "\u2580" : "\u2588";
            assert_memory_equal(p, cell, strlen(cell));
            p += strlen(cell);
        }
        assert_int_equal(*p, '\n');
        ++p;
    }
    assert_int_equal(*p, '\0');
    assert_int_equal(lines, (qr->width + 4 + 1) / 2);
    QRcode_free(qr);
    free(text);
}
#else
static void test_nothing_without_libqrencode(void **state)
{
    int result;
    char *text = printed(LINK, &result);

    (void)state;
    assert_int_equal(result, -1);
    assert_string_equal(text, "");
    free(text);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
#ifdef RL_HAVE_QRENCODE
        cmocka_unit_test(test_cells_match_the_code),
#else
        cmocka_unit_test(test_nothing_without_libqrencode),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
