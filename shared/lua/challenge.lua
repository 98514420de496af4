-- challenge: what a new proof-of-work challenge for this queue needs.
-- KEYS[1] config  KEYS[2] waiting  KEYS[3] pre
-- Reply: a challenge reply (CR.*: max_number, ttl_ms and the difficulty
--   level in force, the prelude's challenge_level of the size) ·
--   UNCONFIGURED (no published settings), where the size counts every place a new one would
--   queue behind, as enter counts them: the waiting line, the pre-queue
--   and the places a running draw has still to give out. Read-only.
local cfg = required_config(KEYS[1], CF_CHALLENGE_MAX_NUMBER, CF_CHALLENGE_TTL_MS, CF_CHALLENGE_CROWD)
if not cfg then return UNCONFIGURED end
local left = tonumber(redis.call('HGET', KEYS[1], CF_DRAW_LEFT) or '0')
local size = redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', KEYS[3]) + left
local r = {}
r[CR.MAX_NUMBER], r[CR.TTL_MS], r[CR.LEVEL] = cfg[CF_CHALLENGE_MAX_NUMBER], cfg[CF_CHALLENGE_TTL_MS],
  challenge_level(size, tonumber(cfg[CF_CHALLENGE_CROWD]))
return r
