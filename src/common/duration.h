#ifndef RL_COMMON_DURATION_H
#define RL_COMMON_DURATION_H

#include <stdint.h>

/*
 * Parses a duration with a unit ("250ms", "3s", "5m", "24h", "2d") into
 * milliseconds. A bare number is refused: every setting names its unit.
 * Returns 0, or -1 for malformed input, a missing unit or an overflow.
 */
int rl_duration_parse(const char *text, int64_t *ms);
/*
 * As rl_duration_parse, except that a bare number is read in units of
 * bare_unit_ms (1 for milliseconds, 1000 for seconds): for the flags of the
 * command-line programs, which took bare numbers before they took units.
 * bare_unit_ms 0 refuses a bare number, exactly as rl_duration_parse.
 */
int rl_duration_parse_default(const char *text, int64_t bare_unit_ms, int64_t *ms);
/* Formats milliseconds back into the largest exact unit ("90s", "5m"). */
void rl_duration_format(int64_t ms, char *buf, int bufsz);

#endif
