/**
 * The image's non-root user, which every sandbox process runs as and which owns the workspace
 * tmpfs. The host never shares a directory with the container, so no host ownership has to match it.
 */
export const AGENT_UID = 1000;
export const AGENT_GID = 1000;
