-- tollgate GCRA refund v2 (DESIGN §11): with calendar quotas
-- ARGV per key, 8 numbers: per tier (short, long) c T and the tat written, as s and ns; for a
-- quota's key: the cost, 0, the end of the window it was counted in (s), then five zeros.
local B = 1000000000
local sub, tonumber = string.sub, tonumber
local t = redis.call('TIME')
local now_s, now_n = tonumber(t[1]), tonumber(t[2]) * 1000
for g = 1, #KEYS do
  local v = redis.call('GET', KEYS[g])
  local b = (g - 1) * 8
  if v and sub(v, 1, 1) == 'q' then
    -- A quota's count gives the cost back while the key still holds that window.
    local sp = string.find(v, ' ', 2, true)
    local e, n = tonumber(sub(v, 2, (sp or 2) - 1)), tonumber(sub(v, (sp or #v) + 1))
    local c, we = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 3])
    if e and n and e == we and c > 0 then
      n = n - c
      if n < 0 then n = 0 end
      redis.call('SET', KEYS[g], string.format('q%d %d', e, n), 'KEEPTTL')
    end
  elseif v and #v == 41 then
    local st = {tonumber(sub(v, 1, 11)) or 0, tonumber(sub(v, 12, 20)) or 0,
                tonumber(sub(v, 22, 32)) or 0, tonumber(sub(v, 33, 41)) or 0}
    for tier = 0, 1 do
      local x = b + tier * 4
      local es, en = tonumber(ARGV[x + 1]), tonumber(ARGV[x + 2])
      local ws, wn = tonumber(ARGV[x + 3]), tonumber(ARGV[x + 4])
      -- r = min(c T, max(0, tat_written - now))
      local rs, rn = ws - now_s, wn - now_n
      if rn < 0 then rs, rn = rs - 1, rn + B end
      if rs < 0 then rs, rn = 0, 0 end
      if rs > es or (rs == es and rn > en) then rs, rn = es, en end
      local ts, tn = st[2 * tier + 1] - rs, st[2 * tier + 2] - rn
      if tn < 0 then ts, tn = ts - 1, tn + B end
      if ts < 0 then ts, tn = 0, 0 end
      st[2 * tier + 1], st[2 * tier + 2] = ts, tn
    end
    local xs, xn = st[1], st[2]
    if st[3] > xs or (st[3] == xs and st[4] > xn) then xs, xn = st[3], st[4] end
    if xs < now_s or (xs == now_s and xn <= now_n) then
      redis.call('DEL', KEYS[g])
    else
      redis.call('SET', KEYS[g], string.format('%011d%09d %011d%09d', st[1], st[2], st[3], st[4]),
                 'PXAT', xs * 1000 + math.ceil(xn / 1000000))
    end
  end
end
return 1
