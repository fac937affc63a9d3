/*
 * The catalog's source files (catalog/): reading them and checking them.
 *
 * Every *.json file under the folder (recursively, in path order) is an
 * object whose keys are sections: one of the eight type names ("models"),
 * "scores", "sources" or "licences", each an array of objects. A folder may
 * keep one file per type, one per entity, or anything between. The shape of
 * each object is checked against a declarative field table (the HTTP core's
 * validator); then slugs must be unique per type, every reference must name
 * an entity that exists, every paper's licence and files must exist, and a
 * file may only be attached to a paper whose licence permits redistribution.
 *
 * Problems are reported as {"file", "field", "message"} objects, "file"
 * relative to the folder, "field" like models[3].organization. Loading is
 * single-threaded and done once, before serving.
 */
#ifndef RL_CATALOG_DATASET_H
#define RL_CATALOG_DATASET_H

#include <jansson.h>

#include "catalog/type.h"

/* Caps fixed in advance: the importer reads operator files, not peer input, but still bounds them. */
#define RL_CATALOG_SOURCE_FILE_MAX (64u * 1024u * 1024u) /* one .json file */
#define RL_CATALOG_PAPER_FILE_MAX  (32u * 1024u * 1024u) /* one paper text or PDF */
#define RL_CATALOG_PROBLEMS_MAX    200                   /* problems reported before giving up */

typedef struct rl_catalog_dataset {
    json_t *sources;                         /* id -> source object */
    json_t *licences;                        /* id -> licence object */
    json_t *entities[RL_CATALOG_TYPE_COUNT]; /* slug -> entity object, as written */
    json_t *scores;                          /* array of score objects, in file order */
    char dir[4096];
} rl_catalog_dataset_t;

/*
 * A relationship declared by a field of one type that names entities of
 * another. The catalog resolves it in both directions: a model's
 * "organization" field appears as relationship "organization" on the model
 * and as "models" on the organization.
 */
typedef struct rl_catalog_link {
    rl_catalog_type_t from;
    const char *field; /* the source field holding one slug, or an array of slugs */
    int many;          /* 1: an array of slugs */
    rl_catalog_type_t to;
    const char *relation; /* name of the relationship on the entity that declares it */
    const char *inverse;  /* name of the relationship on the entity named */
} rl_catalog_link_t;

extern const rl_catalog_link_t rl_catalog_links[];
extern const size_t rl_catalog_nlinks;

/* What a field of an entity is, for building its document. */
typedef enum rl_catalog_role {
    RL_CATALOG_ROLE_ATTRIBUTE, /* a plain fact: released, parameters, year */
    RL_CATALOG_ROLE_LINK,      /* an external URL: homepage, repository */
    RL_CATALOG_ROLE_RELATION,  /* a row of rl_catalog_links */
    RL_CATALOG_ROLE_CORE,      /* slug, title, summary, description, aliases, source */
    RL_CATALOG_ROLE_PAPER,     /* a paper's licence, text and pdf: handled by the paper rules */
    RL_CATALOG_ROLE_UNKNOWN
} rl_catalog_role_t;

rl_catalog_role_t rl_catalog_dataset_role(rl_catalog_type_t type, const char *field);

/*
 * Reads and checks every source file under dir. Returns 0 when the dataset
 * is valid (out filled; free it with rl_catalog_dataset_free), 1 when it has
 * problems (appended to problems, an array owned by the caller; out is left
 * empty), or -1 when the folder cannot be read (also reported as a problem).
 */
int rl_catalog_dataset_load(const char *dir, rl_catalog_dataset_t *out, json_t *problems);
void rl_catalog_dataset_free(rl_catalog_dataset_t *dataset);

/* 1 when the object (an entity or a score) comes from a hidden source. */
int rl_catalog_dataset_is_hidden(const rl_catalog_dataset_t *dataset, const json_t *object);

/*
 * Reads the regular file dir/rel of at most cap bytes. Returns a malloc'd
 * copy (NUL added, not counted in *len), or NULL with the reason in *why.
 */
char *rl_catalog_dataset_read_file(const char *dir, const char *rel, size_t cap, size_t *len, const char **why);

/* Formats a problem object as "file: field: message" into buf. */
void rl_catalog_problem_format(const json_t *problem, char *buf, size_t bufsz);

#endif
