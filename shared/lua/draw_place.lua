-- draw_place: places one batch of the sealed pre-queue on its drawn
-- tickets. The visitors of `draw` are taken by rank (their pre-tickets:
-- `draw` does not change while the draw runs), so the batch and the cursor
-- move together in one script: a holder killed between two calls loses
-- nothing and places nobody twice; the next one resumes at the cursor.
-- KEYS[1] draw  KEYS[2] waiting  KEYS[3] config  KEYS[4] stats  KEYS[5] lock
-- ARGV[1] lease owner id  ARGV[2] key base '<prefix>:{<queue>}:'
-- ARGV[3] the cursor this batch starts at (draw_done as the caller read it)
-- ARGV[4..] the drawn ticket of each visitor from that rank on
-- Reply: {'not_owner'} · {'moved', done} (the cursor is elsewhere, or the
--   seats are not dealt yet: nothing written) · {'placed', placed, dropped, left}. Everyone is placed
--   (dropped is 0: nobody leaves a pre-queue for silence) but visitors an
--   operator revoked (counted as withdrawn), and marked seen
--   now, the grace in which to poll; far back the near zone's front gives
--   it again when it passes (docs/uncapped-line.md).
if redis.call('GET', KEYS[5]) ~= ARGV[1] then return {R.NOT_OWNER} end
local d = read_fields(KEYS[3], CF_DRAW_LEFT, CF_DRAW_DONE, CF_ABANDON_AFTER_MS, CF_SLEEP_GRACE_MS,
  CF_SEEN_PREV, CF_GRACE_PREV, CF_DRAW_SHUFFLE)
local left, done = tonumber(d[CF_DRAW_LEFT] or '0'), tonumber(d[CF_DRAW_DONE] or '0')
-- Nobody is placed before the seats are dealt (draw_shuffle).
if left == 0 or done ~= tonumber(ARGV[3]) or d[CF_DRAW_SHUFFLE] == DS_PENDING then
  return {R.MOVED, done}
end
local base = ARGV[2]
local now = now_ms()
local live = seen.live(d, now)
local want = math.min(#ARGV - 3, left)
local batch = redis.call('ZRANGE', KEYS[1], done, done + want - 1)
local placed, dropped, withdrawn = 0, 0, 0
for i = 1, #batch do
  local uid = batch[i]
  -- A visitor an operator revoked is not placed: its ticket stays empty.
  local st = redis.call('GET', base .. K_STATUS .. uid)
  if not (st and split(st)[SR_KIND] == ST_REVOKED) then
    local ticket = tonumber(ARGV[3 + i])
    redis.call('ZADD', KEYS[2], 'NX', ticket, uid)
    mark_seen(base, now, ticket, live)
    placed = placed + 1
  else
    withdrawn = withdrawn + 1
  end
end
local moved = #batch
-- `draw` holds exactly the unplaced visitors from the cursor on; an empty
-- batch (it cannot be, unless the key was removed by hand) ends the draw.
left = moved == 0 and 0 or left - moved
if left == 0 then
  redis.call('UNLINK', KEYS[1])
end
redis.call('HSET', KEYS[3], CF_DRAW_LEFT, left, CF_DRAW_DONE, done + moved)
if placed > 0 then redis.call('HINCRBY', KEYS[4], SF_DRAWN, placed) end
if dropped > 0 then redis.call('HINCRBY', KEYS[4], SF_ABANDONED, dropped) end
if withdrawn > 0 then redis.call('HINCRBY', KEYS[4], SF_WITHDRAWN, withdrawn) end
return {R.PLACED, placed, dropped, left}
