/* The bridge's download thread (fetcher.h). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bridge/fetcher.h"
#include "client/client.h"
#include "common/log.h"

#define FETCH_CONNECT_MS 5000
#define FETCH_TOTAL_MS   60000

struct rl_fetcher {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    rl_fetch_t *head, *tail; /* jobs waiting */
    rl_fetch_t *results, *results_tail;
    int jobs;     /* waiting or in flight: bounded by RL_FETCH_QUEUE_MAX */
    int stopping; /* atomic: also the client's stop flag, so that a stop ends a download in progress */
    int efd;
};

/* One GET of an absolute URL (the signed link relayd hydrated): job->body on a 200, else logged. */
static void download(rl_fetcher_t *fetcher, rl_fetch_t *job)
{
    rl_client_options_t options = {FETCH_CONNECT_MS, FETCH_TOTAL_MS, RL_FETCH_BODY_MAX, "relay-bridge",
                                   &fetcher->stopping};
    rl_client_response_t response;
    int result = rl_client_get_url(job->url, &options, &response);

    if (result == 0 && response.status == 200) {
        job->body = response.body;
        job->len = response.len;
        response.body = NULL;
    } else if (result != RL_CLIENT_E_STOPPED) {
        rl_log(RL_LOG_WARN, "sealed attachment: download failed (HTTP %ld %s)", response.status, response.error);
    }
    rl_client_response_free(&response);
}

static void *worker_main(void *arg)
{
    rl_fetcher_t *fetcher = arg;
    uint64_t one = 1;

    pthread_mutex_lock(&fetcher->lock);
    while (!fetcher->stopping) {
        rl_fetch_t *job = fetcher->head;
        if (job == NULL) {
            pthread_cond_wait(&fetcher->cond, &fetcher->lock);
            continue;
        }
        fetcher->head = job->next;
        if (fetcher->head == NULL)
            fetcher->tail = NULL;
        job->next = NULL;
        pthread_mutex_unlock(&fetcher->lock);
        download(fetcher, job);
        pthread_mutex_lock(&fetcher->lock);
        if (fetcher->results_tail != NULL)
            fetcher->results_tail->next = job;
        else
            fetcher->results = job;
        fetcher->results_tail = job;
        if (write(fetcher->efd, &one, sizeof(one)) < 0)
            rl_log(RL_LOG_WARN, "could not wake the loop: %s", strerror(errno));
    }
    pthread_mutex_unlock(&fetcher->lock);
    return NULL;
}

rl_fetcher_t *rl_fetcher_start(void)
{
    rl_fetcher_t *fetcher = calloc(1, sizeof(*fetcher));

    if (fetcher == NULL)
        return NULL;
    fetcher->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&fetcher->lock, NULL);
    pthread_cond_init(&fetcher->cond, NULL);
    if (fetcher->efd < 0 || pthread_create(&fetcher->thread, NULL, worker_main, fetcher) != 0) {
        if (fetcher->efd >= 0)
            close(fetcher->efd);
        pthread_cond_destroy(&fetcher->cond);
        pthread_mutex_destroy(&fetcher->lock);
        free(fetcher);
        return NULL;
    }
    return fetcher;
}

static void free_list(rl_fetch_t *job)
{
    while (job != NULL) {
        rl_fetch_t *next = job->next;
        rl_fetch_free(job);
        job = next;
    }
}

void rl_fetcher_stop(rl_fetcher_t *fetcher)
{
    if (fetcher == NULL)
        return;
    pthread_mutex_lock(&fetcher->lock);
    __atomic_store_n(&fetcher->stopping, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&fetcher->cond);
    pthread_mutex_unlock(&fetcher->lock);
    pthread_join(fetcher->thread, NULL);
    free_list(fetcher->head);
    free_list(fetcher->results);
    close(fetcher->efd);
    pthread_cond_destroy(&fetcher->cond);
    pthread_mutex_destroy(&fetcher->lock);
    free(fetcher);
}

int rl_fetcher_fd(const rl_fetcher_t *fetcher)
{
    return fetcher->efd;
}

int rl_fetcher_submit(rl_fetcher_t *fetcher, const char *url, void *owner, size_t index)
{
    rl_fetch_t *job;

    pthread_mutex_lock(&fetcher->lock);
    if (fetcher->jobs >= RL_FETCH_QUEUE_MAX) {
        pthread_mutex_unlock(&fetcher->lock);
        return -1;
    }
    job = calloc(1, sizeof(*job));
    if (job != NULL)
        job->url = strdup(url);
    if (job == NULL || job->url == NULL) {
        pthread_mutex_unlock(&fetcher->lock);
        free(job);
        return -1;
    }
    job->owner = owner;
    job->index = index;
    if (fetcher->tail != NULL)
        fetcher->tail->next = job;
    else
        fetcher->head = job;
    fetcher->tail = job;
    fetcher->jobs++;
    pthread_cond_signal(&fetcher->cond);
    pthread_mutex_unlock(&fetcher->lock);
    return 0;
}

rl_fetch_t *rl_fetcher_results(rl_fetcher_t *fetcher)
{
    rl_fetch_t *done, *job;
    uint64_t n;

    if (read(fetcher->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
        rl_log(RL_LOG_WARN, "eventfd: %s", strerror(errno));
    pthread_mutex_lock(&fetcher->lock);
    done = fetcher->results;
    fetcher->results = fetcher->results_tail = NULL;
    for (job = done; job != NULL; job = job->next)
        fetcher->jobs--;
    pthread_mutex_unlock(&fetcher->lock);
    return done;
}

void rl_fetch_free(rl_fetch_t *job)
{
    if (job == NULL)
        return;
    free(job->url);
    free(job->body);
    free(job);
}
