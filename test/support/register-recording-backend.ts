// Preloaded by a test into an entry point's process (`--import`): adds the recording backend to the
// table of sandbox backends, wrapping the isolated local one, with its records in the file that
// ISSUE_AGENT_TEST_RECORDING_LOG names. Only a test's process ever loads this file.
import { addBackendForTests, loadBackend } from '../../src/sandbox/backends.js';
import { RECORDING_KIND, RECORDING_LOG_ENV, recordingBackend } from './recording-backend.js';

const log = process.env[RECORDING_LOG_ENV];
if (log === undefined || log === '') throw new Error(`${RECORDING_LOG_ENV} is not set`);
addBackendForTests(RECORDING_KIND, async () => recordingBackend(await loadBackend('local'), log));
