/**
 * The clio LSP contract as the extension uses it: command names, argument shapes,
 * initializationOptions, and the text shown for session events and the memory board.
 *
 * Owns every wire name and payload shape the extension sends or reads (see
 * docs/editors/lsp.md); it must not import `vscode`, so the Node client-stack test
 * (test/e2e.test.ts) exercises the very same code the extension runs.
 */

/** Server commands (`workspace/executeCommand`), issue 8 item 1. */
export const ServerCommand = {
  prompt: "clio.prompt",
  cancel: "clio.cancel",
  sessionNew: "clio.session.new",
  sessionLoad: "clio.session.load",
  sessionList: "clio.session.list",
  sessionFork: "clio.session.fork",
  sessionClose: "clio.session.close",
  memoryShow: "clio.memory.show",
  memoryApprove: "clio.memory.approve",
  memoryReject: "clio.memory.reject",
  memoryPromote: "clio.memory.promote",
  memorySeed: "clio.memory.seed",
  handoff: "clio.handoff",
  usage: "clio.usage",
} as const;

/** Server → client notification carrying one session event (camelCase fields). */
export const SESSION_UPDATE = "clio/sessionUpdate";
/** Client → server notification: the editor session changed (the bank is cleared). */
export const SESSION_CHANGED = "clio/sessionChanged";
/** `Diagnostic.source` of memory reminders and proposals. */
export const MEMORY_SOURCE = "clio-memory";
/** The configuration section the server pulls with `workspace/configuration`. */
export const CONFIG_SECTION = "clio";

/** The extension's settings that the server sees (a subset of `clio.*`). */
export interface MemorySettings {
  diagnosticsEnabled: boolean;
  diagnosticsSeverity: "information" | "hint";
  diagnosticsMaxPerFile: number;
  memoryDocument: boolean;
  resumeOffer: boolean;
  permissionMode: "ask" | "accept-edits" | "plan" | "bypass" | null;
}

export const DEFAULT_SETTINGS: MemorySettings = {
  diagnosticsEnabled: true,
  diagnosticsSeverity: "information",
  diagnosticsMaxPerFile: 20,
  memoryDocument: true,
  resumeOffer: true,
  permissionMode: null,
};

/**
 * The server's `initializationOptions` (also sent as the `clio` section of
 * `workspace/didChangeConfiguration` and answered to `workspace/configuration`).
 * `editorSessionId` is VS Code's window session id (`vscode.env.sessionId`).
 */
export function serverOptions(settings: MemorySettings, editorSessionId: string | null): Record<string, unknown> {
  const options: Record<string, unknown> = {
    editorSessionId,
    diagnostics: {
      enabled: settings.diagnosticsEnabled,
      severity: settings.diagnosticsSeverity,
      maxPerFile: settings.diagnosticsMaxPerFile,
    },
    memoryDocument: settings.memoryDocument,
    progress: true,
    sessionUpdates: true,
    resumeOffer: settings.resumeOffer,
  };
  if (settings.permissionMode) {
    options.permissionMode = settings.permissionMode;
  }
  return options;
}

/** An LSP position (0-based line and character). */
export interface Position {
  line: number;
  character: number;
}

/** Where the user is: the active document, its cursor and its selection. */
export interface ActiveEditor {
  uri: string;
  cursor?: Position;
  selection?: { start: Position; end: Position };
}

/** Arguments of `clio.prompt`: the text, the session (if any), the active document with
 * its cursor (`position`) and a non-empty selection (`selection`). */
export function promptArguments(text: string, sessionId?: string | null, active?: ActiveEditor | null): unknown[] {
  const args: Record<string, unknown> = { text };
  if (sessionId) {
    args.sessionId = sessionId;
  }
  if (active) {
    args.textDocument = { uri: active.uri };
    if (active.cursor) {
      args.position = active.cursor;
    }
    const sel = active.selection;
    if (sel && (sel.start.line !== sel.end.line || sel.start.character !== sel.end.character)) {
      args.selection = sel;
    }
  }
  return [args];
}

/** `clio/status`: what the status bar shows, sent by the server when it changes. */
export const STATUS = "clio/status";

/** The status-bar text from `clio/status` params:
 * `Clio: <tier> · <last decision> · working · N proposals`. */
export function statusFromNotification(params: unknown): string {
  const tier = field(params, "tier");
  const parts = [`$(database) Clio: ${tier === undefined || tier === null ? "no session" : String(tier)}`];
  const last = field(params, "lastDecision");
  if (last !== undefined && last !== null) {
    parts.push(String(last));
  }
  if (field(params, "state") === "working") {
    parts.push("working");
  }
  const pending = Number(field(params, "pendingProposals") ?? 0);
  if (pending > 0) {
    parts.push(`${pending} ${pending === 1 ? "proposal" : "proposals"}`);
  }
  return parts.join(" · ");
}

/** Arguments of commands that act on one session (cancel, handoff, seed, usage). */
export function sessionArguments(sessionId?: string | null): unknown[] {
  return sessionId ? [{ sessionId }] : [{}];
}

/** Arguments of `clio.memory.show` (it takes no session: it shows the current one). */
export function showArguments(): unknown[] {
  return [{}];
}

/** Arguments of `clio.memory.approve` / `clio.memory.reject`: the proposal (record) id. */
export function proposalArguments(proposalId: string): unknown[] {
  return [proposalId];
}

/** Arguments of `clio.session.load`. */
export function loadArguments(sessionId: string): unknown[] {
  return [{ sessionId }];
}

/** One event of the session stream, as `clio/sessionUpdate` carries it. */
export interface SessionEvent {
  type: string;
  sessionId?: string;
  replay?: boolean;
  [key: string]: unknown;
}

/** Read `name` (camelCase) or its snake_case twin. */
export function field(obj: unknown, name: string): unknown {
  if (!obj || typeof obj !== "object") {
    return undefined;
  }
  const record = obj as Record<string, unknown>;
  if (record[name] !== undefined && record[name] !== null) {
    return record[name];
  }
  const snake = name.replace(/[A-Z]/g, (c) => "_" + c.toLowerCase());
  const value = record[snake];
  return value === null ? undefined : value;
}

/** The event inside `clio/sessionUpdate` params (bare event, or wrapped in `event`/`update`). */
export function eventOf(params: unknown): SessionEvent | undefined {
  if (!params || typeof params !== "object") {
    return undefined;
  }
  const inner = field(params, "event") ?? field(params, "update");
  const ev = (inner && typeof inner === "object" ? inner : params) as SessionEvent;
  if (typeof ev.type !== "string") {
    return undefined;
  }
  if (!ev.sessionId && typeof field(params, "sessionId") === "string") {
    ev.sessionId = field(params, "sessionId") as string;
  }
  return ev;
}

function oneLine(value: unknown): string {
  return String(value ?? "").replace(/\s*\n\s*/g, " ");
}

/**
 * The text the output channel shows for one event: `inline` continues the current
 * line (streamed chunks); undefined for events the channel does not show.
 */
export function eventText(ev: SessionEvent): { text: string; inline: boolean } | undefined {
  switch (ev.type) {
    case "message_chunk":
      return { text: String(field(ev, "text") ?? ""), inline: true };
    case "thought_chunk":
      return undefined;
    case "user_message":
      return { text: "> " + oneLine(field(ev, "text")), inline: false };
    case "tool_call_started":
      return { text: "▸ " + oneLine(field(ev, "title") ?? field(ev, "toolName") ?? "tool"), inline: false };
    case "tool_call_finished": {
      const mark = field(ev, "status") === "failed" ? "✗" : "✓";
      const code = field(ev, "exitCode");
      const tail = code !== undefined ? ` (exit ${code})` : "";
      return { text: `${mark} ${field(ev, "toolCallId") ?? ""}${tail}`, inline: false };
    }
    case "memory_reminder":
      return { text: oneLine(field(ev, "text")), inline: false };
    case "memory_proposal":
      return { text: `Memory proposal ${field(ev, "recordId")}: ${oneLine(field(ev, "content"))}`, inline: false };
    case "memory_cleared":
      return { text: "Memory: bank cleared", inline: false };
    case "handoff_offer":
      return {
        text: `Handoff available: ${field(ev, "source")} (${field(ev, "count")} entries) — Clio: Seed From Handoff`,
        inline: false,
      };
    case "notice":
      return { text: `[${field(ev, "level") ?? "info"}] ${oneLine(field(ev, "text"))}`, inline: false };
    case "plan": {
      const entries = (field(ev, "entries") as unknown[] | undefined) ?? [];
      const lines = entries.map((e) => `  - [${field(e, "status")}] ${oneLine(field(e, "content"))}`);
      return { text: ["Plan:", ...lines].join("\n"), inline: false };
    }
    case "turn_ended":
      return { text: `── turn ended: ${field(ev, "stopReason")}`, inline: false };
    default:
      return undefined;
  }
}

/**
 * Memory tier and last decision for the status bar, from a `clio.memory.show` answer
 * (`{board, proposals, …}`) or a bare board.
 */
export function boardStatus(shown: unknown): { tier: string; lastDecision: string | undefined } {
  const board = field(shown, "board") ?? shown;
  const tier = String(field(board, "tier") ?? "?");
  let last = field(board, "lastDecision");
  if (last && typeof last === "object") {
    last = field(last, "decision") ?? field(last, "name");
  }
  return { tier, lastDecision: last === undefined ? undefined : String(last) };
}

/** The status-bar text: `Clio: <tier> · <last decision>`. */
export function statusText(board: unknown): string {
  const { tier, lastDecision } = boardStatus(board);
  return `$(database) Clio: ${tier}${lastDecision ? " · " + lastDecision : ""}`;
}

/** A pending proposal a person can approve or reject. */
export interface Proposal {
  id: string;
  content: string;
}

/** Pending proposals listed on a board (`proposals` or `pending`), best effort. */
export function boardProposals(board: unknown): Proposal[] {
  const list = (field(board, "proposals") ?? field(board, "pending")) as unknown;
  if (!Array.isArray(list)) {
    return [];
  }
  const out: Proposal[] = [];
  for (const item of list) {
    if (typeof item === "string") {
      out.push({ id: item, content: item });
      continue;
    }
    const id = field(item, "id") ?? field(item, "recordId") ?? field(item, "proposalId");
    if (typeof id === "string") {
      out.push({ id, content: String(field(item, "content") ?? field(item, "text") ?? id) });
    }
  }
  return out;
}

/** The proposal id a memory diagnostic carries in `data`, if any. */
export function diagnosticProposalId(source: unknown, data: unknown): string | undefined {
  if (source !== MEMORY_SOURCE) {
    return undefined;
  }
  const id = field(data, "proposalId");
  return typeof id === "string" && id ? id : undefined;
}

/** A readable Markdown rendering of any JSON value (board, usage, session list). */
export function renderMarkdown(value: unknown, indent = ""): string[] {
  if (value === null || value === undefined) {
    return [indent + "(none)"];
  }
  if (typeof value !== "object") {
    return [indent + String(value)];
  }
  const lines: string[] = [];
  const entries = Array.isArray(value)
    ? value.map((v) => ["-", v] as [string, unknown])
    : Object.keys(value as object)
        .sort()
        .map((k) => [k + ":", (value as Record<string, unknown>)[k]] as [string, unknown]);
  if (entries.length === 0) {
    return [indent + "(none)"];
  }
  for (const [label, v] of entries) {
    if (v !== null && typeof v === "object") {
      lines.push(`${indent}- ${label}`);
      lines.push(...renderMarkdown(v, indent + "  "));
    } else {
      lines.push(`${indent}- ${label} ${oneLine(v)}`);
    }
  }
  return lines;
}
