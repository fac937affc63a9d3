/*
 * `mint`: user tokens for many users, signed with the embedded issuer's key
 * (DATA/issuer.key, Ed25519). `relayd token` costs a process start per user;
 * the scale runs need thousands. The tokens are made from one token that
 * `relayd token` printed (the template): same header, same claims, only
 * `sub` changes. Ed25519 signatures are deterministic, so re-minting the
 * template's own user must give back the template byte for byte — that is
 * checked before anything is written.
 */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static size_t b64url_encode(const unsigned char *in, size_t n, char *out)
{
    size_t i, o = 0;

    for (i = 0; i + 2 < n; i += 3) {
        uint32_t v = ((uint32_t)in[i] << 16) | ((uint32_t)in[i + 1] << 8) | in[i + 2];
        out[o++] = b64url[(v >> 18) & 63];
        out[o++] = b64url[(v >> 12) & 63];
        out[o++] = b64url[(v >> 6) & 63];
        out[o++] = b64url[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = b64url[(v >> 18) & 63];
        out[o++] = b64url[(v >> 12) & 63];
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)in[i] << 16) | ((uint32_t)in[i + 1] << 8);
        out[o++] = b64url[(v >> 18) & 63];
        out[o++] = b64url[(v >> 12) & 63];
        out[o++] = b64url[(v >> 6) & 63];
    }
    out[o] = '\0';
    return o;
}

static size_t b64url_decode(const char *in, size_t n, unsigned char *out)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t i, o = 0;

    for (i = 0; i < n; ++i) {
        const char *p = strchr(b64url, in[i]);
        if (p == NULL || in[i] == '\0')
            break;
        acc = (acc << 6) | (uint32_t)(p - b64url);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)((acc >> bits) & 0xff);
        }
    }
    return o;
}

struct minter {
    EVP_PKEY *key;
    char header[512];  /* base64url, as in the template */
    char before[512];  /* payload JSON up to the sub value */
    char after[512];   /* payload JSON after the sub value */
};

static int mint_one(struct minter *m, const char *user, char *out, size_t outsz)
{
    char payload[1024], input[2048];
    unsigned char sig[64];
    size_t siglen = sizeof(sig), len;
    EVP_MD_CTX *ctx;
    int n;

    snprintf(payload, sizeof(payload), "%s%s%s", m->before, user, m->after);
    n = snprintf(input, sizeof(input), "%s.", m->header);
    b64url_encode((const unsigned char *)payload, strlen(payload), input + n);
    len = strlen(input);
    ctx = EVP_MD_CTX_new();
    if (ctx == NULL || EVP_DigestSignInit(ctx, NULL, NULL, NULL, m->key) != 1 ||
        EVP_DigestSign(ctx, sig, &siglen, (const unsigned char *)input, len) != 1) {
        EVP_MD_CTX_free(ctx);
        return -1;
    }
    EVP_MD_CTX_free(ctx);
    if (len + 1 + 90 >= outsz)
        return -1;
    memcpy(out, input, len);
    out[len] = '.';
    b64url_encode(sig, siglen, out + len + 1);
    return 0;
}

int mode_mint(int argc, char **argv)
{
    const char *key_path = opt_str(argc, argv, "key", NULL), *tmpl = opt_str(argc, argv, "template", NULL);
    const char *prefix = opt_str(argc, argv, "prefix", "u");
    long from = opt_long(argc, argv, "from", 0), count = opt_long(argc, argv, "count", 0);
    int width = (int)opt_long(argc, argv, "width", 5);
    struct minter m;
    const char *dot1, *dot2, *subp, *end;
    unsigned char payload[1024];
    char tmpl_sub[256], token[2048];
    size_t plen;
    FILE *f;
    long i;

    if (key_path == NULL || tmpl == NULL)
        die("mint needs --key DATA/issuer.key --template TOKEN");
    f = fopen(key_path, "r");
    if (f == NULL)
        die("cannot open %s", key_path);
    m.key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    if (m.key == NULL)
        die("cannot read the key in %s", key_path);
    dot1 = strchr(tmpl, '.');
    dot2 = dot1 != NULL ? strchr(dot1 + 1, '.') : NULL;
    if (dot2 == NULL || (size_t)(dot1 - tmpl) >= sizeof(m.header))
        die("the template is not a JWT");
    memcpy(m.header, tmpl, (size_t)(dot1 - tmpl));
    m.header[dot1 - tmpl] = '\0';
    plen = b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), payload);
    payload[plen] = '\0';
    subp = strstr((char *)payload, "\"sub\":\"");
    if (subp == NULL)
        die("the template has no sub");
    subp += 7;
    end = strchr(subp, '"');
    if (end == NULL || (size_t)(subp - (char *)payload) >= sizeof(m.before) || (size_t)(end - subp) >= sizeof(tmpl_sub))
        die("the template's payload is odd");
    memcpy(m.before, payload, (size_t)(subp - (char *)payload));
    m.before[subp - (char *)payload] = '\0';
    memcpy(tmpl_sub, subp, (size_t)(end - subp));
    tmpl_sub[end - subp] = '\0';
    snprintf(m.after, sizeof(m.after), "%s", end);
    if (mint_one(&m, tmpl_sub, token, sizeof(token)) != 0 || strcmp(token, tmpl) != 0)
        die("re-minting the template's user does not reproduce the template; refusing to mint");
    for (i = from; i < from + count; ++i) {
        char user[64];

        snprintf(user, sizeof(user), "%s%0*ld", prefix, width, i);
        if (mint_one(&m, user, token, sizeof(token)) != 0)
            die("signing failed");
        printf("%s\t%s\n", user, token);
    }
    EVP_PKEY_free(m.key);
    return 0;
}
