-- clio: a thin Neovim client for `clio-acp lsp` (works on Neovim 0.7.2 and 0.11).
--
-- Owns the user-facing part in Neovim: `setup{}`, the `:Clio*` commands, the
-- `clio://turn` scratch buffer that streams a turn, the resume-offer answer and
-- the quick fixes that approve or reject a memory proposal. It holds no agent or
-- memory logic: every action is a `workspace/executeCommand` on the server
-- (commands and payloads are documented in docs/editors/lsp.md). Memory
-- diagnostics are matched by `source`/`data`, never by range, since Neovim 0.7
-- echoes byte columns.

local compat = require("clio.compat")
local format = require("clio.format")

local M = {}

M.SOURCE = "clio-memory" -- diagnostics source the server uses for reminders (issue 8)
M.TURN_BUFFER = "clio://turn"
M.MEMORY_BUFFER = "clio://memory"

local defaults = {
  -- The server command; `python -m clio_acp lsp` works too.
  cmd = { "clio-acp", "lsp" },
  -- Extra environment for the server process (table), or nil.
  cmd_env = nil,
  -- Workspace root; nil means the current directory at start.
  root_dir = nil,
  -- initializationOptions (memory controls, see docs/editors/lsp.md).
  init_options = {},
  -- Sent with workspace/didChangeConfiguration.
  settings = {},
  -- Answer to the resume offer: "ask", "seed", "dismiss", or
  -- function(message, titles) -> title|nil.
  resume_offer = "ask",
  -- Open the turn buffer in a split when a prompt starts.
  open_turn_buffer = true,
  -- Start the server at setup (else on the first :Clio* command).
  autostart = true,
}

M.config = vim.deepcopy(defaults)

M.state = {
  client_id = nil,
  session_id = nil,
  turn_running = false,
  prompt_request = nil, -- id of the in-flight clio.prompt request
  last_stop_reason = nil,
  events = {}, -- every sessionUpdate event of this Neovim, in order
  memory_diagnostics = {}, -- uri -> raw LSP diagnostics with source clio-memory
  offers = {}, -- resume offers seen: { message, actions, answer }
  messages = {}, -- window/showMessage texts, in order
  board = nil,
  status = "clio",
  server_status = nil, -- the last clio/status params (state, tier, lastDecision, pendingProposals)
  statuses = 0, -- clio/status notifications received
}

-- A JSON object (an empty Lua table would be sent as []).
local function object(t)
  if t == nil or next(t) == nil then
    return vim.empty_dict()
  end
  return t
end
M._object = object

local function notify(msg, level)
  vim.schedule(function()
    vim.notify("clio: " .. msg, level or vim.log.levels.INFO)
  end)
end

-- ---------------------------------------------------------------- turn buffer

local function find_buffer(name)
  local nr = vim.fn.bufnr("^" .. name .. "$")
  if nr > 0 and vim.api.nvim_buf_is_valid(nr) then
    return nr
  end
  return nil
end

local function scratch(name)
  local buf = find_buffer(name)
  if buf then
    return buf
  end
  buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(buf, name)
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = "clio"
  return buf
end

--- The turn buffer's number (created on first use).
function M.turn_buffer()
  return scratch(M.TURN_BUFFER)
end

local function show_buffer(buf)
  if vim.fn.bufwinid(buf) ~= -1 then
    return
  end
  local cur = vim.api.nvim_get_current_win()
  vim.cmd("botright split")
  vim.api.nvim_win_set_buf(0, buf)
  vim.api.nvim_set_current_win(cur)
end

local function scroll_to_end(buf)
  local win = vim.fn.bufwinid(buf)
  if win ~= -1 then
    vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(buf), 0 })
  end
end

local line_open = false -- the last line is a streamed message still being written

--- Append `text` to the turn buffer. `inline` text (streamed message chunks)
--- continues the open message line, or starts one; other text starts new lines.
function M.append(text, inline)
  local buf = M.turn_buffer()
  local pieces = vim.split(text, "\n", true)
  local count = vim.api.nvim_buf_line_count(buf)
  local last = vim.api.nvim_buf_get_lines(buf, count - 1, count, false)[1] or ""
  local empty = count == 1 and last == ""
  if inline and line_open then
    pieces[1] = last .. pieces[1]
    vim.api.nvim_buf_set_lines(buf, count - 1, count, false, pieces)
  elseif empty then
    vim.api.nvim_buf_set_lines(buf, 0, 1, false, pieces)
  else
    vim.api.nvim_buf_set_lines(buf, count, count, false, pieces)
  end
  line_open = inline and true or false
  scroll_to_end(buf)
end

local function write_lines(name, lines)
  local buf = scratch(name)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  return buf
end

-- A readable, stable dump of a JSON value (board, usage, session list).
local function dump(value, indent, out)
  indent = indent or ""
  out = out or {}
  if type(value) ~= "table" then
    table.insert(out, indent .. tostring(value))
    return out
  end
  local keys = {}
  for k in pairs(value) do
    table.insert(keys, k)
  end
  table.sort(keys, function(a, b)
    return tostring(a) < tostring(b)
  end)
  for _, k in ipairs(keys) do
    local v = value[k]
    local label = type(k) == "number" and "-" or (tostring(k) .. ":")
    if type(v) == "table" then
      if next(v) == nil then
        table.insert(out, indent .. label .. " (none)")
      else
        table.insert(out, indent .. label)
        dump(v, indent .. "  ", out)
      end
    elseif v == vim.NIL then
      table.insert(out, indent .. label .. " null")
    else
      local s = tostring(v):gsub("\n", " ")
      table.insert(out, indent .. label .. " " .. s)
    end
  end
  return out
end
M._dump = dump

-- ---------------------------------------------------------------- handlers

local function on_session_update(_, params)
  local ev, sid = format.event_of(params)
  if not ev then
    return
  end
  if sid then
    M.state.session_id = sid
  end
  table.insert(M.state.events, ev)
  local kind = format.field(ev, "type")
  if kind == "turn_ended" then
    M.state.last_stop_reason = format.field(ev, "stop_reason")
  end
  local text, inline = format.event_text(ev)
  if text then
    M.append(text, inline)
  end
end

-- clio/status: the server says when the status changes (no polling).
local function on_status(_, params)
  if type(params) ~= "table" then
    return
  end
  M.state.server_status = params
  M.state.statuses = M.state.statuses + 1
  M.state.status = format.status_line(params)
  pcall(vim.cmd, "redrawstatus")
end

local function on_publish_diagnostics(err, result, ctx, config)
  if result and result.uri then
    local mine = {}
    for _, d in ipairs(result.diagnostics or {}) do
      if d.source == M.SOURCE then
        table.insert(mine, d)
      end
    end
    M.state.memory_diagnostics[result.uri] = mine
  end
  return vim.lsp.diagnostic.on_publish_diagnostics(err, result, ctx, config)
end

local MESSAGE_LEVEL = { [1] = "error", [2] = "warning", [3] = "info", [4] = "log" }

-- window/showMessage: keep it in the turn buffer too (seed results, option
-- problems), then let Neovim show it as usual.
local function on_show_message(err, result, ctx, config)
  if type(result) == "table" and result.message then
    table.insert(M.state.messages, result.message)
    M.append("[" .. (MESSAGE_LEVEL[result.type] or "info") .. "] " .. result.message, false)
  end
  return vim.lsp.handlers["window/showMessage"](err, result, ctx, config)
end

local function answer_offer(message, titles)
  local choice = M.config.resume_offer
  if type(choice) == "function" then
    return choice(message, titles)
  elseif choice == "seed" then
    return "Seed"
  elseif choice == "dismiss" then
    return "Dismiss"
  end
  return false -- ask the user
end

local function on_show_message_request(_, params)
  params = params or {}
  local actions = params.actions or {}
  local titles = {}
  for _, a in ipairs(actions) do
    table.insert(titles, a.title)
  end
  local offer = { message = params.message, actions = titles }
  -- The resume offer is the request whose buttons are exactly Seed / Dismiss; any
  -- other request (a permission prompt) is always asked.
  local is_offer = #titles == 2 and titles[1] == "Seed" and titles[2] == "Dismiss"
  local title = false
  if is_offer then
    table.insert(M.state.offers, offer)
    title = answer_offer(params.message or "", titles)
  end
  if title == false then
    -- Ask: asynchronously where the client supports it (0.10+ runs server
    -- requests in a coroutine), else with a blocking list.
    local co, is_main = coroutine.running()
    if co and not is_main then
      vim.ui.select(actions, {
        prompt = (params.message or "") .. ": ",
        format_item = function(a)
          return a.title
        end,
      }, function(a)
        vim.schedule(function()
          coroutine.resume(co, a or vim.NIL)
        end)
      end)
      local picked = coroutine.yield()
      offer.answer = picked ~= vim.NIL and picked.title or nil
      return picked
    end
    local lines = { params.message or "" }
    for i, t in ipairs(titles) do
      table.insert(lines, string.format("%d. %s", i, t))
    end
    local i = vim.fn.inputlist(lines)
    if i < 1 or i > #actions then
      return vim.NIL
    end
    offer.answer = actions[i].title
    return actions[i]
  end
  for _, a in ipairs(actions) do
    if a.title == title then
      offer.answer = title
      return a
    end
  end
  return vim.NIL
end

-- ---------------------------------------------------------------- client

--- The running client object, or nil.
function M.client()
  if not M.state.client_id then
    return nil
  end
  local c = vim.lsp.get_client_by_id(M.state.client_id)
  if c and not compat.is_stopped(c) then
    return c
  end
  return nil
end

-- Run fn(client) once the client is initialized (requests sent before the
-- initialize answer would break the protocol on 0.7).
local waiting = {}
local function with_client(fn)
  if not M.start() then
    return
  end
  if M.state.ready then
    fn(M.client())
  else
    table.insert(waiting, fn)
  end
end

local function attachable(buf)
  return vim.api.nvim_buf_is_valid(buf)
    and vim.bo[buf].buftype == ""
    and vim.api.nvim_buf_get_name(buf) ~= ""
end

--- Attach buffer `buf` (default current) to the clio client.
function M.attach(buf)
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  if M.state.client_id and attachable(buf) then
    vim.lsp.buf_attach_client(buf, M.state.client_id)
  end
end

--- Start the server (once) and attach the current buffer. Returns the client id.
function M.start()
  if M.client() then
    return M.state.client_id
  end
  local root = M.config.root_dir or vim.fn.getcwd()
  local id = compat.start_client({
    name = "clio",
    cmd = M.config.cmd,
    cmd_env = M.config.cmd_env,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = root } },
    init_options = vim.tbl_extend("keep", M.config.init_options or {}, { editorSessionId = M.editor_session_id() }),
    settings = object(M.config.settings),
    handlers = {
      ["clio/sessionUpdate"] = on_session_update,
      ["clio/status"] = on_status,
      ["textDocument/publishDiagnostics"] = on_publish_diagnostics,
      ["window/showMessageRequest"] = on_show_message_request,
      ["window/showMessage"] = on_show_message,
    },
    on_init = function(client)
      M.state.ready = true
      vim.schedule(function()
        local queued = waiting
        waiting = {}
        for _, fn in ipairs(queued) do
          fn(client)
        end
      end)
    end,
    on_exit = function(code)
      M.state.client_id = nil
      M.state.ready = false
      M.state.turn_running = false
      if code ~= 0 then
        notify("server exited with code " .. tostring(code), vim.log.levels.WARN)
      end
    end,
  })
  if not id then
    notify("could not start " .. table.concat(M.config.cmd, " "), vim.log.levels.ERROR)
    return nil
  end
  M.state.client_id = id
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) then
      M.attach(buf)
    end
  end
  return id
end

--- Stop the server.
function M.stop()
  local c = M.client()
  if c then
    compat.stop(c)
  end
end

--- workspace/executeCommand `command` with `arguments`; `cb(err, result)`.
--- Returns a table whose `id` is the request id once it is sent.
function M.execute(command, arguments, cb)
  local params = { command = command, arguments = arguments or {} }
  local buf = vim.api.nvim_get_current_buf()
  local sent = {}
  with_client(function(c)
    local ok, rid = compat.request(c, "workspace/executeCommand", params, function(err, result)
      if err then
        notify(command .. ": " .. tostring(err.message or err), vim.log.levels.ERROR)
      end
      if cb then
        cb(err, result)
      end
    end, buf)
    if not ok then
      notify(command .. ": request not sent", vim.log.levels.ERROR)
    end
    sent.id = rid
  end)
  return sent
end

local function current_uri()
  local buf = vim.api.nvim_get_current_buf()
  if attachable(buf) then
    return vim.uri_from_bufnr(buf)
  end
  return nil
end

local function session_args(extra)
  local args = extra or {}
  if M.state.session_id and args.sessionId == nil then
    args.sessionId = M.state.session_id
  end
  return object(args)
end

-- ---------------------------------------------------------------- commands

--- Refresh `M.state.board` and the status string from `clio.memory.show`.
function M.refresh_status(cb)
  M.execute("clio.memory.show", { object() }, function(err, shown)
    if not err and type(shown) == "table" then
      M.state.board = shown
      if not M.state.server_status then
        M.state.status = format.board_status(format.field(shown, "board") or shown)
      end
    end
    if cb then
      cb(err, M.state.board)
    end
  end)
end

--- For 'statusline': "clio: <tier> · <last decision>".
function M.statusline()
  return M.state.status
end

--- Run a turn with `text`. `cb(err, stop_reason)` runs when the turn ends.
function M.prompt(text, cb)
  if not text or text == "" then
    vim.ui.input({ prompt = "Clio prompt: " }, function(input)
      if input and input ~= "" then
        M.prompt(input, cb)
      end
    end)
    return
  end
  local buf = M.turn_buffer()
  if M.config.open_turn_buffer then
    show_buffer(buf)
  end
  M.append("> " .. text, false)
  M.state.turn_running = true
  local args = session_args({ text = text })
  args.textDocument = current_uri() and { uri = current_uri() } or nil
  M.state.prompt_request = M.execute("clio.prompt", { args }, function(err, result)
    M.state.turn_running = false
    M.state.prompt_request = nil
    if type(result) == "table" then
      M.state.session_id = format.field(result, "session_id") or M.state.session_id
      result = format.field(result, "stop_reason") or result
    end
    if not err then
      M.state.last_stop_reason = result
    end
    if cb then
      cb(err, result)
    end
  end)
end

--- Cancel the running turn.
function M.cancel(cb)
  M.execute("clio.cancel", { session_args() }, cb)
end

local function set_session(result)
  if type(result) == "table" then
    M.state.session_id = format.field(result, "session_id") or format.field(result, "id") or M.state.session_id
  elseif type(result) == "string" then
    M.state.session_id = result
  end
end

--- Start a new session (the bank is cleared by the server).
function M.new_session(cb)
  M.execute("clio.session.new", { object() }, function(err, result)
    if not err then
      set_session(result)
      M.append("── new session " .. tostring(M.state.session_id), false)
    end
    if cb then
      cb(err, result)
    end
  end)
end

--- Load session `id` (pick from the list when nil). The server replays it and
--- may then offer a handoff seed (window/showMessageRequest).
function M.load(id, cb)
  if id and id ~= "" then
    M.execute("clio.session.load", { { sessionId = id } }, function(err, result)
      if not err then
        M.state.session_id = id
        set_session(result)
        M.append("── loaded session " .. tostring(M.state.session_id), false)
      end
      if cb then
        cb(err, result)
      end
    end)
    return
  end
  M.execute("clio.session.list", { object() }, function(err, result)
    if err then
      return
    end
    local sessions = type(result) == "table" and (format.field(result, "sessions") or result) or {}
    if #sessions == 0 then
      notify("no sessions to load")
      return
    end
    vim.ui.select(sessions, {
      prompt = "Load session: ",
      format_item = function(s)
        local title = format.field(s, "title") or ""
        return tostring(format.field(s, "session_id")) .. "  " .. title
      end,
    }, function(s)
      if s then
        M.load(format.field(s, "session_id"), cb)
      end
    end)
  end)
end

--- Show the memory board in the clio://memory buffer.
function M.memory(cb)
  M.refresh_status(function(err, board)
    if not err then
      local lines = dump(board)
      table.insert(lines, 1, "# Clio memory (" .. M.state.status .. ")")
      local buf = write_lines(M.MEMORY_BUFFER, lines)
      show_buffer(buf)
    end
    if cb then
      cb(err, board)
    end
  end)
end

-- All clio-memory diagnostics that carry a proposal id, current buffer first.
local function proposal_diagnostics()
  local out = {}
  local here = current_uri()
  local line = vim.api.nvim_win_get_cursor(0)[1] - 1
  local function add(uri, diags, first)
    for _, d in ipairs(diags) do
      if type(d.data) == "table" and format.field(d.data, "proposal_id") then
        local item = { uri = uri, diagnostic = d }
        if first and d.range and d.range.start.line == line then
          table.insert(out, 1, item)
        else
          table.insert(out, item)
        end
      end
    end
  end
  if here and M.state.memory_diagnostics[here] then
    add(here, M.state.memory_diagnostics[here], true)
  end
  for uri, diags in pairs(M.state.memory_diagnostics) do
    if uri ~= here then
      add(uri, diags, false)
    end
  end
  return out
end
M._proposal_diagnostics = proposal_diagnostics

local function run_action(action, cb)
  local c = M.client()
  if action.edit then
    vim.lsp.util.apply_workspace_edit(action.edit, c and c.offset_encoding or "utf-16")
  end
  local command = action.command
  if type(command) == "string" then
    command = action -- the action is a Command
  end
  if type(command) == "table" then
    M.execute(command.command, command.arguments, cb)
  elseif cb then
    cb(nil, nil)
  end
end

--- Ask the server for the quick fixes of one memory diagnostic.
--- `cb(err, actions)`; actions are CodeAction or Command tables.
function M.code_actions(uri, diagnostic, cb)
  local c = M.client()
  if not c then
    cb({ message = "clio is not running" }, nil)
    return
  end
  local params = {
    textDocument = { uri = uri },
    range = diagnostic.range,
    context = { diagnostics = { diagnostic }, only = { "quickfix" } },
  }
  compat.request(c, "textDocument/codeAction", params, function(err, result)
    cb(err, result or {})
  end, vim.uri_to_bufnr(uri))
end

-- Approve or reject through the server's quick fix ("Approve memory: …").
local function decide(verb, id, cb)
  if id and id ~= "" then
    M.execute("clio.memory." .. verb, { id }, cb)
    return
  end
  local prefix = (verb == "approve" and "Approve memory" or "Reject memory")
  local candidates = proposal_diagnostics()
  if #candidates == 0 then
    notify("no memory proposal to " .. verb)
    if cb then
      cb({ message = "no proposal" }, nil)
    end
    return
  end
  local pending = #candidates
  local found = {}
  for _, item in ipairs(candidates) do
    M.code_actions(item.uri, item.diagnostic, function(_, actions)
      for _, a in ipairs(actions or {}) do
        if type(a.title) == "string" and a.title:sub(1, #prefix) == prefix then
          table.insert(found, a)
        end
      end
      pending = pending - 1
      if pending > 0 then
        return
      end
      if #found == 0 then
        notify("the server offered no '" .. prefix .. "' action")
        if cb then
          cb({ message = "no action" }, nil)
        end
      elseif #found == 1 then
        run_action(found[1], cb)
      else
        vim.ui.select(found, {
          prompt = prefix .. ": ",
          format_item = function(a)
            return a.title
          end,
        }, function(a)
          if a then
            run_action(a, cb)
          end
        end)
      end
    end)
  end
end

--- Approve a memory proposal: by record id, else via the quick fix of the
--- memory diagnostic under the cursor (or any, picked from a list).
function M.approve(id, cb)
  decide("approve", id, cb)
end

--- Reject a memory proposal (same lookup as approve).
function M.reject(id, cb)
  decide("reject", id, cb)
end

--- Write a handoff for the current session.
function M.handoff(cb)
  M.execute("clio.handoff", { session_args() }, function(err, result)
    if not err then
      local where = type(result) == "table" and (format.field(result, "path") or vim.inspect(result)) or tostring(result)
      M.append("── handoff written: " .. where, false)
      notify("handoff written: " .. where)
    end
    if cb then
      cb(err, result)
    end
  end)
end

--- Seed the bank from the latest handoff.
function M.seed(cb)
  M.execute("clio.memory.seed", { session_args() }, function(err, result)
    if not err then
      M.append("── seeded from handoff", false)
      M.refresh_status()
    end
    if cb then
      cb(err, result)
    end
  end)
end

--- Show token usage and memory spend.
function M.usage(cb)
  M.execute("clio.usage", { session_args() }, function(err, result)
    if not err then
      local lines = dump(result)
      table.insert(lines, 1, "── usage")
      M.append(table.concat(lines, "\n"), false)
    end
    if cb then
      cb(err, result)
    end
  end)
end

--- This Neovim's editor session id: the session file (`:mksession`) when one is
--- loaded, else this Neovim's process id.
function M.editor_session_id()
  local file = vim.v.this_session
  if file and file ~= "" then
    return file
  end
  return "nvim-" .. tostring(vim.fn.getpid())
end

--- Tell the server the editor session changed (it clears the bank).
function M.session_changed(reason)
  local c = M.client()
  if c then
    compat.notify(c, "clio/sessionChanged", { editorSessionId = M.editor_session_id(), reason = reason or "editor" })
  end
end

-- ---------------------------------------------------------------- setup

local function define_commands()
  local cmd = vim.api.nvim_create_user_command
  cmd("ClioPrompt", function(o)
    M.prompt(o.args)
  end, { nargs = "*", desc = "Clio: run a turn" })
  cmd("ClioCancel", function()
    M.cancel()
  end, { desc = "Clio: cancel the running turn" })
  cmd("ClioNew", function()
    M.new_session()
  end, { desc = "Clio: new session" })
  cmd("ClioLoad", function(o)
    M.load(o.args)
  end, { nargs = "?", desc = "Clio: load a session" })
  cmd("ClioMemory", function()
    M.memory()
  end, { desc = "Clio: show the memory board" })
  cmd("ClioApprove", function(o)
    M.approve(o.args)
  end, { nargs = "?", desc = "Clio: approve a memory proposal" })
  cmd("ClioReject", function(o)
    M.reject(o.args)
  end, { nargs = "?", desc = "Clio: reject a memory proposal" })
  cmd("ClioHandoff", function()
    M.handoff()
  end, { desc = "Clio: write a handoff" })
  cmd("ClioSeed", function()
    M.seed()
  end, { desc = "Clio: seed memory from the latest handoff" })
  cmd("ClioUsage", function()
    M.usage()
  end, { desc = "Clio: show usage" })
end

--- Configure the plugin. `opts` overrides the defaults above.
function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts or {})
  define_commands()
  local group = vim.api.nvim_create_augroup("clio", { clear = true })
  vim.api.nvim_create_autocmd({ "BufReadPost", "BufNewFile", "BufEnter" }, {
    group = group,
    callback = function(a)
      M.attach(a.buf)
    end,
  })
  vim.api.nvim_create_autocmd("SessionLoadPost", {
    group = group,
    callback = function()
      M.session_changed("SessionLoadPost")
    end,
  })
  if M.config.autostart then
    M.start()
  end
end

return M
