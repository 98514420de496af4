-- draw_reveal: a sealed draw's public record, then its seed
-- (docs/drop-day.md, *A draw anyone can verify*). The lease holder reads
-- the sealed pre-queue, writes its leaves page by page, and last the
-- record's header (with the Merkle root and the committed seed) and the
-- draw's key as `draw_seed` in one call: the registrants are fixed in the
-- record before the seed that draws them is known to anyone but the
-- holder. A holder that takes over writes the same pages again (they
-- depend only on `draw` and the salt key).
-- KEYS[1] config  KEYS[2] lock  KEYS[3] draw_commit  KEYS[4] draw_record:<n>
-- ARGV[1] lease owner id  ARGV[2] the draw's number n  ARGV[3] the
--   commitment the record opens (hex)  ARGV[4] 'page' or 'reveal'
-- page: ARGV[5] the page's number k  ARGV[6] its leaves (hex)
-- reveal: ARGV[5] the header (JSON)  ARGV[6] the pages' roots (hex)
--   ARGV[7] the draw's key (hex): the permutation's seed from now on
-- Reply: {'not_owner'} · {'moved', 0} (draw n is not the running draw
--   waiting for its seed, or the commitment is not the pending one:
--   nothing written) · {'ok', 0}
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return {R.NOT_OWNER} end
local d = read_fields(KEYS[1], CF_DRAW_NUMBER, CF_DRAW_SEED, CF_DRAW_LEFT)
if (d[CF_DRAW_NUMBER] or '') ~= ARGV[2] or (d[CF_DRAW_SEED] or '') ~= ''
  or tonumber(d[CF_DRAW_LEFT] or '0') == 0 then
  return {R.MOVED, 0}
end
local c = read_fields(KEYS[3], DC_STATE, DC_COMMITMENT, DC_SALT_KEY)
if c[DC_STATE] ~= DC_PENDING or c[DC_COMMITMENT] ~= ARGV[3] then return {R.MOVED, 0} end
if ARGV[4] == 'page' then
  redis.call('HSET', KEYS[4], DC_PAGE .. ARGV[5], ARGV[6])
  return {R.OK, 0}
end
redis.call('HSET', KEYS[4], DC_HEADER, ARGV[5], DC_TOP, ARGV[6], DC_SALT_KEY, c[DC_SALT_KEY])
redis.call('HSET', KEYS[1], CF_DRAW_SEED, ARGV[7])
redis.call('HSET', KEYS[3], DC_STATE, DC_REVEALED, DC_DRAW, ARGV[2])
return {R.OK, 0}
