#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/strmap.h"
#include "relay/hub.h"

struct user {
    char *user_id;
    rl_hub_subscriber_t *head;
    size_t count;
    int delivering; /* inside rl_hub_deliver: the entry must outlive the walk */
};

struct rl_hub {
    rl_bus_t *bus;
    rl_strmap_t *users;
    uint64_t published;
    size_t hooked; /* subscribers with a published hook: none, and a publish looks nothing up */
};

rl_hub_t *rl_hub_new(rl_bus_t *bus, size_t max_users)
{
    rl_hub_t *hub = calloc(1, sizeof(*hub));

    if (hub == NULL)
        return NULL;
    hub->bus = bus;
    hub->users = rl_strmap_new(max_users);
    if (hub->users == NULL) {
        free(hub);
        return NULL;
    }
    return hub;
}

static void user_free(void *p)
{
    struct user *user = p;

    free(user->user_id);
    free(user);
}

void rl_hub_free(rl_hub_t *hub)
{
    if (hub == NULL)
        return;
    rl_strmap_free(hub->users, user_free);
    free(hub);
}

rl_bus_t *rl_hub_bus(rl_hub_t *hub)
{
    return hub->bus;
}

static void user_release(rl_hub_t *hub, struct user *user);

void rl_hub_publish(rl_hub_t *hub, const char *user_id, const char *name, json_t *data)
{
    struct user *user;
    rl_hub_subscriber_t *sub, *next;

    ++hub->published;
    rl_bus_publish(hub->bus, user_id, name, data);
    if (hub->hooked == 0 || (user = rl_strmap_get(hub->users, user_id)) == NULL)
        return;
    user->delivering = 1;
    for (sub = user->head; sub != NULL; sub = next) {
        next = sub->_next;
        if (sub->published != NULL)
            sub->published(sub);
    }
    user->delivering = 0;
    user_release(hub, user);
}

uint64_t rl_hub_published(const rl_hub_t *hub)
{
    return hub->published;
}

int rl_hub_subscribe(rl_hub_t *hub, const char *user_id, rl_hub_subscriber_t *sub)
{
    struct user *user = rl_strmap_get(hub->users, user_id);

    if (user == NULL) {
        user = calloc(1, sizeof(*user));
        if (user == NULL || (user->user_id = strdup(user_id)) == NULL ||
            rl_strmap_put(hub->users, user_id, user) != 0) {
            if (user != NULL)
                user_free(user);
            return RL_E_UNAVAILABLE;
        }
        rl_bus_listen(hub->bus, user_id, 1);
    }
    sub->_prev = NULL;
    sub->_next = user->head;
    if (user->head != NULL)
        user->head->_prev = sub;
    user->head = sub;
    sub->_user = user;
    ++user->count;
    if (sub->published != NULL)
        ++hub->hooked;
    return 0;
}

/* The last stream of a user here is gone: stop listening to it. */
static void user_release(rl_hub_t *hub, struct user *user)
{
    if (user->count > 0 || user->delivering)
        return;
    rl_bus_listen(hub->bus, user->user_id, 0);
    rl_strmap_remove(hub->users, user->user_id);
    user_free(user);
}

void rl_hub_unsubscribe(rl_hub_t *hub, rl_hub_subscriber_t *sub)
{
    struct user *user = sub->_user;

    if (user == NULL)
        return;
    if (sub->_prev != NULL)
        sub->_prev->_next = sub->_next;
    else
        user->head = sub->_next;
    if (sub->_next != NULL)
        sub->_next->_prev = sub->_prev;
    sub->_prev = sub->_next = NULL;
    sub->_user = NULL;
    --user->count;
    if (sub->published != NULL)
        --hub->hooked;
    user_release(hub, user);
}

void rl_hub_deliver(rl_hub_t *hub, const char *user_id, int64_t id, rl_blob_t *frame)
{
    struct user *user = rl_strmap_get(hub->users, user_id);
    rl_hub_subscriber_t *sub, *next;

    if (user == NULL)
        return;
    /* A subscriber may unsubscribe itself from inside deliver; its neighbour is read first. */
    user->delivering = 1;
    for (sub = user->head; sub != NULL; sub = next) {
        next = sub->_next;
        sub->deliver(sub, id, frame);
    }
    user->delivering = 0;
    user_release(hub, user);
}

size_t rl_hub_subscribers(rl_hub_t *hub, const char *user_id)
{
    struct user *user = rl_strmap_get(hub->users, user_id);

    return user != NULL ? user->count : 0;
}
