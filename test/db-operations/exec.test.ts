// Engine tool plumbing: failures carry codes and redacted stderr; pipes stream between the processes.
import { describe, expect, it } from 'vitest';
import { runCommand, runPipeline } from '../../src/drivers/databases/operations/exec.js';

describe('engine tool processes', () => {
  it('streams producer to consumer without buffering the data here', async () => {
    // 64 MiB through the pipe; the consumer reports the byte count.
    const bytes = 64 * 1024 * 1024;
    const out = await runPipeline(
      { command: 'head', args: ['-c', String(bytes), '/dev/zero'] },
      { command: 'sh', args: ['-c', 'wc -c >&2'] },
    );
    expect(Number(out.consumerStderr.trim())).toBe(bytes);
  });

  it('reports the failing side with COMMAND_FAILED (or the given code) and redacted stderr', async () => {
    await expect(
      runPipeline(
        { command: 'sh', args: ['-c', 'echo "auth failed for hunter2" >&2; exit 3'] },
        { command: 'cat', args: [] },
        { secrets: ['hunter2'] },
      ),
    ).rejects.toMatchObject({
      code: 'COMMAND_FAILED',
      message: 'sh failed (exit code 3): auth failed for ***',
    });
    await expect(
      runPipeline(
        { command: 'head', args: ['-c', '1000000', '/dev/zero'] },
        { command: 'sh', args: ['-c', 'echo "restore broke" >&2; exit 1'] },
        { failureCode: 'MIGRATION_FAILED' },
      ),
    ).rejects.toMatchObject({
      code: 'MIGRATION_FAILED',
      message: expect.stringContaining('restore broke') as unknown,
    });
    await expect(runCommand({ command: '/nonexistent/tool', args: [] })).rejects.toMatchObject({
      code: 'COMMAND_FAILED',
    });
  });
});
