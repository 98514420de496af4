-- pass: idle passthrough for a protected request that brings no token.
-- While nobody waits (no line, no pre-queue, no draw), a slot is free and
-- the shared rate bucket holds a token, the request takes a slot and is in
-- flight at once, exactly as if a token had been issued and consumed; the
-- edge forwards it and settles as usual. It spends the client address's
-- entry budget like a new place in `enter` does.
-- No one holds the in-flight record's token (the visitor never saw it), so
-- it is written with no retry left (expiresAt = now, one restore spent):
-- a failed order's settle marks it expired and frees the slot at once,
-- instead of holding it for a token_ttl nobody can use.
-- KEYS[1] waiting  KEYS[2] pre  KEYS[3] active  KEYS[4] config  KEYS[5] stats
-- KEYS[6] token:<uid>  KEYS[7] status:<uid>
-- KEYS[8] guard (HASH: client address → its budget `tokens|at`)
-- KEYS[9] claims (a visitor holding one takes it up in line, not here)
-- KEYS[10] session:<uid>  KEYS[11] stock_held (an order holds one unit of a
--   kept stock)
-- ARGV[1] uid  ARGV[2] a fresh entry token (the in-flight record's, or on a
--   browse route the visitor's token for the order)
-- ARGV[3] the client address group ('' no budget)
-- ARGV[4] 'spend' (an order: in flight at once) | 'browse' (a page of the
--   checkout: the visitor is admitted, with a token issued for their order
--   that the edge sets as a cookie)
-- ARGV[5] ARGV[6] an IPv6 group's /56 and /48 ('' for IPv4): their budgets
--   are spent too
-- Either opens the visitor's session (README, *Browse and spend routes*):
-- after the order, the pages after it pass until the session ends.
-- Reply: {'ok', session endsAt} · {'queue', why} ('holds' this visitor holds a token or
--   a slot already: use it; or join the line: 'off' passthrough is off ·
--   'closed' the queue takes no entries · 'revoked' an operator revoked
--   this visitor · 'waiting' someone waits or a
--   pre-queue/draw exists, or this visitor holds a claim · 'full' no free slot · 'rate' the rate allows
--   none now) · {'too_many', retry_after_ms} (the address spent its entry
--   budget; only the refused_budget counter is written) · {'sold_out'} (a
--   kept stock is gone) · UNCONFIGURED.
--   Nothing else is written unless the reply is {'ok'}.
local uid, token, mode = ARGV[1], ARGV[2], ARGV[4]
if mode ~= 'spend' and mode ~= 'browse' then return redis.error_reply('pass: unknown mode') end
local cfg = read_config(KEYS[4], CF_IDLE_PASSTHROUGH, CF_MAX_ACTIVE, CF_RATE_NOW, CF_TICK_MS,
  CF_IN_FLIGHT_MS, CF_STATUS_TTL_MS, CF_ENTRY_BUDGET_PER_MINUTE, CF_ENTRY_BUDGET_BURST, CF_SESSION_MS)
if not cfg[CF_STATE] or not cfg[CF_MAX_ACTIVE] or not cfg[CF_TICK_MS]
  or not cfg[CF_IN_FLIGHT_MS] or not cfg[CF_STATUS_TTL_MS] or not cfg[CF_SESSION_MS] then
  return UNCONFIGURED
end
-- A visitor who holds a token or a slot is told so first, whatever else
-- holds: they must send their token, not join the line again.
if redis.call('EXISTS', KEYS[6]) == 1 or redis.call('ZSCORE', KEYS[3], uid) then
  return {R.QUEUE, R.HOLDS}
end
-- A revoked visitor passes nowhere: the queue's page tells them.
local st = redis.call('GET', KEYS[7])
if st and split(st)[SR_KIND] == ST_REVOKED then return {R.QUEUE, R.REVOKED} end
if cfg[CF_IDLE_PASSTHROUGH] ~= 'true' then return {R.QUEUE, R.OFF} end
local now = now_ms()
local closes_at = tonumber(cfg[CF_CLOSES_AT] or '')
if cfg[CF_STATE] ~= QS_OPEN or (closes_at and now >= closes_at) then return {R.QUEUE, R.CLOSED} end
if stock.sold_out(cfg) then return {R.SOLD_OUT} end
if before_opening(cfg, now) or drawing_left(cfg) > 0 or redis.call('ZCARD', KEYS[1]) > 0
  or redis.call('EXISTS', KEYS[2]) == 1 or redis.call('ZSCORE', KEYS[9], uid) then
  return {R.QUEUE, R.WAITING}
end
-- The address's entry budget, as in enter (for IPv6 its /56's and /48's
-- too): checked before the slot and the rate, spent only if the request
-- passes.
local per_minute = tonumber(cfg[CF_ENTRY_BUDGET_PER_MINUTE] or '0')
local address = ARGV[3] ~= '' and per_minute > 0 and ARGV[3] or nil
local fields, spent = {}, nil
if address then
  fields = ARGV[5] ~= '' and {address, ARGV[5], ARGV[6]} or {address}
  local per_ms, retry = per_minute / 60000, nil
  spent, retry = budget_spend(redis.call('HMGET', KEYS[8], unpack(fields)), #fields, now, per_ms,
    tonumber(cfg[CF_ENTRY_BUDGET_BURST] or '0'))
  if not spent then
    redis.call('HINCRBY', KEYS[5], SF_REFUSED_BUDGET, 1)
    return {R.TOO_MANY, retry}
  end
end
-- A page holds its slot for the whole session, and a pass needs no proof
-- of work: browsing an idle room may fill at most half of the slots, so
-- junk page loads can never hold them all (SECURITY.md); the rest are for
-- orders and for the line, whose places cost a solved challenge.
if mode == 'browse' and 2 * (redis.call('ZCARD', KEYS[3]) + 1) > tonumber(cfg[CF_MAX_ACTIVE]) then
  return {R.QUEUE, R.FULL}
end
-- The stock lets out as many turns as the admit tick would (prelude
-- stock.room): none left, the visitor queues.
if stock.room(KEYS[4], KEYS[3], KEYS[11]) < 1 then return {R.QUEUE, R.FULL} end
local refused = pass_admit(KEYS[3], KEYS[5], now, cfg[CF_MAX_ACTIVE], cfg[CF_RATE_NOW], cfg[CF_ADMIT_RATE_PER_SECOND],
  cfg[CF_TICK_MS])
if refused then return {R.QUEUE, refused} end
if address then
  local writes = {}
  for i = 1, #fields do
    writes[#writes + 1] = fields[i]
    writes[#writes + 1] = spent[i]
  end
  redis.call('HSET', KEYS[8], unpack(writes))
end
local ends = now + tonumber(cfg[CF_SESSION_MS])
set_session(KEYS[10], now, ends, now + SESSION_CAP_MS, 1, now)
if mode == 'browse' then
  -- Admitted and come at once: the token and the slot last the session.
  redis.call('SET', KEYS[6], token_record(token, now, ends, 0), 'PX', ends - now)
  set_status(KEYS[7], uid, ST_ISSUED, now, tonumber(cfg[CF_STATUS_TTL_MS]))
  redis.call('ZADD', KEYS[3], ends, uid)
  return {R.OK, ends}
end
-- activateAt = expiresAt = now, restores = 1: settle finds no retry left.
-- The order holds its unit (there is one: stock.room found room).
stock.hold(KEYS[4], KEYS[11], uid)
set_status(KEYS[7], uid, ST_IN_FLIGHT, now, tonumber(cfg[CF_STATUS_TTL_MS]), token_record(token, now, now, 1))
redis.call('ZADD', KEYS[3], now + tonumber(cfg[CF_IN_FLIGHT_MS]), uid)
return {R.OK, ends}
