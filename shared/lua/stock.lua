-- stock: the operator sets, adds to, refunds, clears or reads a queue's
-- stock (docs/drop-day.md, *Stock*), atomically with the orders that hold
-- and sell its units.
-- KEYS[1] config  KEYS[2] stats  KEYS[3] stock_held
-- ARGV[1] 'set' (ARGV[2] units left for sale from now; orders in flight
--   keep the units they hold) · 'add' (ARGV[2] units added, or taken away
--   when negative) · 'refund' (ARGV[2] units of refunded orders: back on
--   sale and off the sold count) · 'clear' (no stock kept any more) ·
--   'overbook' (ARGV[2] the margin in percent, '' measured) · 'show'
-- ARGV[2] a count, already checked by the caller (shared/src/ops/stock.rs)
-- Reply: {'ok', left ('' no stock), sold, held, overbook ('' measured),
--   margin per mille, conversion per mille (''), units per order per mille
--   (''), turns out} after the change · {'unknown'} ('add', 'refund' or
--   'overbook' without a stock kept: set one first) · {'invalid', left or
--   sold} (the change would take the units left or the sold count below 0)
--   · nothing changed on a refusal.
local op, n = ARGV[1], tonumber(ARGV[2] or '')
local f = read_fields(KEYS[1], STOCK.LEFT, STOCK.SOLD)
local left, sold = tonumber(f[STOCK.LEFT] or ''), tonumber(f[STOCK.SOLD] or '0')
if op == 'set' then
  if not left then
    -- A new stock: this drop's conversion counts from here.
    local s = read_fields(KEYS[2], SF_ORDERED, SF_EXPIRED)
    redis.call('HSET', KEYS[1], STOCK.SOLD, 0, STOCK.BASE,
      (s[SF_ORDERED] or '0') .. SEP .. (s[SF_EXPIRED] or '0'))
  end
  redis.call('HSET', KEYS[1], STOCK.LEFT, n)
elseif op == 'add' or op == 'refund' or op == 'overbook' then
  if not left then return {R.UNKNOWN} end
  if op == 'overbook' then
    if ARGV[2] == '' then
      redis.call('HDEL', KEYS[1], STOCK.OVERBOOK)
    else
      redis.call('HSET', KEYS[1], STOCK.OVERBOOK, n)
    end
  else
    if left + n < 0 then return {R.INVALID, left} end
    if op == 'refund' then
      if sold - n < 0 then return {R.INVALID, sold} end
      redis.call('HINCRBY', KEYS[1], STOCK.SOLD, -n)
    end
    redis.call('HINCRBY', KEYS[1], STOCK.LEFT, n)
  end
elseif op == 'clear' then
  redis.call('HDEL', KEYS[1], STOCK.LEFT, STOCK.SOLD, STOCK.OVERBOOK, STOCK.BASE, STOCK.MARGIN,
    STOCK.CONV, STOCK.PER_ORDER, STOCK.OUT)
elseif op ~= 'show' then
  return redis.error_reply('stock: unknown operation')
end
local now = read_fields(KEYS[1], STOCK.LEFT, STOCK.SOLD, STOCK.OVERBOOK, STOCK.MARGIN, STOCK.CONV,
  STOCK.PER_ORDER, STOCK.OUT)
return {R.OK, now[STOCK.LEFT] or '', now[STOCK.SOLD] or '0', redis.call('HLEN', KEYS[3]),
  now[STOCK.OVERBOOK] or '', now[STOCK.MARGIN] or '0', now[STOCK.CONV] or '',
  now[STOCK.PER_ORDER] or '', now[STOCK.OUT] or '0'}
