#include <stdlib.h>
#include <string.h>

#include "common/blob.h"

rl_blob_t *rl_blob_new(const void *bytes, size_t len)
{
    rl_blob_t *blob = malloc(sizeof(*blob) + len + 1);

    if (blob == NULL)
        return NULL;
    blob->refs = 1;
    blob->len = len;
    if (len > 0)
        memcpy(blob->bytes, bytes, len);
    blob->bytes[len] = '\0';
    return blob;
}

void rl_blob_release(rl_blob_t *blob)
{
    if (blob != NULL && --blob->refs == 0)
        free(blob);
}
