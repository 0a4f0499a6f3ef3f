-- Take one slot of a host budget and a start time, on Redis's clock.
-- KEYS[1] slots (sorted set: token -> lease end, µs); KEYS[2] state (hash).
-- ARGV: token, concurrency, interval µs, jitter µs, lease µs, longest wait µs, source,
-- and how many slots the caller wants (more than one only for a budget without a pace:
-- the slots granted beyond the first are TOKEN.2, TOKEN.3 …).
-- Returns {n, wait µs, '', ''} when n slots are granted (start after wait), else
-- {0, wait µs, why, reason}: why is pause (until), slots (the first lease ends) or
-- turn (the next start is later than the caller can wait).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local st = KEYS[2]
-- The state is read once: the pause and its reason, the pace's next start, the rate.
local state = redis.call('HMGET', st, 'paused', 'reason', 'tat', 'rate', 'rate_at')
local paused = tonumber(state[1] or '0')
if paused > now then
  return {0, paused - now, 'pause', state[2] or ''}
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local conc = tonumber(ARGV[2])
local busy = redis.call('ZCARD', KEYS[1])
if busy >= conc then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, tonumber(first[2]) - now, 'slots', ''}
end
local interval = tonumber(ARGV[3])
local start = now
local fields = {}
if interval > 0 then
  local tat = tonumber(state[3] or '0')
  if tat > start then start = tat end
  if start - now > tonumber(ARGV[6]) then
    return {0, start - now, 'turn', ''}
  end
  fields = {'tat', string.format('%.0f', start + interval + tonumber(ARGV[4]))}
end
local lease = tonumber(ARGV[5])
local n = math.min(tonumber(ARGV[8] or '1'), conc - busy)
if interval > 0 then n = 1 end
local score = string.format('%.0f', start + lease)
local members = {score, ARGV[1]}
for i = 2, n do
  members[#members + 1] = score
  members[#members + 1] = ARGV[1] .. '.' .. i
end
redis.call('ZADD', KEYS[1], unpack(members))
redis.call('PEXPIRE', KEYS[1], math.floor((start - now + lease) / 1000) + 1000)
-- The rate: starts decaying with a 10 s time constant, in requests a second.
local rate = tonumber(state[4] or '0')
local at = tonumber(state[5] or tostring(now))
rate = rate * math.exp(-(now - at) / 10000000) + 0.1
for _, v in ipairs({'rate', tostring(rate), 'rate_at', string.format('%.0f', now), 'conc', ARGV[2], 'ival', ARGV[3], 'src', ARGV[7]}) do
  fields[#fields + 1] = v
end
redis.call('HSET', st, unpack(fields))
redis.call('PEXPIRE', st, 86400000)
return {n, start - now, '', ''}
