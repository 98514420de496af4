-- lease_renew: extend the lease only while we still own it.
-- KEYS[1] lock
-- ARGV[1] owner id  ARGV[2] ttl ms
-- Reply: 1 renewed · 0 not ours (lost or expired): stop admitting.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
