/* Issue 36: a session's agent state, its steering, and the bridge's projects and agent sessions (agents.h). */
#include "relay/agents.h"

int rl_printable_check(const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len; ++i)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return -1;
    return 0;
}
