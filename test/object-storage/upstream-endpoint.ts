// Berth's S3 endpoint alone in its own process, configured by its environment as `berth serve` is
// (upstream.test.ts kills it with SIGKILL mid-upload). Prints `PORT <n>` once it listens.
import { pino } from 'pino';
import { loadConfig } from '../../src/config/index.js';
import { createContext } from '../../src/context.js';

const ctx = await createContext(loadConfig(process.env), { logger: pino({ level: 'silent' }) });
const server = await ctx.services.objectStorage.serveEndpoint();
process.stdout.write(`PORT ${server.port}\n`);
