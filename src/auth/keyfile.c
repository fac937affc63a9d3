#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include "common/log.h"
#include "common/rand.h"
#include "auth/keyfile.h"

static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    return -1;
}

/* 0, -ENOENT when the file does not exist, or -1 with the cause logged. */
static int load(const char *path, const char *type, const char *label, EVP_PKEY **out)
{
    unsigned char text[RL_KEYFILE_MAX];
    struct stat st;
    BIO *bio = NULL;
    ssize_t have = 0;
    int fd, result = -1;

    *out = NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT)
            return -ENOENT;
        rl_log_error("%s %s: %s", label, path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > RL_KEYFILE_MAX) {
        rl_log_error("%s %s: not a regular file of at most %d bytes", label, path, RL_KEYFILE_MAX);
        goto out;
    }
    if ((st.st_mode & 077) != 0) {
        rl_log_error("%s %s: mode %03o lets group or others read it; run chmod 600 on it", label, path,
                     (unsigned)(st.st_mode & 0777));
        goto out;
    }
    while (have < st.st_size) {
        ssize_t got = read(fd, text + have, (size_t)(st.st_size - have));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            rl_log_error("%s %s: %s", label, path, got < 0 ? strerror(errno) : "file shrank while reading");
            goto out;
        }
        have += got;
    }
    bio = BIO_new_mem_buf(text, (int)have);
    if (bio != NULL)
        *out = PEM_read_bio_PrivateKey_ex(bio, NULL, no_passphrase, NULL, NULL, NULL);
    if (*out == NULL || !EVP_PKEY_is_a(*out, type)) {
        rl_log_error("%s %s: not an unencrypted PEM PKCS#8 %s private key", label, path, type);
        EVP_PKEY_free(*out);
        *out = NULL;
        goto out;
    }
    result = 0;
out:
    ERR_clear_error();
    BIO_free(bio);
    OPENSSL_cleanse(text, sizeof(text));
    close(fd);
    return result;
}

static int write_all(int fd, const char *text, size_t len)
{
    while (len > 0) {
        ssize_t put = write(fd, text, len);
        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0)
            return -1;
        text += put;
        len -= (size_t)put;
    }
    return 0;
}

/* Writes a new key under a temporary name and links it into place; a relay that won the race keeps its key. */
static int create(const char *dir, const char *name, const char *path, const char *type, const char *label,
                  EVP_PKEY *(*generate)(void), EVP_PKEY **out)
{
    char tmp[PATH_MAX], suffix[17];
    EVP_PKEY *key = generate();
    BIO *pem = BIO_new(BIO_s_secmem());
    char *text;
    long text_len;
    int fd = -1, dirfd, result = -1;

    *out = NULL;
    rl_rand_hex(suffix, sizeof(suffix) - 1);
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.%s.tmp", dir, name, suffix) >= sizeof(tmp)) {
        rl_log_error("%s %s: %s", label, path, strerror(ENAMETOOLONG));
        goto out;
    }
    if (key == NULL || pem == NULL || !PEM_write_bio_PrivateKey(pem, key, NULL, NULL, 0, NULL, NULL)) {
        rl_log_error("%s %s: cannot generate a key", label, path);
        goto out;
    }
    text_len = BIO_get_mem_data(pem, &text);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || fchmod(fd, 0600) != 0 || write_all(fd, text, (size_t)text_len) != 0 || fsync(fd) != 0) {
        rl_log_error("%s %s: cannot create it: %s", label, path, strerror(errno));
        goto out;
    }
    if (link(tmp, path) != 0) {
        if (errno != EEXIST) {
            rl_log_error("%s %s: %s", label, path, strerror(errno));
            goto out;
        }
        result = load(path, type, label, out);
        goto out;
    }
    dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd >= 0) {
        if (fsync(dirfd) != 0)
            rl_log_warn("%s %s: syncing the folder: %s", label, path, strerror(errno));
        close(dirfd);
    }
    rl_log_info("created %s %s", label, path);
    *out = key;
    key = NULL;
    result = 0;
out:
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    ERR_clear_error();
    BIO_free(pem);
    EVP_PKEY_free(key);
    return result;
}

int rl_keyfile_open(const char *dir, const char *name, const char *type, const char *label, EVP_PKEY *(*generate)(void),
                    EVP_PKEY **out)
{
    char path[PATH_MAX];
    int result;

    *out = NULL;
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path)) {
        rl_log_error("%s in %s: %s", label, dir, strerror(ENAMETOOLONG));
        return -1;
    }
    result = load(path, type, label, out);
    if (result == -ENOENT)
        result = create(dir, name, path, type, label, generate, out);
    return result;
}
