/*
 * rl_web_embed: a build-time tool that turns the web client's files into a C
 * source file linked into relayd, so that the app is served from the binary
 * with no file to install beside it and no way to serve a stale copy.
 *
 *   rl_web_embed OUT.c WEBDIR FILE...
 *
 * FILE names are relative to WEBDIR. The version is the first 12 hex digits
 * of a SHA-256 over every name and content; "@VERSION@" in a text file is
 * replaced by it. Files under app/ are served at /app/<version>/<name>, so a
 * changed app gets new URLs and its old ones can be cached for ever; the
 * others (index.html at /, sw.js, manifest.webmanifest) keep fixed URLs and
 * are revalidated by their ETag. Compressible files also get a gzip copy,
 * made once here rather than on every request.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <zlib.h>

#define VERSION_HEX 12
#define ETAG_HEX    16
#define MAX_FILES   128
#define MAX_BYTES   (8 * 1024 * 1024)

struct file {
    const char *name;
    unsigned char *raw;
    size_t raw_len;
    unsigned char *body; /* after substitution */
    size_t len;
    unsigned char *gz;
    size_t gz_len;
    const char *type;
    int text;
};

static const struct {
    const char *suffix;
    const char *type;
    int text;
} types[] = {
    {".html", "text/html; charset=utf-8", 1},
    {".js", "text/javascript; charset=utf-8", 1},
    {".css", "text/css; charset=utf-8", 1},
    {".webmanifest", "application/manifest+json", 1},
    {".json", "application/json", 1},
    {".svg", "image/svg+xml", 1},
    {".txt", "text/plain; charset=utf-8", 1},
    {".png", "image/png", 0},
    {".ico", "image/x-icon", 0},
};

static void die(const char *what, const char *name)
{
    fprintf(stderr, "rl_web_embed: %s: %s\n", name, what);
    exit(1);
}

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf;
    long size;

    if (f == NULL)
        die(strerror(errno), path);
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || size > MAX_BYTES || fseek(f, 0, SEEK_SET) != 0)
        die("cannot size the file (or it is over 8 MiB)", path);
    buf = malloc((size_t)size + 1);
    if (buf == NULL || fread(buf, 1, (size_t)size, f) != (size_t)size)
        die("cannot read", path);
    fclose(f);
    *len = (size_t)size;
    return buf;
}

static void hex(const unsigned char *digest, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    size_t i;

    for (i = 0; i < n / 2; ++i) {
        out[2 * i] = digits[digest[i] >> 4];
        out[2 * i + 1] = digits[digest[i] & 15];
    }
    out[n] = '\0';
}

static void sha256_hex(const unsigned char *bytes, size_t len, size_t n, char *out)
{
    unsigned char digest[32];
    unsigned int digest_len = 0;

    EVP_Digest(bytes, len, digest, &digest_len, EVP_sha256(), NULL);
    hex(digest, n, out);
}

/* Replaces every "@VERSION@" in a text file with the version. */
static void substitute(struct file *file, const char *version)
{
    static const char marker[] = "@VERSION@";
    const size_t mlen = sizeof(marker) - 1, vlen = strlen(version);
    size_t i = 0, out = 0;

    file->body = malloc(file->raw_len * 2 + 1);
    if (file->body == NULL)
        die("out of memory", file->name);
    while (i < file->raw_len) {
        if (file->text && i + mlen <= file->raw_len && memcmp(file->raw + i, marker, mlen) == 0) {
            memcpy(file->body + out, version, vlen);
            out += vlen;
            i += mlen;
        } else {
            file->body[out++] = file->raw[i++];
        }
    }
    file->len = out;
}

static void compress_file(struct file *file)
{
    z_stream zs;
    size_t cap = deflateBound(NULL, file->len) + 64;

    memset(&zs, 0, sizeof(zs));
    file->gz = malloc(cap);
    if (file->gz == NULL || deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK)
        die("cannot compress", file->name);
    zs.next_in = file->body;
    zs.avail_in = (uInt)file->len;
    zs.next_out = file->gz;
    zs.avail_out = (uInt)cap;
    if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
        die("cannot compress", file->name);
    file->gz_len = zs.total_out;
    deflateEnd(&zs);
    /* A copy that saves less than a tenth is not worth a Content-Encoding. */
    if (file->gz_len * 10 > file->len * 9) {
        free(file->gz);
        file->gz = NULL;
        file->gz_len = 0;
    }
}

static void emit_bytes(FILE *out, const char *label, size_t index, const unsigned char *bytes, size_t len)
{
    size_t i;

    fprintf(out, "static const unsigned char %s_%zu[] = {", label, index);
    for (i = 0; i < len; ++i)
        fprintf(out, "%s%u,", i % 24 == 0 ? "\n    " : "", bytes[i]);
    fprintf(out, "%s0};\n", len % 24 == 0 ? "\n    " : "");
}

static void url_of(const struct file *file, const char *version, char *out, size_t outsz)
{
    if (strcmp(file->name, "index.html") == 0)
        snprintf(out, outsz, "/");
    else if (strncmp(file->name, "app/", 4) == 0)
        snprintf(out, outsz, "/app/%s/%s", version, file->name + 4);
    else
        snprintf(out, outsz, "/%s", file->name);
}

int main(int argc, char **argv)
{
    static struct file files[MAX_FILES];
    char version[VERSION_HEX + 1], path[4096], url[4096], etag[ETAG_HEX + 1];
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char digest[32];
    unsigned int digest_len = 0;
    size_t nfiles = 0, i, k;
    FILE *out;

    if (argc < 4 || argc - 3 > MAX_FILES) {
        fprintf(stderr, "usage: rl_web_embed OUT.c WEBDIR FILE...\n");
        return 2;
    }
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    for (i = 3; i < (size_t)argc; ++i) {
        struct file *file = &files[nfiles++];
        const char *dot = strrchr(argv[i], '.');
        file->name = argv[i];
        snprintf(path, sizeof(path), "%s/%s", argv[2], argv[i]);
        file->raw = read_file(path, &file->raw_len);
        for (k = 0; k < sizeof(types) / sizeof(types[0]); ++k) {
            if (dot != NULL && strcmp(dot, types[k].suffix) == 0) {
                file->type = types[k].type;
                file->text = types[k].text;
            }
        }
        /* A vendored library's licence keeps the name it has upstream (web/app/vendor/). */
        if (file->type == NULL) {
            const char *slash = strrchr(argv[i], '/');
            if (strcmp(slash != NULL ? slash + 1 : argv[i], "LICENSE") == 0) {
                file->type = "text/plain; charset=utf-8";
                file->text = 1;
            }
        }
        if (file->type == NULL)
            die("no content type for this suffix", file->name);
        EVP_DigestUpdate(ctx, file->name, strlen(file->name) + 1);
        EVP_DigestUpdate(ctx, file->raw, file->raw_len);
    }
    EVP_DigestFinal_ex(ctx, digest, &digest_len);
    EVP_MD_CTX_free(ctx);
    hex(digest, VERSION_HEX, version);

    out = fopen(argv[1], "w");
    if (out == NULL)
        die(strerror(errno), argv[1]);
    fprintf(out, "/* Generated by rl_web_embed from web/: do not edit. */\n#include \"relay/identity/webapp.h\"\n\n");
    fprintf(out, "const char rl_web_version[] = \"%s\";\n\n", version);
    for (i = 0; i < nfiles; ++i) {
        substitute(&files[i], version);
        if (files[i].text)
            compress_file(&files[i]);
        emit_bytes(out, "body", i, files[i].body, files[i].len);
        if (files[i].gz != NULL)
            emit_bytes(out, "gzip", i, files[i].gz, files[i].gz_len);
    }
    fprintf(out, "\nconst rl_web_asset_t rl_web_assets[] = {\n");
    for (i = 0; i < nfiles; ++i) {
        url_of(&files[i], version, url, sizeof(url));
        sha256_hex(files[i].body, files[i].len, ETAG_HEX, etag);
        fprintf(out, "    {\"%s\", \"%s\", body_%zu, %zu, ", url, files[i].type, i, files[i].len);
        if (files[i].gz != NULL)
            fprintf(out, "gzip_%zu, %zu, ", i, files[i].gz_len);
        else
            fprintf(out, "NULL, 0, ");
        fprintf(out, "\"\\\"%s\\\"\", %d},\n", etag, strncmp(files[i].name, "app/", 4) == 0);
    }
    fprintf(out, "};\nconst size_t rl_web_nassets = %zu;\n", nfiles);
    if (fclose(out) != 0)
        die(strerror(errno), argv[1]);
    return 0;
}
