/*
 * Helpers of the catalog unit tests: temporary dataset folders written from
 * strings, and a small valid dataset with one entity of every type, scores,
 * a paper with files and a hidden source.
 */
#ifndef RL_TEST_CATALOG_FIXTURE_H
#define RL_TEST_CATALOG_FIXTURE_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *fixture_dir(void)
{
    char *dir = strdup("/tmp/rl-catalog-test-XXXXXX");

    assert_non_null(mkdtemp(dir));
    return dir;
}

static void fixture_write(const char *dir, const char *rel, const char *content)
{
    char path[4096];
    char *slash;
    FILE *fp;

    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    for (slash = strchr(path + strlen(dir) + 1, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(path, 0700);
        *slash = '/';
    }
    fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs(content, fp);
    fclose(fp);
}

static int fixture_unlink(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void fixture_remove(char *dir)
{
    nftw(dir, fixture_unlink, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

/* One entity of every type, two scores, files for an open paper and a hidden source. */
static const char fixture_main[] =
    "{\"sources\": [{\"id\": \"public\", \"title\": \"Public\", \"hidden\": false},"
    "               {\"id\": \"secret\", \"title\": \"Secret\", \"hidden\": true}],"
    " \"licences\": [{\"id\": \"cc-by-4.0\", \"title\": \"CC BY 4.0\", \"redistributable\": true},"
    "                {\"id\": \"closed\", \"title\": \"Closed\", \"redistributable\": false}],"
    " \"organizations\": [{\"slug\": \"acme\", \"title\": \"Acme Labs\", \"summary\": \"A lab.\", \"kind\": "
    "\"lab\"}],"
    " \"people\": [{\"slug\": \"ann\", \"title\": \"Ann Author\", \"summary\": \"A person.\", "
    "\"organizations\": [\"acme\"]}],"
    " \"capabilities\": [{\"slug\": \"maths\", \"title\": \"Maths\", \"summary\": \"Sums.\"}],"
    " \"papers\": [{\"slug\": \"open-paper\", \"title\": \"Open Paper\", \"summary\": \"Open.\", \"year\": "
    "2024,"
    "               \"authors\": [\"Ann Author\"], \"people\": [\"ann\"], \"licence\": \"cc-by-4.0\","
    "               \"arxiv\": \"2401.00001\", \"text\": \"papers/open.txt\", \"pdf\": \"papers/open.pdf\"},"
    "              {\"slug\": \"closed-paper\", \"title\": \"Closed Paper\", \"summary\": \"Closed.\", "
    "\"year\": 2023,"
    "               \"authors\": [\"B\"], \"licence\": \"closed\"}],"
    " \"evals\": [{\"slug\": \"sums\", \"title\": \"Sums\", \"summary\": \"Adding numbers.\", \"papers\": "
    "[\"open-paper\"],"
    "              \"capabilities\": [\"maths\"], \"organization\": \"acme\", \"items\": 10}],"
    " \"models\": [{\"slug\": \"adder-1\", \"title\": \"Adder 1\", \"summary\": \"Adds.\", \"organization\": "
    "\"acme\","
    "               \"released\": \"2024-05\", \"open_weights\": true, \"homepage\": "
    "\"https://acme.example/adder\"},"
    "              {\"slug\": \"adder-2\", \"title\": \"Adder 2\", \"summary\": \"Adds better.\", "
    "\"organization\": \"acme\","
    "               \"released\": \"2024-06-01\", \"open_weights\": false, \"base_model\": \"adder-1\"}],"
    " \"tools\": [{\"slug\": \"runner\", \"title\": \"Runner\", \"summary\": \"Runs sums.\", \"kind\": "
    "\"harness\","
    "              \"evals\": [\"sums\"]}],"
    " \"leaderboards\": [{\"slug\": \"board\", \"title\": \"Board\", \"summary\": \"Ranks.\", \"evals\": "
    "[\"sums\"]}],"
    " \"scores\": [{\"model\": \"adder-1\", \"eval\": \"sums\", \"value\": 50.5, \"source_url\": "
    "\"https://acme.example/1\"},"
    "             {\"model\": \"adder-2\", \"eval\": \"sums\", \"value\": 75, \"setting\": \"0-shot\","
    "              \"source_url\": \"https://acme.example/2\"}]}";

static const char fixture_hidden[] = "{\"models\": [{\"slug\": \"ghost\", \"title\": \"Ghost\", \"summary\": "
                                     "\"Hidden.\", \"organization\": \"acme\","
                                     "              \"released\": \"2025\", \"open_weights\": false, "
                                     "\"base_model\": \"adder-1\", \"source\": \"secret\"}],"
                                     " \"scores\": [{\"model\": \"ghost\", \"eval\": \"sums\", \"value\": "
                                     "99, \"source_url\": \"https://x.example/\"},"
                                     "             {\"model\": \"adder-1\", \"eval\": \"sums\", \"value\": "
                                     "98, \"source_url\": \"https://x.example/\","
                                     "              \"source\": \"secret\"}]}";

/* Writes the valid fixture into a new folder and returns it. */
static char *fixture_dataset(void)
{
    char *dir = fixture_dir();

    fixture_write(dir, "main.json", fixture_main);
    fixture_write(dir, "hidden/ghost.json", fixture_hidden);
    fixture_write(dir, "papers/open.txt", "The open paper.\n");
    fixture_write(dir, "papers/open.pdf", "%PDF-1.4\n%%EOF\n");
    return dir;
}

#endif
