/**
 * The Clio VS Code extension: a thin client for `clio-acp lsp` on vscode-languageclient.
 *
 * Owns the VS Code surface only: palette commands (Clio: Prompt…, Cancel, New Session,
 * Load Session…, Show Memory, Approve/Reject Memory…, Handoff, Seed From Handoff,
 * Usage), the "Clio" output channel that streams a turn, the status-bar item with the
 * memory tier and last decision, and the `clio.*` settings. Diagnostics, quick fixes,
 * `$/progress` and the resume offer (`window/showMessageRequest`) are handled by
 * vscode-languageclient itself. No agent or memory logic lives here; wire names and
 * shapes come from ./protocol.
 */

import * as vscode from "vscode";
import {
  CancellationTokenSource,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  TransportKind,
} from "vscode-languageclient/node";
import {
  CONFIG_SECTION,
  DEFAULT_SETTINGS,
  MemorySettings,
  Proposal,
  SESSION_UPDATE,
  STATUS,
  ActiveEditor,
  ServerCommand,
  boardProposals,
  diagnosticProposalId,
  eventOf,
  field,
  eventText,
  loadArguments,
  promptArguments,
  proposalArguments,
  renderMarkdown,
  serverOptions,
  sessionArguments,
  showArguments,
  statusFromNotification,
  statusText,
} from "./protocol";

let client: LanguageClient | undefined;
let output: vscode.OutputChannel;
let status: vscode.StatusBarItem;
let sessionId: string | undefined;
let turn: CancellationTokenSource | undefined;
let atLineStart = true;
/** Set once the server sent `clio/status`: the status bar follows it from then on. */
let serverStatus = false;

function readSettings(): MemorySettings {
  const c = vscode.workspace.getConfiguration("clio");
  return {
    diagnosticsEnabled: c.get("memory.diagnostics.enabled", DEFAULT_SETTINGS.diagnosticsEnabled),
    diagnosticsSeverity: c.get("memory.diagnostics.severity", DEFAULT_SETTINGS.diagnosticsSeverity),
    diagnosticsMaxPerFile: c.get("memory.diagnostics.maxPerFile", DEFAULT_SETTINGS.diagnosticsMaxPerFile),
    memoryDocument: c.get("memory.document", DEFAULT_SETTINGS.memoryDocument),
    resumeOffer: c.get("memory.resumeOffer", DEFAULT_SETTINGS.resumeOffer),
    permissionMode: c.get("permissions.mode", DEFAULT_SETTINGS.permissionMode),
  };
}

function currentOptions(): Record<string, unknown> {
  return serverOptions(readSettings(), vscode.env.sessionId);
}

function write(text: string, inline: boolean): void {
  if (inline) {
    output.append(text);
    atLineStart = text.endsWith("\n");
    return;
  }
  if (!atLineStart) {
    output.appendLine("");
  }
  output.appendLine(text);
  atLineStart = true;
}

function onSessionUpdate(params: unknown): void {
  const ev = eventOf(params);
  if (!ev) {
    return;
  }
  if (ev.sessionId) {
    sessionId = ev.sessionId;
  }
  const shown = eventText(ev);
  if (shown) {
    write(shown.text, shown.inline);
  }
}

function onStatus(params: unknown): void {
  serverStatus = true;
  status.text = statusFromNotification(params);
}

function createClient(): LanguageClient {
  const c = vscode.workspace.getConfiguration("clio");
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  const run = {
    command: c.get<string>("server.command", "clio-acp"),
    args: c.get<string[]>("server.args", ["lsp"]),
    transport: TransportKind.stdio,
    options: { cwd: folder, env: { ...process.env, ...c.get<Record<string, string>>("server.env", {}) } },
  };
  const server: ServerOptions = { run, debug: run };
  const options: LanguageClientOptions = {
    // The server reads no document: it only publishes diagnostics and code actions on
    // workspace files, so no document's text is sent.
    documentSelector: [{ scheme: "file", pattern: "**/.clio-coder/memory.md" }],
    initializationOptions: currentOptions(),
    outputChannelName: "Clio Server",
    middleware: {
      workspace: {
        // The server pulls the `clio` section; answer it in the server's shape.
        configuration: async (params, token, next) => {
          const answers = await next(params, token);
          if (!Array.isArray(answers)) {
            return answers;
          }
          return params.items.map((item, i) => (item.section === CONFIG_SECTION ? currentOptions() : answers[i]));
        },
      },
    },
  };
  const lc = new LanguageClient("clio", "Clio", server, options);
  lc.onNotification(SESSION_UPDATE, onSessionUpdate);
  lc.onNotification(STATUS, onStatus);
  return lc;
}

async function execute<T = unknown>(command: string, args: unknown[], token?: vscode.CancellationToken): Promise<T> {
  if (!client) {
    throw new Error("Clio is not running");
  }
  return (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args }, token)) as T;
}

/** The status bar from `clio.memory.show`, only for a server that sends no
 * `clio/status` (older servers): asking it writes the memory document. */
async function refreshStatus(): Promise<void> {
  if (serverStatus) {
    return;
  }
  try {
    const board = await execute(ServerCommand.memoryShow, showArguments());
    status.text = statusText(board);
    status.tooltip = "Clio memory: tier · last decision (click: Show Memory)";
  } catch {
    status.text = "$(database) Clio";
  }
}

function report(error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  void vscode.window.showErrorMessage(`Clio: ${message}`);
}

/** The active file editor: its document, cursor and selection. */
function activeEditor(): ActiveEditor | null {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.uri.scheme !== "file") {
    return null;
  }
  const sel = editor.selection;
  const at = (p: vscode.Position) => ({ line: p.line, character: p.character });
  return { uri: editor.document.uri.toString(), cursor: at(sel.active), selection: { start: at(sel.start), end: at(sel.end) } };
}

async function prompt(): Promise<void> {
  const text = await vscode.window.showInputBox({ prompt: "Prompt the Clio agent", ignoreFocusOut: true });
  if (!text) {
    return;
  }
  if (vscode.workspace.getConfiguration("clio").get("turn.revealOutput", true)) {
    output.show(true);
  }
  write(`> ${text}`, false);
  turn?.dispose();
  const source = new CancellationTokenSource();
  turn = source;
  try {
    const result = await execute(ServerCommand.prompt, promptArguments(text, sessionId, activeEditor()), source.token);
    if (result && typeof result === "object" && "sessionId" in result) {
      sessionId = String((result as { sessionId: unknown }).sessionId);
    }
  } catch (error) {
    if (!source.token.isCancellationRequested) {
      report(error);
    }
  } finally {
    if (turn === source) {
      turn = undefined;
    }
    source.dispose();
  }
}

async function cancel(): Promise<void> {
  // `$/cancelRequest` stops the running turn (issue 8 item 7); clio.cancel covers a
  // turn this window did not start.
  if (turn) {
    turn.cancel();
    write("── cancelled", false);
    return;
  }
  await execute(ServerCommand.cancel, sessionArguments(sessionId));
}

async function newSession(): Promise<void> {
  const result = await execute<unknown>(ServerCommand.sessionNew, [{}]);
  const id = result && typeof result === "object" ? (result as Record<string, unknown>).sessionId : result;
  if (typeof id === "string") {
    sessionId = id;
  }
  write(`── new session ${sessionId ?? ""}`, false);
  await refreshStatus();
}

async function loadSession(): Promise<void> {
  const result = await execute<unknown>(ServerCommand.sessionList, [{}]);
  const list = (Array.isArray(result) ? result : ((result as Record<string, unknown>)?.sessions as unknown[])) ?? [];
  const items = list.map((s) => {
    const id = String(field(s, "sessionId"));
    return { label: String(field(s, "title") ?? id), description: id, detail: String(field(s, "cwd") ?? "") };
  });
  if (items.length === 0) {
    void vscode.window.showInformationMessage("Clio: no sessions to load");
    return;
  }
  const pick = await vscode.window.showQuickPick(items, { placeHolder: "Load which session?" });
  if (!pick) {
    return;
  }
  // The server replays the session as clio/sessionUpdate and may then offer to seed
  // from its handoff (a Seed / Dismiss message request).
  await execute(ServerCommand.sessionLoad, loadArguments(pick.description));
  sessionId = pick.description;
  await refreshStatus();
}

async function showMemory(): Promise<void> {
  const board = await execute(ServerCommand.memoryShow, showArguments());
  status.text = statusText(board);
  const doc = await vscode.workspace.openTextDocument({
    language: "markdown",
    content: ["# Clio memory", "", ...renderMarkdown(board)].join("\n"),
  });
  await vscode.window.showTextDocument(doc, { preview: true });
}

function pendingProposals(board: unknown): Proposal[] {
  const seen = new Map<string, Proposal>();
  for (const p of boardProposals(board)) {
    seen.set(p.id, p);
  }
  for (const [, diagnostics] of vscode.languages.getDiagnostics()) {
    for (const d of diagnostics) {
      const id = diagnosticProposalId(d.source, (d as unknown as { data?: unknown }).data);
      if (id && !seen.has(id)) {
        seen.set(id, { id, content: d.message });
      }
    }
  }
  return [...seen.values()];
}

async function decide(verb: "approve" | "reject"): Promise<void> {
  const board = await execute(ServerCommand.memoryShow, showArguments());
  const proposals = pendingProposals(board);
  if (proposals.length === 0) {
    void vscode.window.showInformationMessage("Clio: no memory proposal is pending");
    return;
  }
  const pick = await vscode.window.showQuickPick(
    proposals.map((p) => ({ label: p.content, description: p.id })),
    { placeHolder: verb === "approve" ? "Approve which memory?" : "Reject which memory?" }
  );
  if (!pick) {
    return;
  }
  await execute(verb === "approve" ? ServerCommand.memoryApprove : ServerCommand.memoryReject, proposalArguments(pick.description));
  await refreshStatus();
}

async function handoff(): Promise<void> {
  const result = await execute<unknown>(ServerCommand.handoff, sessionArguments(sessionId));
  const path = typeof result === "string" ? result : String((result as Record<string, unknown>)?.path ?? "");
  write(`── handoff written: ${path}`, false);
  const open = await vscode.window.showInformationMessage(`Clio: handoff written`, "Open");
  if (open && path) {
    await vscode.window.showTextDocument(vscode.Uri.file(path));
  }
}

async function seed(): Promise<void> {
  const result = await execute(ServerCommand.memorySeed, sessionArguments(sessionId));
  write(`── seeded from handoff: ${renderMarkdown(result).join(" ")}`, false);
  await refreshStatus();
}

async function usage(): Promise<void> {
  const result = await execute(ServerCommand.usage, sessionArguments(sessionId));
  output.show(true);
  write(["── usage", ...renderMarkdown(result)].join("\n"), false);
}

async function restart(): Promise<void> {
  if (client) {
    await client.stop();
  }
  client = createClient();
  await client.start();
  await refreshStatus();
}

function guarded(fn: () => Promise<void>): () => Promise<void> {
  return async () => {
    try {
      await fn();
    } catch (error) {
      report(error);
    }
  };
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("Clio");
  status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
  status.text = "$(database) Clio";
  status.command = "clioAcp.showMemory";
  status.show();
  // Palette ids use the `clioAcp.` prefix: vscode-languageclient registers the
  // server's own `clio.*` commands (the quick fixes run them).
  const commands: Record<string, () => Promise<void>> = {
    "clioAcp.prompt": prompt,
    "clioAcp.cancel": cancel,
    "clioAcp.newSession": newSession,
    "clioAcp.loadSession": loadSession,
    "clioAcp.showMemory": showMemory,
    "clioAcp.approveMemory": () => decide("approve"),
    "clioAcp.rejectMemory": () => decide("reject"),
    "clioAcp.handoff": handoff,
    "clioAcp.seed": seed,
    "clioAcp.usage": usage,
    "clioAcp.restartServer": restart,
  };
  for (const [id, fn] of Object.entries(commands)) {
    context.subscriptions.push(vscode.commands.registerCommand(id, guarded(fn)));
  }
  context.subscriptions.push(
    output,
    status,
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (!e.affectsConfiguration("clio") || !client) {
        return;
      }
      if (e.affectsConfiguration("clio.server")) {
        void vscode.window.showInformationMessage("Clio: server settings changed", "Restart Server").then((a) => {
          if (a) {
            void guarded(restart)();
          }
        });
        return;
      }
      void client.sendNotification("workspace/didChangeConfiguration", {
        settings: { [CONFIG_SECTION]: currentOptions() },
      });
    })
  );
  client = createClient();
  try {
    // The server sends clio/status after initialized; asking for the board here would
    // write the memory document into a workspace the user has not used Clio in.
    await client.start();
  } catch (error) {
    report(error);
  }
}

export async function deactivate(): Promise<void> {
  if (client) {
    await client.stop();
    client = undefined;
  }
}
