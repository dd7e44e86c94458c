-- clio.compat: the few places where Neovim 0.7 and 0.11 disagree.
--
-- Owns version switches only (starting a client, calling a client method);
-- no plugin behaviour lives here. Neovim 0.7.2 has `vim.lsp.start_client` and
-- closure-style `client.request(method, ...)`; 0.11 deprecates both in favour of
-- `vim.lsp.start(config, { attach = false })` and `client:request(...)`.

local M = {}

M.has_011 = vim.fn.has("nvim-0.11") == 1

--- Start a language client without attaching a buffer. Returns the client id or nil.
function M.start_client(config)
  if M.has_011 then
    return vim.lsp.start(config, { attach = false })
  end
  return vim.lsp.start_client(config)
end

--- client.request / client:request. Returns ok, request_id.
function M.request(client, method, params, handler, bufnr)
  if M.has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

--- client.notify / client:notify. Returns true when sent.
function M.notify(client, method, params)
  if M.has_011 then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

--- client.cancel_request / client:cancel_request.
function M.cancel_request(client, id)
  if M.has_011 then
    return client:cancel_request(id)
  end
  return client.cancel_request(id)
end

--- client.is_stopped / client:is_stopped.
function M.is_stopped(client)
  if M.has_011 then
    return client:is_stopped()
  end
  return client.is_stopped()
end

--- client.stop / client:stop.
function M.stop(client, force)
  if M.has_011 then
    return client:stop(force)
  end
  return client.stop(force)
end

return M
