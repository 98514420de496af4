-- challenge: what a new proof-of-work challenge for this queue needs.
-- KEYS[1] config  KEYS[2] waiting
-- Reply: {max_number, ttl_ms, max_waiting, waiting} · UNCONFIGURED (no
--   published settings). Read-only.
local cfg = required_config(KEYS[1], CF_CHALLENGE_MAX_NUMBER, CF_CHALLENGE_TTL_MS, CF_MAX_WAITING)
if not cfg then return UNCONFIGURED end
return {cfg[1], cfg[2], cfg[3], redis.call('ZCARD', KEYS[2])}
