/**
 * Read-only view of a workspace. Paths are relative to the repository root and use '/'.
 * Implementations return null / false for anything missing or unreadable rather than throwing.
 */
export interface WorkspaceProbe {
  exists(relPath: string): Promise<boolean>;
  /** The file's text, or null when it does not exist, is not a regular file, or cannot be read. */
  readText(relPath: string): Promise<string | null>;
  /** Entry names (not paths) of a directory, or null when it is not a directory. */
  listDir(relPath: string): Promise<readonly string[] | null>;
}
