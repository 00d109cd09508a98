-- tollgate GCRA v4 (DESIGN §3, §11)
-- A batch of requests, each decided all-or-nothing, in order, as if one after the other.
-- ARGV: now ("" = Redis TIME), the limits (count, then per limit: shadow, T and burst of the
-- short and the long tier), the requests (count, then per request: cost, groups, and per
-- group: its key's index in KEYS and its limit's index).
-- Reply: Redis's now (s, ns), then per request its verdict (0 rejected, 1 admitted, 2
-- admitted but a shadowed limit rejected) and per configured tier of each group tat - now in
-- ns, negative (-d - 1) when the tier rejected; past 2^53 ns as "allowed:s:ns".
local B = 1000000000
local sub, tonumber, floor = string.sub, tonumber, math.floor
local argv, keys = ARGV, KEYS
local now_s, now_n
if argv[1] == '' then
  local t = redis.call('TIME')
  now_s, now_n = tonumber(t[1]), tonumber(t[2]) * 1000
else
  now_s, now_n = tonumber(sub(argv[1], 1, -10)) or 0, tonumber(sub(argv[1], -9))
end

-- Every key's tats, read once: st[4k-3..4k] = short s, ns, long s, ns.
local st = {}
local vals = redis.call('MGET', unpack(keys))
for k = 1, #keys do
  local v, o = vals[k], 4 * k - 4
  if v and #v == 41 then
    st[o + 1], st[o + 2] = tonumber(sub(v, 1, 11)) or 0, tonumber(sub(v, 12, 20)) or 0
    st[o + 3], st[o + 4] = tonumber(sub(v, 22, 32)) or 0, tonumber(sub(v, 33, 41)) or 0
  else
    st[o + 1], st[o + 2], st[o + 3], st[o + 4] = 0, 0, 0, 0
  end
end

-- Per limit l and tier t, at L[12 (2l - 2 + t) + 1 ...]: T in s and ns, burst, shadow, and
-- for the last cost seen (now is fixed for the batch): that cost, the cap now + burst T, the
-- limit now + (burst - c) T (a tat at most this admits), and c T.
local L = {}
local nl = tonumber(argv[2])
for l = 1, nl do
  local a = 3 + 5 * (l - 1)
  for t = 0, 1 do
    local x, T = 12 * (2 * l - 2 + t), tonumber(argv[a + 1 + 2 * t])
    local ts = floor(T / B)
    L[x + 1], L[x + 2], L[x + 3], L[x + 4], L[x + 5] = ts, T - ts * B,
      tonumber(argv[a + 2 + 2 * t]), argv[a] == '1', 0
  end
end

local out = {now_s, now_n}
local o = 2
local dirty = {}
local p = {}  -- per group of the request: key, limit's base in L, the tats it would write
local a = 4 + 5 * nl
for r = 1, tonumber(argv[3 + 5 * nl]) do
  local c, groups = tonumber(argv[a]), tonumber(argv[a + 1])
  a = a + 2
  o = o + 1
  local verdict = o
  local ok_e, ok_s = true, true
  for g = 1, groups do
    local k, l = tonumber(argv[a]), tonumber(argv[a + 1])
    a = a + 2
    local base, w = 4 * k - 4, 6 * g - 6
    p[w + 1], p[w + 2] = k, 24 * (l - 1)
    for t = 0, 1 do
      local x = 24 * (l - 1) + 12 * t
      local ts, tn = st[base + 2 * t + 1], st[base + 2 * t + 2]
      p[w + 3 + 2 * t], p[w + 4 + 2 * t] = ts, tn
      local b = L[x + 3]
      if b > 0 then
        if L[x + 5] ~= c then
          local Ts, Tn = L[x + 1], L[x + 2]
          local y = Tn * b
          local q = floor(y / B)
          local s2, n2 = now_s + Ts * b + q, now_n + y - q * B
          if n2 >= B then s2, n2 = s2 + 1, n2 - B end
          L[x + 6], L[x + 7] = s2, n2
          y = Tn * (b - c)
          q = floor(y / B)
          s2, n2 = now_s + Ts * (b - c) + q, now_n + y - q * B
          if n2 >= B then s2, n2 = s2 + 1, n2 - B end
          L[x + 8], L[x + 9] = s2, n2
          y = Tn * c
          q = floor(y / B)
          L[x + 10], L[x + 11], L[x + 5] = Ts * c + q, y - q * B, c
        end
        -- tat = clamp(tat, now, now + burst T)
        if ts < now_s or (ts == now_s and tn < now_n) then ts, tn = now_s, now_n end
        if ts > L[x + 6] or (ts == L[x + 6] and tn > L[x + 7]) then ts, tn = L[x + 6], L[x + 7] end
        local ok = ts < L[x + 8] or (ts == L[x + 8] and tn <= L[x + 9])
        if ok then
          ts, tn = ts + L[x + 10], tn + L[x + 11]
          if tn >= B then ts, tn = ts + 1, tn - B end
          p[w + 3 + 2 * t], p[w + 4 + 2 * t] = ts, tn
        elseif L[x + 4] then
          ok_s = false
        else
          ok_e = false
        end
        ts, tn = ts - now_s, tn - now_n
        if tn < 0 then ts, tn = ts - 1, tn + B end
        o = o + 1
        if ts < 9000000 then
          local d = ts * B + tn
          out[o] = ok and d or -d - 1
        else
          out[o] = (ok and '1:' or '0:') .. string.format('%d:%d', ts, tn)
        end
      end
    end
  end
  if ok_e then
    out[verdict] = ok_s and 1 or 2
    for g = 1, groups do
      local w = 6 * g - 6
      if ok_s or not L[p[w + 2] + 4] then
        local k = p[w + 1]
        local base = 4 * k - 4
        st[base + 1], st[base + 2], st[base + 3], st[base + 4] = p[w + 3], p[w + 4], p[w + 5], p[w + 6]
        dirty[k] = true
      end
    end
  else
    out[verdict] = 0
  end
end

-- Each key written once, expiring when its later tat passes.
for k in pairs(dirty) do
  local base = 4 * k - 4
  local s0, n0, s1, n1 = st[base + 1], st[base + 2], st[base + 3], st[base + 4]
  local xs, xn = s0, n0
  if s1 > xs or (s1 == xs and n1 > xn) then xs, xn = s1, n1 end
  redis.call('SET', keys[k], string.format('%011d%09d %011d%09d', s0, n0, s1, n1),
             'PXAT', xs * 1000 + math.ceil(xn / 1000000))
end
return out
