-- lease_release: drop the lease if (and only if) we own it.
-- KEYS[1] lock
-- ARGV[1] owner id
-- Reply: 1 released · 0 not ours: nothing changed.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
