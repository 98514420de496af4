-- draw_open: the lease holder's view of the pre-queue, each tick. Seals a
-- pre-queue whose opening has passed (if no entry did it first) and gives
-- a running draw its seed, once.
-- KEYS[1] pre  KEYS[2] draw  KEYS[3] seq  KEYS[4] config  KEYS[5] lock
-- KEYS[6] groups (the pre-queue's counts per address group; gone at sealing)
-- KEYS[7] waiting (counted at sealing: the visitors ahead of the draw)
-- ARGV[1] lease owner id  ARGV[2] a fresh random seed (hex), kept only if
--   the draw has none yet: a holder that takes over mid-draw carries on
--   with the same permutation
-- Reply: {'not_owner'} · {'idle', pre-queued} · {'drawing', base, end,
--   done, seed, rounds}: the draw places the visitors of `draw`, by rank,
--   on the tickets base + 1 .. end; `done` are placed. `rounds` are the
--   sizes of the draw's rounds in rank order ('1,3,…'; '' for a draw
--   sealed without them: one round): each round is drawn on its own
--   tickets, the first round's before the second's.
if redis.call('GET', KEYS[5]) ~= ARGV[1] then return {R.NOT_OWNER} end
local cfg = read_config(KEYS[4], CF_DRAW_DONE, CF_DRAW_SEED, CF_DRAW_ROUNDS)
local now = now_ms()
local left = drawing_left(cfg)
if left == 0 then
  if before_opening(cfg, now) or redis.call('EXISTS', KEYS[1]) == 0 then
    return {R.IDLE, redis.call('ZCARD', KEYS[1])}
  end
  left = seal(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6], KEYS[7])
  if left == 0 then return {R.IDLE, 0} end
  cfg = read_config(KEYS[4], CF_DRAW_DONE, CF_DRAW_SEED, CF_DRAW_ROUNDS)
end
local seed = cfg[CF_DRAW_SEED]
if not seed or seed == '' then
  seed = ARGV[2]
  redis.call('HSET', KEYS[4], CF_DRAW_SEED, seed)
end
return {R.DRAWING, cfg[CF_DRAW_BASE], cfg[CF_DRAW_END], cfg[CF_DRAW_DONE], seed, cfg[CF_DRAW_ROUNDS] or ''}
