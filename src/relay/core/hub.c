#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/strmap.h"
#include "http/later.h"
#include "relay/core/hub.h"

struct user {
    rl_later_item_t release; /* first; queued when its last subscriber went */
    rl_hub_t *hub;
    char *user_id;
    rl_hub_subscriber_t *head;
    size_t count;
};

struct rl_hub {
    rl_bus_t *bus;
    /*
     * A user whose last subscriber went is forgotten after the loop turn, so
     * that a walk over its subscribers (which may unsubscribe themselves)
     * never sees its entry go; a subscriber back within the turn keeps it.
     */
    rl_later_t later;
    rl_strmap_t *users;
    uint64_t published;
    size_t hooked; /* subscribers with a published hook: none, and a publish looks nothing up */
};

static void user_release(rl_later_item_t *item);

rl_hub_t *rl_hub_new(rl_bus_t *bus, h2o_loop_t *loop, size_t max_users)
{
    rl_hub_t *hub = calloc(1, sizeof(*hub));

    if (hub == NULL)
        return NULL;
    hub->bus = bus;
    rl_later_init(&hub->later, loop);
    hub->users = rl_strmap_new(max_users);
    if (hub->users == NULL) {
        rl_later_dispose(&hub->later, NULL);
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
    /* Every user still in the map is freed with it, those waiting to be released included. */
    rl_later_dispose(&hub->later, NULL);
    rl_strmap_free(hub->users, user_free);
    free(hub);
}

rl_bus_t *rl_hub_bus(rl_hub_t *hub)
{
    return hub->bus;
}

/* The user's subscribers here that have a `published` hook hear of an event at once. */
static void tell_hooked(rl_hub_t *hub, const char *user_id)
{
    struct user *user;
    rl_hub_subscriber_t *sub, *next;

    if (hub->hooked == 0 || (user = rl_strmap_get(hub->users, user_id)) == NULL)
        return;
    /* A subscriber may unsubscribe itself from inside its hook; its neighbour is read first. */
    for (sub = user->head; sub != NULL; sub = next) {
        next = sub->_next;
        if (sub->published != NULL)
            sub->published(sub);
    }
}

void rl_hub_publish(rl_hub_t *hub, const char *user_id, rl_event_t event, json_t *data)
{
    ++hub->published;
    rl_bus_publish(hub->bus, user_id, rl_event_name(event), data);
    tell_hooked(hub, user_id);
}

void rl_hub_publish_text(rl_hub_t *hub, const char *user_id, rl_event_t event, const char *data, size_t len)
{
    ++hub->published;
    rl_bus_publish_text(hub->bus, user_id, rl_event_name(event), data, len);
    tell_hooked(hub, user_id);
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
        user->hub = hub;
        user->release.run = user_release;
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

/* After the turn in which the last stream of a user here went, unless another came: stop listening to it. */
static void user_release(rl_later_item_t *item)
{
    struct user *user = (struct user *)item;
    rl_hub_t *hub = user->hub;

    if (user->count > 0)
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
    if (user->count == 0)
        rl_later_add(&hub->later, &user->release);
}

void rl_hub_deliver(rl_hub_t *hub, const char *user_id, int64_t id, rl_blob_t *frame)
{
    struct user *user = rl_strmap_get(hub->users, user_id);
    rl_hub_subscriber_t *sub, *next;

    if (user == NULL)
        return;
    /* A subscriber may unsubscribe itself from inside deliver; its neighbour is read first. */
    for (sub = user->head; sub != NULL; sub = next) {
        next = sub->_next;
        sub->deliver(sub, id, frame);
    }
}

size_t rl_hub_subscribers(rl_hub_t *hub, const char *user_id)
{
    struct user *user = rl_strmap_get(hub->users, user_id);

    return user != NULL ? user->count : 0;
}
