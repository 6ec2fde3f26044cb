-- What a render's Lua learns of processes in the gate's container: the
-- container's pid 1 (the gate itself, `rendergate`) must not be readable,
-- nor any /proc entry of a process outside the check. HAProxy's own pid
-- is in every [ALERT] line HAProxy prints: 2 in a PID namespace of the check's.
local function comm(pid)
  local f = io.open("/proc/" .. pid .. "/comm")
  if not f then return nil end
  local name = f:read("l") f:close()
  return name
end
local seen = {}
for pid = 1, 64 do
  local name = comm(pid)
  -- the check's own: HAProxy, its init and the keeper (docs/checking.md)
  if name and name ~= "haproxy" and name ~= "rendergate-init" and name ~= "rendergate-keep" then
    seen[#seen + 1] = pid .. ":" .. name
  end
end
error("outside=[" .. table.concat(seen, ",") .. "]")
