/**
 * Names a running shell's framework or its own state depends on: the shell session's `__ia_*`
 * variables, the cwd it reports (`PWD`, `OLDPWD`), `read`'s default timeout (`TMOUT`) and POSIX
 * mode (`POSIXLY_CORRECT`). A repository may not set them (config/repo-config.ts), and a started
 * sandbox refuses them as a job's variables (DockerSandbox.useEnvironment), so no job gets one in
 * the harness's shells.
 */
export const SHELL_OWN = /^(__ia_.*|PWD|OLDPWD|TMOUT|POSIXLY_CORRECT)$/i;
