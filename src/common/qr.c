#ifdef RL_HAVE_QRENCODE
#include <qrencode.h>
#endif

#include "common/qr.h"

/* Modules of light border on every side: scanners need a quiet zone to find the code. */
#define QUIET 2

int rl_qr_print(FILE *out, const char *text)
{
#ifdef RL_HAVE_QRENCODE
    QRcode *qr = QRcode_encodeString(text, 0, QR_ECLEVEL_L, QR_MODE_8, 1);
    int x, y;

    if (qr == NULL)
        return -1;
    /*
     * A cell is drawn light where the module is dark: the full block is the
     * light colour, so the code reads the same on dark and light terminals.
     */
    for (y = -QUIET; y < qr->width + QUIET; y += 2) {
        fputs("  ", out);
        for (x = -QUIET; x < qr->width + QUIET; ++x) {
            int in_x = x >= 0 && x < qr->width;
            int top = in_x && y >= 0 && y < qr->width && (qr->data[y * qr->width + x] & 1);
            int bottom = in_x && y + 1 >= 0 && y + 1 < qr->width && (qr->data[(y + 1) * qr->width + x] & 1);
            fputs(top && bottom ? " " : top ? "\u2584" : bottom ? "\u2580" : "\u2588", out);
        }
        fputs("\n", out);
    }
    QRcode_free(qr);
    return 0;
#else
    (void)out;
    (void)text;
    return -1;
#endif
}
