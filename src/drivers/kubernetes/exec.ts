// A command in a running container over the exec WebSocket of @kubernetes/client-node (subprotocols
// v4/v5.channel.k8s.io): stdout and stderr collected up to a cap, the exit code from the status channel.
import { Writable } from 'node:stream';
import * as k8s from '@kubernetes/client-node';
import { KubernetesApiError, wrapError } from './errors.js';

export interface ExecOptions {
  /** Output kept (stdout and stderr interleaved as they arrive); past it `truncated` is true. */
  maxOutputBytes: number;
  /** After this long the command's stream is closed and it answers exitCode null. */
  timeoutMs: number;
  /** Aborting closes the stream and rejects with the signal's reason (as the local driver's exec). */
  signal?: AbortSignal;
  /** Each chunk of output as it arrives (a deployment's log). */
  onOutput?: (chunk: Buffer) => void;
}

export interface ExecResult {
  /** null: no exit status came (timed out, or the stream ended without one). */
  exitCode: number | null;
  output: string;
  truncated: boolean;
}

/** An exec stream's V1Status, as an exit code: Success is 0, NonZeroExitCode carries its code. */
function exitCodeOf(status: k8s.V1Status): number | undefined {
  if (status.status === 'Success') return 0;
  const cause = status.details?.causes?.find((c) => c.reason === 'ExitCode');
  if (status.reason === 'NonZeroExitCode' && cause?.message !== undefined) return Number(cause.message);
  return undefined;
}

export async function execIn(
  kc: k8s.KubeConfig,
  server: string,
  target: { namespace: string; pod: string; container: string; command: string[] },
  options: ExecOptions,
): Promise<ExecResult> {
  options.signal?.throwIfAborted();
  const chunks: Buffer[] = [];
  let kept = 0;
  let truncated = false;
  const collector = () =>
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        options.onOutput?.(chunk);
        const room = options.maxOutputBytes - kept;
        if (chunk.length > room) truncated = true;
        if (room > 0) {
          const part = chunk.subarray(0, room);
          chunks.push(part);
          kept += part.length;
        }
        done();
      },
    });
  let status: k8s.V1Status | undefined;
  let socket: Awaited<ReturnType<k8s.Exec['exec']>>;
  try {
    socket = await new k8s.Exec(kc).exec(
      target.namespace,
      target.pod,
      target.container,
      target.command,
      collector(),
      collector(),
      null,
      false,
      (answer) => (status = answer),
    );
  } catch (error) {
    const wrapped = wrapError(error, server);
    if (wrapped instanceof KubernetesApiError)
      wrapped.message = `exec in pod ${target.namespace}/${target.pod} (${target.container}) refused: ${wrapped.message}`;
    throw wrapped;
  }
  let timedOut = false;
  await new Promise<void>((resolve) => {
    const close = () => socket.close();
    const timer = setTimeout(() => {
      timedOut = true;
      close();
    }, options.timeoutMs);
    options.signal?.addEventListener('abort', close, { once: true });
    const done = () => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', close);
      resolve();
    };
    if (socket.readyState === socket.CLOSED) done();
    else socket.addEventListener('close', done);
  });
  options.signal?.throwIfAborted();
  const output = Buffer.concat(chunks).toString('utf8');
  const code = status && !timedOut ? exitCodeOf(status) : undefined;
  // A Failure without an exit code is the API's refusal (no such container, not running…).
  if (status && !timedOut && code === undefined && status.status !== 'Success')
    throw new KubernetesApiError(status.code ?? 500, status.reason, status.message ?? 'exec failed');
  return { exitCode: code ?? null, output, truncated };
}
