-- draw_open: the lease holder's view of the pre-queue, each tick. Seals a
-- pre-queue whose opening has passed (if no entry did it first) and gives
-- a running draw its seed, once.
-- KEYS[1] pre  KEYS[2] draw  KEYS[3] seq  KEYS[4] config  KEYS[5] lock
-- KEYS[6] groups (the pre-queue's counts per address group; gone at sealing)
-- KEYS[7] waiting (counted at sealing: the visitors ahead of the draw)
-- KEYS[8] members  KEYS[9] draw_members (the identities of address groups
--   with more than one, whose seats are dealt among them after the seal)
-- KEYS[10] moved  KEYS[11] draw_moved (the round-1 seats that may be dealt)
-- KEYS[12] draw_commit (the next draw's secret seed and its commitment)
-- ARGV[1] lease owner id  ARGV[2] a fresh random seed (hex), kept only if
--   the draw has none yet: a holder that takes over mid-draw carries on
--   with the same permutation; '' keeps a sealed draw without one until
--   the holder reveals the committed seed (draw_reveal)
-- ARGV[3] a fresh secret seed, ARGV[4] a fresh salt key, ARGV[5] the
--   seed's SHA-256 (all hex; '' for none): kept as the next draw's
--   commitment when none is pending and an opening is scheduled, or a
--   pre-queue or an unseeded draw has none (docs/drop-day.md, *A draw
--   anyone can verify*). The beacon round named with the opening
--   (CF_DRAW_BEACON) goes with the commitment, and follows a rescheduled
--   opening's while the commitment is pending and the opening ahead.
-- Reply: {'not_owner'} · {'idle', pre-queued, committed} · {'drawing',
--   base, end, done, seed, rounds, shuffle, number, committed}: the draw places the visitors of `draw`, by rank,
--   on the tickets base + 1 .. end; `done` are placed. `rounds` are the
--   sizes of the draw's rounds in rank order ('1,3,…'; '' for a draw
--   sealed without them: one round): each round is drawn on its own
--   tickets, the first round's before the second's. `shuffle`:
--   DS_PENDING while the seats of its address groups with more than one
--   identity are to be dealt (draw_shuffle, before anyone is placed),
--   DS_DEALT once they are, '' for a draw that had none; then the draw's
--   number. `seed` is '' while a sealed draw waits for its reveal.
--   `committed`: 1 when this call kept ARGV[3..5] as the commitment.
if redis.call('GET', KEYS[5]) ~= ARGV[1] then return {R.NOT_OWNER} end
local cfg = read_config(KEYS[4], CF_DRAW_DONE, CF_DRAW_SEED, CF_DRAW_ROUNDS, CF_DRAW_SHUFFLE,
  CF_DRAW_BEACON)
local now = now_ms()
local left = drawing_left(cfg)
local committed = 0
if (ARGV[5] or '') ~= '' and redis.call('HGET', KEYS[12], DC_STATE) ~= DC_PENDING
  and (before_opening(cfg, now) or redis.call('EXISTS', KEYS[1]) == 1
    or (left > 0 and (cfg[CF_DRAW_SEED] or '') == '')) then
  redis.call('DEL', KEYS[12])
  redis.call('HSET', KEYS[12], DC_STATE, DC_PENDING, DC_SEED, ARGV[3], DC_SALT_KEY, ARGV[4],
    DC_COMMITMENT, ARGV[5], DC_COMMITTED_AT, now, DC_OPENS_AT, cfg[CF_OPENS_AT] or '')
  if (cfg[CF_DRAW_BEACON] or '') ~= '' then redis.call('HSET', KEYS[12], DC_BEACON, cfg[CF_DRAW_BEACON]) end
  committed = 1
elseif before_opening(cfg, now) and redis.call('HGET', KEYS[12], DC_STATE) == DC_PENDING
  and (redis.call('HGET', KEYS[12], DC_BEACON) or '') ~= (cfg[CF_DRAW_BEACON] or '') then
  if (cfg[CF_DRAW_BEACON] or '') == '' then redis.call('HDEL', KEYS[12], DC_BEACON)
  else redis.call('HSET', KEYS[12], DC_BEACON, cfg[CF_DRAW_BEACON]) end
end
if left == 0 then
  if before_opening(cfg, now) or redis.call('EXISTS', KEYS[1]) == 0 then
    return {R.IDLE, redis.call('ZCARD', KEYS[1]), committed}
  end
  left = seal(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10],
    KEYS[11])
  if left == 0 then return {R.IDLE, 0, committed} end
  cfg = read_config(KEYS[4], CF_DRAW_DONE, CF_DRAW_SEED, CF_DRAW_ROUNDS, CF_DRAW_SHUFFLE)
end
local seed = cfg[CF_DRAW_SEED] or ''
if seed == '' and ARGV[2] ~= '' then
  seed = ARGV[2]
  redis.call('HSET', KEYS[4], CF_DRAW_SEED, seed)
end
return {R.DRAWING, cfg[CF_DRAW_BASE], cfg[CF_DRAW_END], cfg[CF_DRAW_DONE], seed, cfg[CF_DRAW_ROUNDS] or '',
  cfg[CF_DRAW_SHUFFLE] or '', redis.call('HGET', KEYS[4], CF_DRAW_NUMBER) or '0', committed}
