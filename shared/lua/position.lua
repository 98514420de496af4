-- position: the user's state; a waiting user is marked as seen (not a
-- leaver). A pre-queued one need not be: nobody is dropped from a
-- pre-queue for silence. A visitor holding a claim (passed over asleep)
-- takes it up: back in line first, on its own ticket (prelude reclaim).
-- KEYS[1] waiting  KEYS[2] token:<uid>  KEYS[3] status:<uid>  KEYS[4] config
-- KEYS[5] pre  KEYS[6] draw  KEYS[7] claims  KEYS[8] stats
-- ARGV[1] uid  ARGV[2] key base '<prefix>:{<queue>}:' (for the seen bitmaps)
-- Reply: a waiting_reply, pre_queue_reply or settled_state reply (see
--   prelude); {'sold_out'} for a visitor without a place in a queue whose
--   kept stock is gone (one in line keeps the place: its reply carries the
--   units left, and the edge tells it the same).
local uid, base = ARGV[1], ARGV[2]
local ticket = redis.call('ZSCORE', KEYS[1], uid)
if ticket then
  local cfg = read_config(KEYS[4])
  local now = now_ms()
  ticket = tonumber(ticket)
  if cfg[CF_ABANDON_AFTER_MS] then mark_seen(base, now, ticket, seen.live(cfg, now)) end
  return line_reply(KEYS[1], uid, ticket, cfg, now)
end
do
  local cfg, now = read_config(KEYS[4]), now_ms()
  local claim = reclaim({claims = KEYS[7], waiting = KEYS[1], status = KEYS[3], stats = KEYS[8]}, base, uid, now, cfg)
  if claim then return line_reply(KEYS[1], uid, claim, cfg, now) end
end
local slot, sealed = redis.call('ZSCORE', KEYS[5], uid), false
if not slot then slot, sealed = redis.call('ZSCORE', KEYS[6], uid), true end
if slot then
  -- Revoked while pre-queued: the place stays but is never drawn.
  if settled_state(KEYS[2], KEYS[3])[REPLY_KIND] == R.REVOKED then return {R.REVOKED} end
  return pre_queue_reply(read_config(KEYS[4]), now_ms(), slot, draw_number(KEYS[4], sealed))
end
local settled = settled_state(KEYS[2], KEYS[3])
if settled[REPLY_KIND] == R.NOT_IN_QUEUE
  and stock.sold_out(read_fields(KEYS[4], STOCK.LEFT)) then
  return {R.SOLD_OUT}
end
return settled
