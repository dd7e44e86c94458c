/** Unit tests of the extension's wire shapes and formatters (no server, no VS Code). */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { isBuiltin } from "node:module";
import path from "node:path";
import { test } from "node:test";
import {
  DEFAULT_SETTINGS,
  boardProposals,
  diagnosticProposalId,
  eventOf,
  eventText,
  promptArguments,
  proposalArguments,
  serverOptions,
  statusFromNotification,
  statusText,
} from "../src/protocol";

test("initializationOptions carry the window session id and the memory controls in the server's keys", () => {
  const options = serverOptions({ ...DEFAULT_SETTINGS, diagnosticsSeverity: "hint", permissionMode: "plan" }, "win-1");
  assert.deepEqual(options, {
    editorSessionId: "win-1",
    diagnostics: { enabled: true, severity: "hint", maxPerFile: 20 },
    memoryDocument: true,
    progress: true,
    sessionUpdates: true,
    resumeOffer: true,
    permissionMode: "plan",
  });
  assert.equal("permissionMode" in serverOptions(DEFAULT_SETTINGS, null), false);
});

test("prompt arguments are one object with the active document, cursor and selection", () => {
  const cursor = { line: 2, character: 4 };
  const selection = { start: { line: 1, character: 0 }, end: cursor };
  assert.deepEqual(promptArguments("hi", "s1", { uri: "file:///w/a.py", cursor, selection }), [
    { text: "hi", sessionId: "s1", textDocument: { uri: "file:///w/a.py" }, position: cursor, selection },
  ]);
  const empty = { start: cursor, end: cursor };
  assert.deepEqual(promptArguments("hi", null, { uri: "file:///w/a.py", cursor, selection: empty }), [
    { text: "hi", textDocument: { uri: "file:///w/a.py" }, position: cursor },
  ]);
  assert.deepEqual(promptArguments("hi"), [{ text: "hi" }]);
  assert.deepEqual(proposalArguments("mem-1"), ["mem-1"]);
});

test("a bare camelCase sessionUpdate event is read, wrapped or not", () => {
  const bare = eventOf({ type: "message_chunk", sessionId: "s1", messageId: "m", text: "a" });
  assert.equal(bare?.sessionId, "s1");
  const wrapped = eventOf({ sessionId: "s2", event: { type: "turn_ended", stopReason: "cancelled" } });
  assert.equal(wrapped?.sessionId, "s2");
  assert.deepEqual(eventText(wrapped!), { text: "── turn ended: cancelled", inline: false });
  assert.equal(eventOf({ nothing: 1 }), undefined);
});

test("events render as output-channel text; chunks continue the line, thoughts are hidden", () => {
  assert.deepEqual(eventText({ type: "message_chunk", text: "x\ny" }), { text: "x\ny", inline: true });
  assert.equal(eventText({ type: "thought_chunk", text: "hmm" }), undefined);
  assert.deepEqual(eventText({ type: "tool_call_finished", toolCallId: "t1", status: "failed", exitCode: 2 }), {
    text: "✗ t1 (exit 2)",
    inline: false,
  });
  assert.equal(eventText({ type: "memory_reminder", text: "Memory: a\nb" })?.text, "Memory: a b");
});

test("status text shows the memory tier and last decision from clio.memory.show", () => {
  assert.equal(statusText({ board: { tier: "llm", lastDecision: "injected" } }), "$(database) Clio: llm · injected");
  assert.equal(statusText({ board: { tier: "rules", last_decision: { decision: "silent" } } }), "$(database) Clio: rules · silent");
  assert.equal(statusText({ board: null }), "$(database) Clio: ?");
});

test("proposals come from the board and from clio-memory diagnostics", () => {
  assert.deepEqual(boardProposals({ proposals: [{ recordId: "mem-1", content: "Use -q" }] }), [
    { id: "mem-1", content: "Use -q" },
  ]);
  assert.equal(diagnosticProposalId("clio-memory", { proposalId: "mem-2" }), "mem-2");
  assert.equal(diagnosticProposalId("pyright", { proposalId: "mem-2" }), undefined);
});

test("the status bar text comes from clio/status", () => {
  assert.equal(
    statusFromNotification({ state: "working", tier: "rules", lastDecision: "silent (no_trigger)", pendingProposals: 2 }),
    "$(database) Clio: rules · silent (no_trigger) · working · 2 proposals"
  );
  assert.equal(statusFromNotification({ state: "idle", tier: null, lastDecision: null, pendingProposals: 0 }), "$(database) Clio: no session");
});

test("the manifest activates on its commands and on .clio-coder, and scopes server settings machine-overridable", () => {
  const manifest = JSON.parse(readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8"));
  assert.ok(!manifest.activationEvents.includes("*") && !manifest.activationEvents.includes("onStartupFinished"));
  assert.ok(manifest.activationEvents.includes("workspaceContains:.clio-coder"));
  for (const c of manifest.contributes.commands) {
    assert.ok(manifest.activationEvents.includes(`onCommand:${c.command}`), c.command);
  }
  for (const key of ["clio.server.command", "clio.server.args", "clio.server.env"]) {
    assert.equal(manifest.contributes.configuration.properties[key].scope, "machine-overridable", key);
  }
});

test("the esbuild bundle is self-contained: only vscode stays external, activate is exported", () => {
  // `npm run bundle` (run by `vsce package` through vscode:prepublish) writes dist/.
  const bundle = path.join(__dirname, "..", "..", "dist", "extension.js");
  const text = readFileSync(bundle, "utf8");
  const required = new Set([...text.matchAll(/require\("([^"]+)"\)/g)].map((m) => m[1]));
  for (const name of required) {
    assert.ok(name === "vscode" || isBuiltin(name), `bundled dependency left external: ${name}`);
  }
  assert.match(text, /activate/);
});
