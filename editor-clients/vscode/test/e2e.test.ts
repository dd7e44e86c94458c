/**
 * Client-stack test: drives `clio-acp lsp` over stdio through
 * vscode-languageserver-protocol (the JSON-RPC stack vscode-languageclient runs on),
 * with the extension's own payload builders and formatters from ../src/protocol.
 *
 * The model is the repository's scripted model server
 * (`python -m tests.support.model_server`), started here on loopback with a fixed
 * script, so every turn is deterministic. Run with `node --test out/test/` after
 * `tsc`; `PYTHON` names the interpreter (default `python`).
 */

import assert from "node:assert/strict";
import { ChildProcess, spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, test } from "node:test";
import {
  CancellationTokenSource,
  CodeAction,
  CodeActionRequest,
  Command,
  Diagnostic,
  ConfigurationRequest,
  ExecuteCommandRequest,
  ExitNotification,
  InitializeRequest,
  InitializedNotification,
  ProtocolConnection,
  PublishDiagnosticsNotification,
  ResponseError,
  ShowMessageRequest,
  ShutdownRequest,
  StreamMessageReader,
  StreamMessageWriter,
  WorkDoneProgress,
  WorkDoneProgressCreateRequest,
  createProtocolConnection,
} from "vscode-languageserver-protocol/node";
import {
  CONFIG_SECTION,
  DEFAULT_SETTINGS,
  SESSION_UPDATE,
  ServerCommand,
  SessionEvent,
  diagnosticProposalId,
  eventOf,
  field,
  eventText,
  promptArguments,
  serverOptions,
  sessionArguments,
  showArguments,
  statusText,
} from "../src/protocol";

const REPO = path.resolve(__dirname, "..", "..", "..", "..");
const PYTHON = process.env.PYTHON ?? "python";
const WINDOW_SESSION = "vscode-window-test";
const REQUEST_CANCELLED = -32800; // LSP 3.17 LSPErrorCodes.RequestCancelled
const HELLO = "Hello from the scripted model.";
const SLOW_WORDS = 60;
const AFTER_CANCEL = "Still here after the cancel.";
const LOOKED = "Both looks are done.";
const LESSON = "The notes live in notes.md at the workspace root.";

let home: string;
let workspace: string;
let model: ChildProcess;
let server: ChildProcess;
let connection: ProtocolConnection;
let serverStderr = "";
let exitCode: Promise<number | null>;
const events: SessionEvent[] = [];
const progress: { token: string | number; kind: string }[] = [];
const offers: string[] = [];
const diagnostics = new Map<string, Diagnostic[]>();

function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = 30_000): Promise<T> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const tick = () => {
      const value = probe();
      if (value !== undefined && value !== false) {
        resolve(value);
      } else if (Date.now() - started > timeoutMs) {
        reject(new Error(`timed out waiting for ${what}\n--- server stderr ---\n${serverStderr.slice(-4000)}`));
      } else {
        setTimeout(tick, 20);
      }
    };
    tick();
  });
}

function startModelServer(script: unknown[]): Promise<string> {
  const scriptPath = path.join(home, "replies.json");
  fs.writeFileSync(scriptPath, JSON.stringify(script));
  model = spawn(PYTHON, ["-m", "tests.support.model_server", "--script", scriptPath, "--default-text", "ok"], {
    cwd: REPO,
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    let out = "";
    model.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const line = out.split("\n")[0];
      if (out.includes("\n")) {
        resolve(line.trim());
      }
    });
    model.on("exit", (code) => reject(new Error(`model server exited (${code})`)));
  });
}

function settingsYaml(baseUrl: string): string {
  return [
    "version: 2",
    "targets:",
    "  - id: scripted",
    "    runtime: llamacpp",
    `    url: ${baseUrl}`,
    "    maxConcurrentRequests: 4",
    "chat:",
    "  target: scripted",
    "  model: scripted-model",
    "context:",
    "  memory:",
    "    target: scripted",
    "    model: scripted-model",
    "    cadenceToolCalls: 2",
    "permissions:",
    "  mode: bypass",
    "",
  ].join("\n");
}

function messageText(sessionId: string, from: number): string {
  return events
    .slice(from)
    .filter((e) => e.type === "message_chunk" && e.sessionId === sessionId)
    .map((e) => String(e.text))
    .join("");
}

before(async () => {
  home = fs.mkdtempSync(path.join(os.tmpdir(), "clio-vscode-"));
  workspace = path.join(home, "workspace");
  fs.mkdirSync(workspace);
  fs.writeFileSync(path.join(workspace, "main.py"), "print('hi')\n");
  const dirs: Record<string, string> = {};
  for (const name of ["data", "state", "config", "cache"]) {
    dirs[name] = path.join(home, name);
    fs.mkdirSync(dirs[name]);
  }
  const baseUrl = await startModelServer([
    { text: HELLO },
    { text: Array.from({ length: SLOW_WORDS }, (_, i) => `word${i} `), chunk_delay: 0.25 },
    { text: AFTER_CANCEL },
    // Two tool calls (the interval trigger at cadence 2), the answer, then the
    // detached memory step at turn end: it saves a fact and cites it, so the fact is
    // proposed as a durable record (MEMORY_SPEC §6).
    ...["echo first-look", "echo second-look"].map((command) => ({
      tool_calls: [{ name: "run_command", arguments: JSON.stringify({ command }) }],
    })),
    { text: LOOKED },
    {
      text:
        `<operations>[{"op":"save_knowledge","content":"${LESSON}"}]</operations>\n` +
        "<context_for_action>[tm-k-1] Read notes.md first.</context_for_action>",
    },
  ]);
  fs.writeFileSync(path.join(dirs.config, "settings.yaml"), settingsYaml(baseUrl));

  server = spawn(PYTHON, ["-m", "clio_acp", "lsp"], {
    cwd: workspace,
    env: {
      ...process.env,
      PYTHONPATH: REPO + (process.env.PYTHONPATH ? path.delimiter + process.env.PYTHONPATH : ""),
      PYTHONUNBUFFERED: "1",
      CLIO_ACP_DATA_DIR: dirs.data,
      CLIO_ACP_STATE_DIR: dirs.state,
      CLIO_ACP_CONFIG_DIR: dirs.config,
      CLIO_ACP_CACHE_DIR: dirs.cache,
    },
    stdio: ["pipe", "pipe", "pipe"],
  });
  server.stderr!.on("data", (chunk: Buffer) => {
    serverStderr += chunk.toString();
  });
  exitCode = new Promise((resolve) => server.on("exit", (code) => resolve(code)));

  connection = createProtocolConnection(new StreamMessageReader(server.stdout!), new StreamMessageWriter(server.stdin!));
  connection.onNotification(SESSION_UPDATE, (params: unknown) => {
    const ev = eventOf(params);
    if (ev) {
      events.push(ev);
    }
  });
  connection.onNotification(PublishDiagnosticsNotification.type, (params) => {
    diagnostics.set(params.uri, params.diagnostics);
  });
  connection.onNotification("window/showMessage", () => undefined);
  connection.onNotification("window/logMessage", () => undefined);
  connection.onRequest(WorkDoneProgressCreateRequest.type, (params) => {
    connection.onProgress(WorkDoneProgress.type, params.token, (value) => {
      progress.push({ token: params.token, kind: value.kind });
    });
    return null;
  });
  connection.onRequest(ConfigurationRequest.type, (params) =>
    params.items.map((item) => (item.section === CONFIG_SECTION ? serverOptions(DEFAULT_SETTINGS, WINDOW_SESSION) : null))
  );
  connection.onRequest(ShowMessageRequest.type, (params) => {
    offers.push(params.message);
    return params.actions?.find((a) => a.title === "Dismiss") ?? null;
  });
  connection.listen();

  const init = await connection.sendRequest(InitializeRequest.type, {
    processId: process.pid,
    rootUri: "file://" + workspace,
    workspaceFolders: [{ uri: "file://" + workspace, name: "workspace" }],
    initializationOptions: serverOptions({ ...DEFAULT_SETTINGS, permissionMode: "bypass" }, WINDOW_SESSION),
    capabilities: {
      window: { workDoneProgress: true, showMessage: { messageActionItem: { additionalPropertiesSupport: true } } },
      workspace: { configuration: true, workspaceFolders: true, didChangeConfiguration: { dynamicRegistration: true } },
      textDocument: {
        publishDiagnostics: { relatedInformation: true, dataSupport: true },
        codeAction: {
          dataSupport: true,
          isPreferredSupport: true,
          codeActionLiteralSupport: { codeActionKind: { valueSet: ["quickfix", "source"] } },
        },
      },
    },
  });
  const commands = init.capabilities.executeCommandProvider?.commands ?? [];
  for (const name of Object.values(ServerCommand)) {
    assert.ok(commands.includes(name), `server does not offer ${name}`);
  }
  await connection.sendNotification(InitializedNotification.type, {});
});

after(async () => {
  connection?.dispose();
  server?.kill();
  model?.kill();
  fs.rmSync(home, { recursive: true, force: true });
});

let sessionId: string;

test("a prompt streams the turn as clio/sessionUpdate with $/progress and returns its stop reason", async () => {
  const from = events.length;
  const uri = "file://" + path.join(workspace, "main.py");
  const result = (await connection.sendRequest(ExecuteCommandRequest.type, {
    command: ServerCommand.prompt,
    arguments: promptArguments("Say hello", null, { uri, cursor: { line: 0, character: 2 } }),
  })) as { sessionId: string; stopReason: string };
  assert.equal(result.stopReason, "end_turn");
  sessionId = result.sessionId;
  assert.ok(sessionId, "the answer names the session");
  await waitFor("turn_ended event", () => events.slice(from).find((e) => e.type === "turn_ended"));
  assert.equal(messageText(sessionId, from), HELLO);
  const shown = events
    .slice(from)
    .map((e) => eventText(e))
    .filter((t) => t !== undefined);
  assert.ok(shown.some((t) => t!.inline), "message chunks are shown inline in the output channel");
  assert.equal(shown[shown.length - 1]!.text, "── turn ended: end_turn");
  await waitFor("progress begin and end", () => {
    const kinds = progress.map((p) => p.kind);
    return kinds.includes("begin") && kinds.includes("end");
  });
});

test("cancelling the prompt request ($/cancelRequest) stops the turn, and the session goes on", async () => {
  const from = events.length;
  const source = new CancellationTokenSource();
  const pending = connection.sendRequest(
    ExecuteCommandRequest.type,
    { command: ServerCommand.prompt, arguments: promptArguments("Count slowly", sessionId, null) },
    source.token
  );
  const outcome = pending.then(
    (value) => ({ value, error: undefined as unknown }),
    (error: unknown) => ({ value: undefined, error })
  );
  await waitFor("the slow turn to start streaming", () =>
    events.slice(from).find((e) => e.type === "message_chunk")
  );
  source.cancel();
  const { value, error } = await outcome;
  if (error !== undefined) {
    assert.ok(error instanceof ResponseError, `unexpected error ${error}`);
    assert.equal(error.code, REQUEST_CANCELLED);
  } else {
    assert.equal((value as { stopReason: string }).stopReason, "cancelled");
  }
  // The turn itself stopped: its stream ends well before the scripted 60 words.
  const ended = await waitFor("turn_ended after cancel", () =>
    events.slice(from).find((e) => e.type === "turn_ended")
  );
  assert.equal(ended.stopReason, "cancelled");
  const words = messageText(sessionId, from).trim().split(/\s+/).length;
  assert.ok(words < SLOW_WORDS, `the cancelled turn streamed all ${words} words`);

  const next = events.length;
  const again = (await connection.sendRequest(ExecuteCommandRequest.type, {
    command: ServerCommand.prompt,
    arguments: promptArguments("Still there?", sessionId, null),
  })) as { stopReason: string };
  assert.equal(again.stopReason, "end_turn");
  assert.equal(messageText(sessionId, next), AFTER_CANCEL);
});

test("clio.cancel with no turn running answers without error", async () => {
  const result = (await connection.sendRequest(ExecuteCommandRequest.type, {
    command: ServerCommand.cancel,
    arguments: sessionArguments(sessionId),
  })) as { cancelled: boolean };
  assert.equal(result.cancelled, false);
});

test("clio.memory.show answers a board the status bar can show", async () => {
  const shown = await connection.sendRequest(ExecuteCommandRequest.type, {
    command: ServerCommand.memoryShow,
    arguments: showArguments(),
  });
  const text = statusText(shown);
  assert.match(text, /^\$\(database\) Clio: /);
  assert.ok(!text.includes("Clio: ?"), `the board names no tier: ${JSON.stringify(shown)}`);
});

test("a memory proposal shows as a clio-memory diagnostic whose Approve quick fix approves and clears it", async () => {
  const result = (await connection.sendRequest(ExecuteCommandRequest.type, {
    command: ServerCommand.prompt,
    arguments: promptArguments("Take two looks at the workspace", sessionId, null),
  })) as { stopReason: string };
  assert.equal(result.stopReason, "end_turn");
  // The extension refreshes the board after a turn settles (the memory step is
  // detached); the server publishes pending proposals when it answers.
  let found: { uri: string; diagnostic: Diagnostic; id: string } | undefined;
  await waitFor("a clio-memory diagnostic carrying a proposal id", () => {
    void connection.sendRequest(ExecuteCommandRequest.type, {
      command: ServerCommand.memoryShow,
      arguments: showArguments(),
    });
    for (const [uri, list] of diagnostics) {
      for (const d of list) {
        const id = diagnosticProposalId(d.source, d.data);
        if (id) {
          found = { uri, diagnostic: d, id };
        }
      }
    }
    return found;
  });
  const { uri, diagnostic, id } = found!;
  assert.equal(diagnostic.severity, 3, "Information"); // DiagnosticSeverity.Information
  const actions = (await connection.sendRequest(CodeActionRequest.type, {
    textDocument: { uri },
    range: diagnostic.range,
    context: { diagnostics: [diagnostic], only: ["quickfix"] },
  })) as (CodeAction | Command)[];
  const titles = actions.map((a) => a.title);
  assert.ok(titles.some((t) => t.startsWith("Reject memory: ")), `no Reject quick fix in ${titles}`);
  const approve = actions.find((a) => a.title.startsWith("Approve memory: ")) as CodeAction | undefined;
  assert.ok(approve?.command, `no Approve quick fix in ${titles}`);
  // vscode-languageclient runs a quick fix's command with workspace/executeCommand.
  const approved = (await connection.sendRequest(ExecuteCommandRequest.type, {
    command: approve.command.command,
    arguments: approve.command.arguments,
  })) as { status: string };
  assert.equal(field(approved, "status"), "approved");
  await waitFor("the proposal's diagnostic to clear", () =>
    [...diagnostics.values()].every((list) => list.every((d) => diagnosticProposalId(d.source, d.data) !== id))
  );
});

test("clio.session.list names the session the prompts ran in (what Load Session… picks from)", async () => {
  const result = await connection.sendRequest(ExecuteCommandRequest.type, {
    command: ServerCommand.sessionList,
    arguments: [{}],
  });
  const sessions = (field(result, "sessions") as unknown[]) ?? [];
  assert.ok(
    sessions.some((s) => field(s, "sessionId") === sessionId),
    `session ${sessionId} missing from ${JSON.stringify(result)}`
  );
});

test("shutdown then exit ends the server with code 0", async () => {
  await connection.sendRequest(ShutdownRequest.type);
  await connection.sendNotification(ExitNotification.type);
  assert.equal(await exitCode, 0);
  assert.equal(offers.length, 0, "no resume offer without a handoff");
});

// Fail loudly (not skip) when Python cannot import the server.
test("the server's Python is importable", () => {
  const probe = spawnSync(PYTHON, ["-c", "import clio_acp.lsp"], { cwd: REPO });
  assert.equal(probe.status, 0, String(probe.stderr));
});
