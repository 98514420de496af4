-- browse: a browse route's check (README, *Browse and spend routes*): an
-- admitted visitor's session passes any number of times until it ends;
-- the order itself stays one-time (consume).
-- KEYS[1] session:<uid>  KEYS[2] token:<uid>  KEYS[3] active  KEYS[4] config
-- ARGV[1] uid  ARGV[2] 'visit' (a request of the visitor's own: the first
--   makes the token and the slot last as long as the session, and a
--   renewing queue moves its end) | 'look' (a prefetch or prerender:
--   nothing is written)
-- Reply: {'ok', endsAt} · {'early', wait_ms} (before the turn's
--   activateAt; nothing changed) · {'no_session'} (none, or it ended;
--   nothing changed: the gate treats the request as one without a token).
-- A session ends early when its turn does: an unused token's expiry, a
-- failed order with no retry left, a revocation (those scripts delete it);
-- after an order it lives on, without its slot, for the pages after it.
local uid, mode = ARGV[1], ARGV[2]
if mode ~= 'visit' and mode ~= 'look' then return redis.error_reply('browse: unknown mode') end
local rec = redis.call('GET', KEYS[1])
local now = now_ms()
if not rec then
  -- A turn issued before sessions existed (a worker and scheduler
  -- upgraded mid-drop): its token and slot are its session.
  local tok = redis.call('GET', KEYS[2])
  if not tok or not redis.call('ZSCORE', KEYS[3], uid) then return {R.NO_SESSION} end
  local t = split(tok)
  local expires = tonumber(t[TR_EXPIRES_AT])
  if now >= expires then return {R.NO_SESSION} end
  if mode == 'look' then return {R.OK, expires} end
  rec = record(t[TR_ACTIVATE_AT], expires, tonumber(t[TR_ACTIVATE_AT]) + SESSION_CAP_MS, 0)
end
local f = split(rec)
local activate, ends, cap = tonumber(f[SN.ACTIVATE_AT]), tonumber(f[SN.ENDS_AT]), tonumber(f[SN.CAP_AT])
if now >= ends then return {R.NO_SESSION} end
if now < activate then return {R.EARLY, activate - now} end
if mode == 'look' then return {R.OK, ends} end
local new_ends = ends
local cfg = read_fields(KEYS[4], CF_SESSION_MS, CF_SESSION_RENEW)
if cfg[CF_SESSION_RENEW] == 'true' and tonumber(cfg[CF_SESSION_MS] or '') then
  new_ends = math.max(ends, math.min(now + tonumber(cfg[CF_SESSION_MS]), cap))
end
if f[SN.TOUCHED] == '1' and new_ends == ends then return {R.OK, ends} end
-- The visitor came (or renewed): an unused token and its slot last until
-- the session's end. A token in flight has no key; its slot keeps the
-- in-flight deadline, and a restore gives it the (extended) expiry back.
local tok = redis.call('GET', KEYS[2])
if tok then
  local t = split(tok)
  if tonumber(t[TR_EXPIRES_AT]) < new_ends then
    redis.call('SET', KEYS[2], token_record(t[TR_TOKEN], t[TR_ACTIVATE_AT], new_ends, t[TR_RESTORES]), 'PX', new_ends - now)
    local slot = redis.call('ZSCORE', KEYS[3], uid)
    if slot and tonumber(slot) < new_ends then redis.call('ZADD', KEYS[3], new_ends, uid) end
  end
end
set_session(KEYS[1], activate, new_ends, cap, 1, now)
return {R.OK, new_ends}
