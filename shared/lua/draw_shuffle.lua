-- draw_shuffle: deals a sealed draw's seats among the identities of each
-- address group that has more than one, before anyone is placed: the
-- lease holder computes the deal from the seed and `draw_members`
-- (shared/src/draw.rs deal) and writes it here in batches of new scores;
-- the last batch ends the dealing. The deal depends on nothing a batch
-- changes, so writing it twice changes nothing: a holder that takes over
-- deals again from the start.
-- KEYS[1] draw  KEYS[2] config  KEYS[3] lock  KEYS[4] draw_members
-- ARGV[1] lease owner id  ARGV[2] the seed the deal was computed from
--   (hex: a deal of another draw writes nothing)
-- ARGV[3] 'last' ends the dealing ('' more batches follow)
-- ARGV[4..] uid, new score pairs (members of `draw` only: XX)
-- Reply: {'not_owner'} · {'moved', done} (no dealing pending under this
--   seed: nothing written) · {'ok', written}
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return {R.NOT_OWNER} end
local d = read_fields(KEYS[2], CF_DRAW_SHUFFLE, CF_DRAW_SEED, CF_DRAW_DONE)
if d[CF_DRAW_SHUFFLE] ~= DS_PENDING or d[CF_DRAW_SEED] ~= ARGV[2] then
  return {R.MOVED, tonumber(d[CF_DRAW_DONE] or '0')}
end
local written = 0
if #ARGV > 3 then
  local args = {KEYS[1], 'XX'}
  for i = 4, #ARGV, 2 do
    args[#args + 1] = ARGV[i + 1]
    args[#args + 1] = ARGV[i]
  end
  redis.call('ZADD', unpack(args))
  written = (#ARGV - 3) / 2
end
if ARGV[3] == 'last' then
  redis.call('HSET', KEYS[2], CF_DRAW_SHUFFLE, DS_DEALT)
  redis.call('UNLINK', KEYS[4])
end
return {R.OK, written}
