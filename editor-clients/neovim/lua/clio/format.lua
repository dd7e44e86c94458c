-- clio.format: turns `clio/sessionUpdate` payloads into text for the turn buffer.
--
-- Owns the mapping from one session event (the server's event stream, see
-- docs/editors/lsp.md) to a piece of text; it must not touch buffers or the
-- client. Field names are read in both camelCase and snake_case so a server
-- that serialises either way is shown the same.

local M = {}

--- Read field `name` (snake_case) or its camelCase twin from table `t`.
function M.field(t, name)
  if type(t) ~= "table" then
    return nil
  end
  local v = t[name]
  if v ~= nil and v ~= vim.NIL then
    return v
  end
  local camel = name:gsub("_(%l)", function(c)
    return c:upper()
  end)
  v = t[camel]
  if v == vim.NIL then
    return nil
  end
  return v
end

--- The event table inside a `clio/sessionUpdate` params table, and its session id.
--- Accepts `{sessionId, event}`, `{sessionId, update}` or a bare event.
function M.event_of(params)
  if type(params) ~= "table" then
    return nil, nil
  end
  local ev = M.field(params, "event") or M.field(params, "update") or params
  local sid = M.field(params, "session_id") or M.field(ev, "session_id")
  return ev, sid
end

local function one_line(s)
  s = tostring(s or "")
  return (s:gsub("%s*\n%s*", " "))
end

--- Text to append for one event, and whether it continues the current line
--- (streamed chunks) rather than starting a new one. Returns nil for events
--- the turn buffer does not show.
function M.event_text(ev)
  local kind = M.field(ev, "type") or M.field(ev, "kind") or M.field(ev, "session_update")
  if kind == "message_chunk" or kind == "agent_message_chunk" then
    return M.field(ev, "text") or "", true
  elseif kind == "thought_chunk" or kind == "agent_thought_chunk" then
    return nil
  elseif kind == "user_message" then
    return "> " .. one_line(M.field(ev, "text")), false
  elseif kind == "tool_call_started" then
    return "▸ " .. one_line(M.field(ev, "title") or M.field(ev, "tool_name") or "tool"), false
  elseif kind == "tool_call_finished" then
    local status = M.field(ev, "status")
    local code = M.field(ev, "exit_code")
    local mark = status == "failed" and "✗" or "✓"
    local s = mark .. " " .. (M.field(ev, "tool_call_id") or "")
    if code ~= nil then
      s = s .. " (exit " .. tostring(code) .. ")"
    end
    return s, false
  elseif kind == "memory_reminder" then
    return one_line(M.field(ev, "text")), false
  elseif kind == "memory_proposal" then
    return "Memory proposal " .. tostring(M.field(ev, "record_id")) .. ": " .. one_line(M.field(ev, "content")), false
  elseif kind == "memory_cleared" then
    return "Memory: bank cleared", false
  elseif kind == "handoff_offer" then
    return "Handoff available: " .. tostring(M.field(ev, "source")) .. " (" .. tostring(M.field(ev, "count")) .. " entries) — :ClioSeed", false
  elseif kind == "notice" then
    return "[" .. tostring(M.field(ev, "level") or "info") .. "] " .. one_line(M.field(ev, "text")), false
  elseif kind == "plan" then
    local lines = {}
    for _, e in ipairs(M.field(ev, "entries") or {}) do
      table.insert(lines, "  - [" .. tostring(M.field(e, "status")) .. "] " .. one_line(M.field(e, "content")))
    end
    return "Plan:\n" .. table.concat(lines, "\n"), false
  elseif kind == "turn_ended" then
    return "── turn ended: " .. tostring(M.field(ev, "stop_reason")), false
  end
  return nil
end

--- One status-line string from `clio/status` params:
--- "clio: <tier> · <last decision> · working · 2 proposals".
function M.status_line(status)
  if type(status) ~= "table" then
    return "clio"
  end
  local parts = { "clio: " .. tostring(M.field(status, "tier") or "no session") }
  local last = M.field(status, "last_decision")
  if last and last ~= vim.NIL then
    table.insert(parts, tostring(last))
  end
  if M.field(status, "state") == "working" then
    table.insert(parts, "working")
  end
  local pending = tonumber(M.field(status, "pending_proposals") or 0) or 0
  if pending > 0 then
    table.insert(parts, pending .. (pending == 1 and " proposal" or " proposals"))
  end
  return table.concat(parts, " · ")
end

--- One status-line string from a memory board (`clio.memory.show` result).
function M.board_status(board)
  if type(board) ~= "table" then
    return "clio"
  end
  local tier = M.field(board, "tier") or "?"
  local last = M.field(board, "last_decision")
  if type(last) == "table" then
    last = M.field(last, "decision") or M.field(last, "name")
  end
  return "clio: " .. tostring(tier) .. (last and (" · " .. tostring(last)) or "")
end

return M
