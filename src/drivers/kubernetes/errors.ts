// The errors of the Kubernetes client: the API server's refusals with its status, reason and message,
// and a server that could not be reached, named. Neither carries a credential.
import * as k8s from '@kubernetes/client-node';

/** A failed answer of the API server: its status code, reason (`NotFound`, `Forbidden`…) and message. */
export class KubernetesApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly reason: string | undefined,
    message: string,
  ) {
    super(message);
    this.name = 'KubernetesApiError';
  }
}

/** The API server could not be reached at all (refused, unresolvable, TLS refused, no answer in time). */
export class KubernetesUnreachableError extends Error {
  constructor(
    readonly server: string,
    readonly detail: string,
  ) {
    super(`cannot reach the Kubernetes API server ${server}: ${detail}`);
    this.name = 'KubernetesUnreachableError';
  }
}

/** The API's Status answer, read into an error (its message names the object; it holds no credential). */
export function apiError(statusCode: number, text: string): KubernetesApiError {
  let status: { reason?: string; message?: string } = {};
  try {
    status = JSON.parse(text) as typeof status;
  } catch {
    // Not a Status (a proxy's page): its first line says enough.
  }
  const message = status.message ?? (text.split('\n')[0]?.slice(0, 200) || `HTTP ${statusCode}`);
  return new KubernetesApiError(statusCode, status.reason, message);
}

export function connectionDetail(error: Error & { code?: string }): string {
  return error.code && !error.message.includes(error.code) ? `${error.code} ${error.message}` : error.message;
}

/** Any error of the client's calls or of @kubernetes/client-node (the exec WebSocket), as one of these. */
export function wrapError(error: unknown, server: string): Error {
  if (error instanceof KubernetesApiError || error instanceof KubernetesUnreachableError) return error;
  if (error instanceof k8s.ApiException) {
    const body = typeof error.body === 'string' ? error.body : JSON.stringify(error.body ?? '');
    return apiError(error.code, body);
  }
  // The exec WebSocket's handshake: `Unexpected server response: 403`.
  const message = (error as { message?: unknown }).message;
  const text = typeof message === 'string' ? message : String(error);
  const refused = /Unexpected server response: (\d{3})/.exec(text);
  if (refused) return new KubernetesApiError(Number(refused[1]), undefined, text);
  return new KubernetesUnreachableError(server, text);
}
