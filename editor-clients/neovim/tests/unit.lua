-- Headless unit checks of the clio plugin that need no server: every :Clio* command
-- is defined by setup{}, events render as the turn buffer shows them, and empty
-- argument tables go out as JSON objects. Run by tests/editors/test_neovim_e2e.py.

local log_path = os.getenv("CLIO_TEST_LOG")
local function log(msg)
  if log_path then
    local f = io.open(log_path, "a")
    f:write(msg .. "\n")
    f:close()
  end
end

local function eq(a, b, what)
  if not vim.deep_equal(a, b) then
    error(what .. ": expected " .. vim.inspect(b) .. ", got " .. vim.inspect(a), 0)
  end
end

local function run()
  local clio = require("clio")
  local format = require("clio.format")
  clio.setup({ autostart = false })
  for _, name in ipairs({
    "ClioPrompt", "ClioCancel", "ClioNew", "ClioLoad", "ClioMemory",
    "ClioApprove", "ClioReject", "ClioHandoff", "ClioSeed", "ClioUsage",
  }) do
    eq(vim.fn.exists(":" .. name), 2, name .. " defined")
  end
  eq(clio.client(), nil, "autostart=false starts no server")

  local ev = format.event_of({ type = "message_chunk", sessionId = "s1", messageId = "m", text = "Hi\nthere" })
  eq(ev.type, "message_chunk", "bare camelCase event")
  eq({ format.event_text(ev) }, { "Hi\nthere", true }, "chunks continue the line")
  eq({ format.event_text({ type = "tool_call_finished", toolCallId = "t1", status = "failed", exitCode = 1 }) },
    { "✗ t1 (exit 1)", false }, "failed tool call")
  eq(format.event_text({ type = "thought_chunk", text = "hmm" }), nil, "thoughts are hidden")
  eq({ format.event_text({ type = "turn_ended", stopReason = "cancelled" }) }, { "── turn ended: cancelled", false },
    "turn end")
  eq(format.board_status({ tier = "llm", lastDecision = "injected" }), "clio: llm · injected", "status line")
  eq(format.field({ stop_reason = "x" }, "stop_reason"), "x", "snake_case read")
  eq(format.field({ stopReason = "y" }, "stop_reason"), "y", "camelCase read")

  eq(vim.fn.json_encode(clio._object({})), "{}", "empty args are a JSON object")
  eq(vim.fn.json_encode({ clio._object() }), "[{}]", "argument list with an empty object")

  -- The turn buffer streams chunks onto one line and starts new lines for events.
  clio.append("> hello", false)
  clio.append("Hel", true)
  clio.append("lo\nworld", true)
  clio.append("── turn ended: end_turn", false)
  eq(vim.api.nvim_buf_get_lines(clio.turn_buffer(), 0, -1, false),
    { "> hello", "Hello", "world", "── turn ended: end_turn" }, "turn buffer lines")
  eq(vim.api.nvim_buf_get_name(clio.turn_buffer()):match("clio://turn$") ~= nil, true, "turn buffer name")
end

local ok, err = pcall(run)
if ok then
  log("PASS")
  vim.cmd("qall!")
else
  log("FAIL: " .. tostring(err))
  vim.cmd("cquit 1")
end
