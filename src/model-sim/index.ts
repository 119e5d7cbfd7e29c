export { startModelSimulator, type ModelSimulator, type ModelSimulatorOptions } from './server.js';
export { reply, httpError, hang, dropConnection, newId, ReplyBuilder } from './replies.js';
export { scripted, type ScriptStep } from './policies/scripted.js';
export {
  answeringSummaries,
  isSummaryRequest,
  summaryReply,
  SUMMARY_REQUEST_MARKER,
} from './policies/summary.js';
export {
  oracle,
  oracleStep,
  planEdits,
  editFor,
  readConversation,
  type Conversation,
  type OracleCall,
  type OracleOptions,
  type OracleStep,
} from './policies/oracle.js';
export {
  applyPatch,
  applyFileHunks,
  hunkHeader,
  PatchDoesNotApply,
  type AppliedFile,
  type AppliedHunk,
} from './git-apply.js';
export {
  parseUnifiedDiff,
  hunkOldText,
  hunkNewText,
  type DiffLine,
  type FilePatch,
  type Hunk,
} from './unified-diff.js';
export { countTokens, PromptCache, type InputUsage } from './usage.js';
export {
  applyContextManagement,
  CLEARED_TOOL_RESULT,
  CONTEXT_MANAGEMENT_BETA,
  type AppliedEdit,
  type ContextManagementResponse,
} from './context-management.js';
export type * from './types.js';
export { isReply } from './types.js';
