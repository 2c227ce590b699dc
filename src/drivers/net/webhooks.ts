// How team webhooks leave Berth: through the tools' address guard (BERTH_TOOLS_ALLOW_PRIVATE), whose
// resolve() is called at registration and again at every send, connecting to the address it checked (no
// DNS rebinding between check and connect). Redirects are not followed; an answer is read up to a cap.
import { guardedFetch } from './fetch.js';
import { BlockedAddressError, type AddressGuard } from './guard.js';

export interface WebhookTransportLimits {
  /** The whole attempt: connect, send, answer. */
  timeoutMs: number;
  /** Bytes of the answer read (the rest is dropped, not an error). */
  maxResponseBytes: number;
}

export const DEFAULT_WEBHOOK_LIMITS: WebhookTransportLimits = {
  timeoutMs: 10_000,
  maxResponseBytes: 64 * 1024,
};

export function createWebhookTransport(guard: AddressGuard, limits = DEFAULT_WEBHOOK_LIMITS) {
  return {
    async refusal(url: URL): Promise<string | undefined> {
      try {
        await guard.resolve(url);
        return undefined;
      } catch (error) {
        if (error instanceof BlockedAddressError) return error.reason;
        throw error;
      }
    },
    async post(url: string, headers: Record<string, string>, body: string) {
      const answer = await guardedFetch(
        guard,
        { url, method: 'POST', headers, body: Buffer.from(body) },
        {
          timeoutMs: limits.timeoutMs,
          maxBytes: limits.maxResponseBytes,
          overflow: 'truncate',
          signal: AbortSignal.timeout(limits.timeoutMs),
        },
      );
      return { status: answer.status, body: answer.body };
    },
  };
}
