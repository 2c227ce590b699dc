// The S3 endpoint alone in its own process, as in production (clients run elsewhere). Prints its
// port, serves until SIGTERM. Reads BERTH_DATA_DIR like `berth serve`.
import { pino } from 'pino';
import { loadConfig } from '../../src/config/index.js';
import { createContext } from '../../src/context.js';
import { tuneHeapForServing } from '../../src/heap-tuning.js';

tuneHeapForServing(); // as `berth serve` does

const ctx = await createContext(loadConfig({ ...process.env, BERTH_S3_PORT: '0' }), {
  logger: pino({ level: 'silent' }),
});
const server = await ctx.services.objectStorage.serveEndpoint();
process.stdout.write(`PORT ${server.port}\n`);
process.once('SIGTERM', () => {
  void server
    .close()
    .then(() => ctx.close())
    .then(() => process.exit(0));
});
