/*
 * A QR code on a terminal, for a link to open on a phone (relayd login-link,
 * relay-bridge pair). Needs libqrencode at build time; without it nothing is
 * printed. Any thread (writes to out only).
 */
#ifndef RL_COMMON_QR_H
#define RL_COMMON_QR_H

#include <stdio.h>

/*
 * Prints text as a QR code to out: two modules per character cell, dark on
 * light whatever the terminal's colours, with a quiet zone of two modules,
 * each line indented by two spaces. 0, or -1 when nothing was printed (no
 * libqrencode in this build, or the text does not fit in a QR code).
 */
int rl_qr_print(FILE *out, const char *text);

#endif
