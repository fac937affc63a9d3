/*
 * Replays a libFuzzer corpus without libFuzzer: every file named on the
 * command line, or every file inside a named folder, is handed once to
 * LLVMFuzzerTestOneInput. make test runs this for each target so that the
 * corpora stay regression tests even in builds without clang's fuzzer.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    uint8_t *data;
    long size;

    if (fp == NULL) {
        perror(path);
        return -1;
    }
    fseek(fp, 0, SEEK_END);
    size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    data = malloc(size > 0 ? (size_t)size : 1);
    if (data == NULL || fread(data, 1, (size_t)size, fp) != (size_t)size) {
        fclose(fp);
        free(data);
        return -1;
    }
    fclose(fp);
    LLVMFuzzerTestOneInput(data, (size_t)size);
    free(data);
    return 0;
}

int main(int argc, char **argv)
{
    int i, count = 0, failed = 0;

    for (i = 1; i < argc; ++i) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            failed |= replay_file(argv[i]) != 0;
            ++count;
            continue;
        }
        DIR *dir = opendir(argv[i]);
        struct dirent *entry;
        while (dir != NULL && (entry = readdir(dir)) != NULL) {
            char path[4096];
            if (entry->d_name[0] == '.')
                continue;
            snprintf(path, sizeof(path), "%s/%s", argv[i], entry->d_name);
            failed |= replay_file(path) != 0;
            ++count;
        }
        if (dir != NULL)
            closedir(dir);
    }
    printf("replayed %d inputs\n", count);
    if (count == 0) {
        fprintf(stderr, "no corpus inputs found\n");
        return 1;
    }
    return failed;
}
