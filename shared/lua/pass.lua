-- pass: idle passthrough for a protected request that brings no token.
-- While nobody waits (no line, no pre-queue, no draw), a slot is free and
-- the shared rate bucket holds a token, the request takes a slot and is in
-- flight at once, exactly as if a token had been issued and consumed; the
-- edge forwards it and settles as usual.
-- KEYS[1] waiting  KEYS[2] pre  KEYS[3] active  KEYS[4] config  KEYS[5] stats
-- KEYS[6] token:<uid>  KEYS[7] status:<uid>
-- ARGV[1] uid  ARGV[2] a fresh entry token (the in-flight record's)
-- Reply: {'ok'} · {'queue', why} ('holds' this visitor holds a token or
--   a slot already: use it; or join the line: 'off' passthrough is off ·
--   'closed' the queue takes no entries · 'waiting' someone waits or a
--   pre-queue/draw exists · 'full' no free slot · 'rate' the rate allows
--   none now) · UNCONFIGURED. Nothing is written unless the reply is {'ok'}.
local uid, token = ARGV[1], ARGV[2]
local CFG_PASSTHROUGH, CFG_MAX_ACTIVE, CFG_TOKEN_TTL, CFG_RATE_NOW, CFG_TICK, CFG_IN_FLIGHT,
  CFG_STATUS_TTL = CFG_MORE, CFG_MORE + 1, CFG_MORE + 2, CFG_MORE + 3, CFG_MORE + 4, CFG_MORE + 5,
  CFG_MORE + 6
local cfg = read_config(KEYS[4], CF_IDLE_PASSTHROUGH, CF_MAX_ACTIVE, CF_TOKEN_TTL_MS, CF_RATE_NOW,
  CF_TICK_MS, CF_IN_FLIGHT_MS, CF_STATUS_TTL_MS)
if not cfg[CFG_STATE] or not cfg[CFG_MAX_ACTIVE] or not cfg[CFG_TOKEN_TTL] or not cfg[CFG_TICK]
  or not cfg[CFG_IN_FLIGHT] or not cfg[CFG_STATUS_TTL] then
  return UNCONFIGURED
end
-- A visitor who holds a token or a slot is told so first, whatever else
-- holds: they must send their token, not join the line again.
if redis.call('EXISTS', KEYS[6]) == 1 or redis.call('ZSCORE', KEYS[3], uid) then
  return {'queue', 'holds'}
end
if cfg[CFG_PASSTHROUGH] ~= 'true' then return {'queue', 'off'} end
local now = now_ms()
local closes_at = tonumber(cfg[CFG_CLOSES_AT] or '')
if cfg[CFG_STATE] ~= QS_OPEN or (closes_at and now >= closes_at) then return {'queue', 'closed'} end
if before_opening(cfg, now) or drawing_left(cfg) > 0 or redis.call('ZCARD', KEYS[1]) > 0
  or redis.call('EXISTS', KEYS[2]) == 1 then
  return {'queue', 'waiting'}
end
local refused = pass_admit(KEYS[3], KEYS[5], now, cfg[CFG_MAX_ACTIVE], cfg[CFG_RATE_NOW], cfg[CFG_RATE],
  cfg[CFG_TICK])
if refused then return {'queue', refused} end
local expires = now + tonumber(cfg[CFG_TOKEN_TTL])
redis.call('SET', KEYS[7], record(ST_IN_FLIGHT, now, token, now, expires, 0), 'PX', tonumber(cfg[CFG_STATUS_TTL]))
redis.call('ZADD', KEYS[3], now + tonumber(cfg[CFG_IN_FLIGHT]), uid)
return {'ok'}
