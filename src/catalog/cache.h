/*
 * HTTP caching for the catalog: every answer is a pure function of the
 * imported dataset and the request, so its ETag is a hash of its bytes.
 *
 * ETags are weak (W/"...") because the gzip filter may re-encode a body
 * after the tag was set; weak comparison is what If-None-Match uses anyway.
 */
#ifndef RL_CATALOG_CACHE_H
#define RL_CATALOG_CACHE_H

#include <stddef.h>

/* spec: catalog responses are cached for an hour. */
#define RL_CATALOG_CACHE_CONTROL "public, max-age=3600"

/* W/" + 16 hex + " and the NUL. */
#define RL_CATALOG_ETAG_LEN 21

/* Writes the weak ETag of len bytes into etag (RL_CATALOG_ETAG_LEN bytes). */
void rl_catalog_etag(const void *bytes, size_t len, char *etag);

/*
 * 1 when an If-None-Match header value (len bytes) matches etag under weak
 * comparison: "*", or any listed tag whose opaque part equals etag's, with or
 * without W/. A malformed list matches nothing.
 */
int rl_catalog_etag_matches(const char *if_none_match, size_t len, const char *etag);

#endif
