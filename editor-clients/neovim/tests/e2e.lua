-- Headless end-to-end test of the clio Neovim plugin against `clio-acp lsp`.
--
-- Run by tests/editors/test_neovim_e2e.py on every Neovim it finds (0.7.2 and
-- 0.11): prompt → the turn streams into clio://turn → clio/status says idle
-- → :ClioMemory shows the board → a clio-memory diagnostic appears → its
-- "Approve memory" quick fix approves the proposal → the diagnostic clears → a
-- handoff is written and the session reloaded (with CLIO_TEST_EXPECT_OFFER=1,
-- the resume offer is answered "Seed").
--
-- Inputs (environment): CLIO_TEST_CMD (JSON list: the server command),
-- CLIO_TEST_WORKSPACE (folder with main.py), CLIO_TEST_PROMPT,
-- CLIO_TEST_EXPECT_TEXT (text the turn must stream), CLIO_TEST_LOG (a file this
-- script writes its step log to). Exit code 0 on success, 1 on failure.

local log_path = os.getenv("CLIO_TEST_LOG")
local log_lines = {}
local function log(msg)
  table.insert(log_lines, msg)
  if log_path then
    local f = io.open(log_path, "a")
    if f then
      f:write(msg .. "\n")
      f:close()
    end
  end
end

local TIMEOUT = tonumber(os.getenv("CLIO_TEST_TIMEOUT_MS") or "30000")

local failure = nil -- set by callbacks, which run outside run()'s pcall

local function wait_for(what, cond)
  local ok = vim.wait(TIMEOUT, function()
    return failure ~= nil or cond()
  end, 20)
  if failure then
    error(failure, 0)
  end
  if not ok then
    error("timed out waiting for " .. what, 0)
  end
  log("ok: " .. what)
end

local function json_decode(s)
  if vim.json and vim.json.decode then
    return vim.json.decode(s)
  end
  return vim.fn.json_decode(s)
end

local function memory_diagnostics()
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(nil)) do
    if d.source == "clio-memory" then
      table.insert(out, d)
    end
  end
  return out
end

local function run()
  local clio = require("clio")
  local workspace = assert(os.getenv("CLIO_TEST_WORKSPACE"), "CLIO_TEST_WORKSPACE unset")
  local cmd = json_decode(assert(os.getenv("CLIO_TEST_CMD"), "CLIO_TEST_CMD unset"))
  local expect_text = os.getenv("CLIO_TEST_EXPECT_TEXT") or ""
  log("nvim " .. tostring(vim.version().major) .. "." .. tostring(vim.version().minor) .. "." .. tostring(vim.version().patch))

  local offered = {}
  clio.setup({
    cmd = cmd,
    init_options = { permissionMode = "bypass" },
    root_dir = workspace,
    resume_offer = function(message, titles)
      table.insert(offered, { message = message, titles = titles })
      return "Seed"
    end,
  })
  vim.cmd("edit " .. vim.fn.fnameescape(workspace .. "/main.py"))
  wait_for("client initialized", function()
    return clio.state.ready == true
  end)
  wait_for("main.py attached", function()
    return vim.lsp.buf_is_attached(0, clio.state.client_id)
  end)

  -- 1. prompt: the turn streams into the scratch buffer and ends.
  local done, stop, perr = false, nil, nil
  clio.prompt(os.getenv("CLIO_TEST_PROMPT") or "hello", function(err, reason)
    done, stop, perr = true, reason, err
  end)
  wait_for("turn ended", function()
    return done
  end)
  if perr then
    error("clio.prompt failed: " .. vim.inspect(perr), 0)
  end
  log("stop reason: " .. tostring(stop))
  local turn = table.concat(vim.api.nvim_buf_get_lines(clio.turn_buffer(), 0, -1, false), "\n")
  if expect_text ~= "" and not turn:find(expect_text, 1, true) then
    error("turn buffer lacks " .. vim.inspect(expect_text) .. ":\n" .. turn, 0)
  end
  log("ok: turn streamed into " .. clio.TURN_BUFFER)

  -- 2. clio/status arrives (working, then idle): the plugin never polls.
  wait_for("clio/status idle after the turn", function()
    local s = clio.state.server_status
    return clio.state.statuses >= 2 and type(s) == "table" and s.state == "idle" and s.sessionId == clio.state.session_id
  end)
  log("status: " .. clio.statusline())
  if not clio.statusline():find("^clio: ") then
    error("statusline is not built from clio/status: " .. clio.statusline(), 0)
  end

  -- 3. :ClioMemory shows the board (not nil).
  vim.cmd("ClioMemory")
  wait_for(":ClioMemory shows the board", function()
    local buf = vim.fn.bufnr(clio.MEMORY_BUFFER)
    if buf < 0 then
      return false
    end
    local text = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
    return text:find("# Clio memory", 1, true) ~= nil and text:find("board", 1, true) ~= nil
      and text:find(tostring(clio.state.session_id), 1, true) ~= nil
  end)

  -- 4. a memory diagnostic with a proposal id appears (the memory step runs
  -- detached after the turn; its proposal is published without any polling).
  local proposal
  wait_for("clio-memory diagnostic with a proposal id", function()
    for _, item in ipairs(clio._proposal_diagnostics()) do
      proposal = item
    end
    return proposal ~= nil and #memory_diagnostics() > 0
  end)
  local pid = require("clio.format").field(proposal.diagnostic.data, "proposal_id")
  log("diagnostic: " .. proposal.diagnostic.message:gsub("\n", " ") .. " (proposal " .. tostring(pid) .. ")")

  -- 3. the quick fix approves it; 4. the diagnostic clears.
  -- Show the file the proposal sits on (without reloading it) and check Neovim
  -- shows the diagnostic there.
  local target = vim.uri_to_bufnr(proposal.uri)
  if vim.api.nvim_get_current_buf() ~= target then
    vim.fn.bufload(target)
    vim.api.nvim_set_current_buf(target)
  end
  local function shown_here()
    for _, d in ipairs(vim.diagnostic.get(target)) do
      local data = d.user_data and d.user_data.lsp and d.user_data.lsp.data or d.data
      if d.source == "clio-memory" and type(data) == "table" and require("clio.format").field(data, "proposal_id") == pid then
        return true
      end
    end
    return false
  end
  wait_for("the proposal's diagnostic shown in its buffer", shown_here)
  local approved, aerr = false, nil
  clio.approve(nil, function(err)
    approved, aerr = true, err
  end)
  wait_for("approve command answered", function()
    return approved
  end)
  if aerr then
    error("approve failed: " .. vim.inspect(aerr), 0)
  end
  wait_for("proposal diagnostic cleared", function()
    if shown_here() then
      return false
    end
    for _, item in ipairs(clio._proposal_diagnostics()) do
      if require("clio.format").field(item.diagnostic.data, "proposal_id") == pid then
        return false
      end
    end
    return true
  end)

  -- 5. handoff, reload the session, answer the resume offer.
  local handed = false
  clio.handoff(function(err)
    if err then
      failure = "handoff failed: " .. vim.inspect(err)
    end
    handed = true
  end)
  wait_for("handoff written", function()
    return handed
  end)
  local sid = clio.state.session_id
  if not sid then
    error("no session id known after the turn", 0)
  end
  local loaded = false
  clio.load(sid, function(err)
    if err then
      failure = "load failed: " .. vim.inspect(err)
    end
    loaded = true
  end)
  wait_for("session loaded", function()
    return loaded
  end)
  -- The offer comes only when seeding would add something (the reloaded session's
  -- bank may already hold the handoff's entries); check it when the caller expects it.
  if os.getenv("CLIO_TEST_EXPECT_OFFER") ~= "1" then
    clio.stop()
    return
  end
  wait_for("resume offer answered Seed", function()
    return #offered > 0 and clio.state.offers[#clio.state.offers].answer == "Seed"
  end)
  log("offer: " .. tostring(offered[1].message) .. " [" .. table.concat(offered[1].titles, "/") .. "]")
  local seeded = os.getenv("CLIO_TEST_EXPECT_SEEDED")
  if seeded and seeded ~= "" then
    wait_for("the server reports the seed", function()
      for _, m in ipairs(clio.state.messages) do
        if m:find(seeded, 1, true) then
          log("seed: " .. m)
          return true
        end
      end
      return false
    end)
  end
  clio.stop()
end

local ok, err = pcall(run)
if ok then
  log("PASS")
  vim.cmd("qall!")
else
  log("FAIL: " .. tostring(err))
  log("turn buffer:\n" .. table.concat(vim.api.nvim_buf_get_lines(require("clio").turn_buffer(), 0, -1, false), "\n"))
  vim.cmd("cquit 1")
end
