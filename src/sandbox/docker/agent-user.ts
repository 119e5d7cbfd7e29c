/**
 * The image's non-root user, which the agent's commands (and setup, and MCP servers) run as and
 * which owns the workspace tmpfs. The host never shares a directory with the container, so no host
 * ownership has to match it.
 */
export const AGENT_UID = 1000;
export const AGENT_GID = 1000;

/**
 * The image's second unprivileged user, which every harness command runs as: the verdict's test
 * runs, checkpoints, diffs and file operations. Another uid than the agent's, so no process of the
 * agent can trace, signal or open the `/proc` entries (descriptors, environment, memory) of one of
 * the harness's. Its group is the agent's: the two share the workspace and HOME through group
 * permissions (both shells create files group-writable, umask 0002).
 */
export const HARNESS_UID = 1001;

/**
 * The harness's bash: a copy the harness user may execute but not read (root's, mode 0711). The
 * kernel makes a process started from a file its user cannot read non-dumpable, so no process of
 * the harness user either — a test or a git filter the agent wrote, run by a harness command — can
 * trace the harness's shell or open its descriptors or memory; it can only signal it.
 */
export const HARNESS_BASH = '/usr/local/libexec/issue-agent/harness-bash';
