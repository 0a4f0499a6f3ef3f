-- Pause a host budget for every worker; a later pause extends, never shortens.
-- KEYS[1] state. ARGV: pause µs, reason, state TTL ms. Returns the end, µs.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local untilAt = now + tonumber(ARGV[1])
local cur = tonumber(redis.call('HGET', KEYS[1], 'paused') or '0')
if untilAt > cur then
  redis.call('HSET', KEYS[1], 'paused', string.format('%.0f', untilAt), 'reason', ARGV[2])
end
redis.call('HSET', KEYS[1], 'busy_at', string.format('%.0f', now), 'busy', ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return string.format('%.0f', untilAt)
