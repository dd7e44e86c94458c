// Drives `clio-acp acp` with the official TypeScript ACP SDK (@agentclientprotocol/sdk)
// through the full flow: initialize, new, prompt with streaming, permission, cancel,
// close, load with replay, list, resume; then a session with the client's MCP server
// whose tool the scripted model calls after keeping a plan. The Python test
// (tests/acp/test_ts_interop.py) scripts the model server, starts this
// script, and asserts on the JSON summary it prints on stdout.
//
// Environment: AGENT_CMD (JSON argv of the agent), WORKSPACE (absolute folder),
// MCP_CMD (JSON argv of a stdio MCP server), MCP_PYTHONPATH (its PYTHONPATH).
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const argv = JSON.parse(process.env.AGENT_CMD);
const workspace = process.env.WORKSPACE;

function startAgent() {
  const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  return { child, stream };
}

function makeClient(record) {
  return acp
    .client({ name: "clio-ts-interop" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      record.updates.push(params);
      for (const waiter of record.waiters.splice(0)) waiter(params);
    })
    .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
      record.permissions.push(params);
      if (record.onPermission) return await record.onPermission(params);
      return { outcome: { outcome: "selected", optionId: "allow_once" } };
    });
}

function nextUpdate(record, predicate) {
  const seen = record.updates.find(predicate);
  if (seen) return Promise.resolve(seen);
  return new Promise((resolve) => {
    const check = (params) => {
      if (predicate(params)) resolve(params);
      else record.waiters.push(check);
    };
    record.waiters.push(check);
  });
}

const kinds = (record, sid) =>
  record.updates.filter((u) => u.sessionId === sid).map((u) => u.update.sessionUpdate);
const text = (record, sid, kind) =>
  record.updates
    .filter((u) => u.sessionId === sid && u.update.sessionUpdate === kind)
    .map((u) => u.update.content.text)
    .join("");

const summary = {};

// --- first connection: initialize, new, prompts (stream, permission, cancel), close
{
  const record = { updates: [], permissions: [], waiters: [] };
  const { child, stream } = startAgent();
  await makeClient(record).connectWith(stream, async (ctx) => {
    const init = await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      clientInfo: { name: "clio-ts-interop", version: "1.0.0" },
    });
    summary.initialize = init;

    const created = await ctx.request(acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
    const sid = created.sessionId;
    summary.sessionId = sid;
    summary.newModes = created.modes;
    summary.configOptionIds = (created.configOptions ?? []).map((o) => o.id);
    await nextUpdate(record, (u) => u.update.sessionUpdate === "available_commands_update");

    const first = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId: sid,
      prompt: [{ type: "text", text: "say hello" }],
    });
    summary.streamStop = first.stopReason;
    summary.streamText = text(record, sid, "agent_message_chunk");
    summary.streamThought = text(record, sid, "agent_thought_chunk");

    const second = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId: sid,
      prompt: [{ type: "text", text: "write the file" }],
    });
    summary.permissionStop = second.stopReason;
    summary.permissionCount = record.permissions.length;
    summary.permissionKind = record.permissions[0]?.toolCall?.kind;

    const slow = ctx.request(acp.methods.agent.session.prompt, {
      sessionId: sid,
      prompt: [{ type: "text", text: "talk slowly" }],
    });
    const before = record.updates.length;
    await nextUpdate(
      record,
      (u) => record.updates.indexOf(u) >= before && u.update.sessionUpdate === "agent_message_chunk",
    );
    await ctx.notify(acp.methods.agent.session.cancel, { sessionId: sid });
    summary.cancelStop = (await slow).stopReason;

    await ctx.request(acp.methods.agent.session.close, { sessionId: sid });
    summary.kindsFirst = kinds(record, sid);
  });
  child.kill();
}

// --- second connection: load with replay, list, resume, close; then the MCP session
{
  const record = { updates: [], permissions: [], waiters: [] };
  const { child, stream } = startAgent();
  await makeClient(record).connectWith(stream, async (ctx) => {
    await ctx.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION });
    const sid = summary.sessionId;
    const loaded = await ctx.request(acp.methods.agent.session.load, {
      sessionId: sid,
      cwd: workspace,
      mcpServers: [],
    });
    summary.loadModes = loaded.modes;
    summary.replayKinds = kinds(record, sid);
    summary.replayUserText = text(record, sid, "user_message_chunk");
    summary.replayAgentText = text(record, sid, "agent_message_chunk");

    const listed = await ctx.request(acp.methods.agent.session.list, {});
    summary.listed = listed.sessions.map((s) => s.sessionId);

    const replayed = record.updates.length;
    await ctx.request(acp.methods.agent.session.resume, { sessionId: sid, cwd: workspace, mcpServers: [] });
    summary.resumeNewMessages = record.updates
      .slice(replayed)
      .filter((u) => ["user_message_chunk", "agent_message_chunk"].includes(u.update.sessionUpdate)).length;

    await ctx.request(acp.methods.agent.session.close, { sessionId: sid });
    try {
      await ctx.request(acp.methods.agent.session.prompt, {
        sessionId: sid,
        prompt: [{ type: "text", text: "after close" }],
      });
      summary.afterCloseError = null;
    } catch (error) {
      summary.afterCloseError = error.code;
    }

    // The client's MCP server and the agent's plan (issue 21), in a new session of the
    // same agent (this connection had no permission requests before it).
    const mcpArgv = JSON.parse(process.env.MCP_CMD);
    const created = await ctx.request(acp.methods.agent.session.new, {
      cwd: workspace,
      mcpServers: [
        {
          name: "demo",
          command: mcpArgv[0],
          args: mcpArgv.slice(1),
          env: [{ name: "PYTHONPATH", value: process.env.MCP_PYTHONPATH }],
        },
      ],
    });
    const mcpSid = created.sessionId;
    const done = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId: mcpSid,
      prompt: [{ type: "text", text: "plan, then add 2 and 40" }],
    });
    summary.mcpStop = done.stopReason;
    summary.mcpPlans = record.updates
      .filter((u) => u.sessionId === mcpSid && u.update.sessionUpdate === "plan")
      .map((u) => u.update.entries.map((e) => [e.content, e.status]));
    summary.mcpToolCalls = record.updates
      .filter((u) => u.sessionId === mcpSid && u.update.sessionUpdate === "tool_call")
      .map((u) => [u.update.title, u.update.kind]);
    summary.mcpPermissions = record.permissions.map((p) => p.toolCall.kind);
    await ctx.request(acp.methods.agent.session.close, { sessionId: mcpSid });
  });
  child.kill();
}

process.stdout.write(JSON.stringify(summary) + "\n");
