-- revoke: an operator ends a visitor's place or token, or lifts that.
-- KEYS[1] waiting  KEYS[2] pre  KEYS[3] draw  KEYS[4] token:<uid>
-- KEYS[5] status:<uid>  KEYS[6] active  KEYS[7] stats  KEYS[8] claims
-- KEYS[9] session:<uid>
-- ARGV[1] 'revoke' | 'lift'  ARGV[2] uid  ARGV[3] (revoke) how long the
--   revocation keeps the visitor out, ms
-- Reply: {1, was} revoked; `was` is what the visitor had: 'waiting' (the
--   place, or a claim to it, is gone, counted as withdrawn), 'pre_queued' / 'drawing' (the place stays in the
--   pre-queue, whose indices must stay dense, but is never drawn),
--   'admitted' (the token is deleted and its slot freed, counted as
--   expired), 'in_flight' (the order is already at the origin: its settle
--   finds the revocation and changes nothing, the slot runs out and is
--   counted as expired), 'revoked'
--   (again: the revocation starts over), or the settled state ('ordered',
--   'expired', 'abandoned', 'not_in_queue'): the visitor is kept out
--   · {1, 'lifted'} the revocation ended (nothing else changes: the
--   visitor enters anew) · {0, 'not_revoked'} (lift: nothing to lift).
-- The revocation is a status record `REVOKED|at` (and a history entry):
-- enter, position and the gate's passthrough answer 'revoked' while it
-- lasts.
local mode, uid = ARGV[1], ARGV[2]
local now = now_ms()
local st = redis.call('GET', KEYS[5])
local kind = st and split(st)[SR_KIND]
if mode == 'lift' then
  if kind ~= ST_REVOKED then return {0, R.NOT_REVOKED} end
  redis.call('DEL', KEYS[5])
  return {1, R.LIFTED}
end
if mode ~= 'revoke' then return redis.error_reply('revoke: unknown mode') end
local ttl = tonumber(ARGV[3])
if not ttl or ttl < 1 then return redis.error_reply('revoke: bad ttl') end
local was
if redis.call('ZREM', KEYS[1], uid) == 1 or redis.call('ZREM', KEYS[8], uid) == 1 then
  was = R.WAITING
  redis.call('HINCRBY', KEYS[7], SF_WITHDRAWN, 1)
elseif redis.call('ZSCORE', KEYS[2], uid) then
  was = R.PRE_QUEUED
elseif redis.call('ZSCORE', KEYS[3], uid) then
  was = R.DRAWING
elseif redis.call('EXISTS', KEYS[4]) == 1 then
  -- The token ends unused: counted as expired, as if it had run out.
  was = R.ADMITTED
  redis.call('DEL', KEYS[4])
  if redis.call('ZREM', KEYS[6], uid) == 1 then redis.call('HINCRBY', KEYS[7], SF_EXPIRED, 1) end
elseif kind == ST_IN_FLIGHT then
  was = R.IN_FLIGHT
elseif kind then
  was = string.lower(kind)
else
  was = R.NOT_IN_QUEUE
end
-- A revoked visitor's session ends: browse routes no longer pass.
redis.call('DEL', KEYS[9])
set_status(KEYS[5], uid, ST_REVOKED, now, ttl)
redis.call('HINCRBY', KEYS[7], SF_REVOKED, 1)
return {1, was}
