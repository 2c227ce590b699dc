// An HTTP endpoint on a free loopback port that records what it receives and answers each request with
// the next status of a script (then 200): where tests receive Berth's webhooks.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface WebhookSink {
  url: string;
  received: ReceivedRequest[];
  /** The statuses the next requests get, in order (200 once the script is used up). */
  answer(...statuses: number[]): void;
  close(): Promise<void>;
}

export async function startWebhookSink(): Promise<WebhookSink> {
  const received: ReceivedRequest[] = [];
  const script: number[] = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push({
        method: request.method ?? '',
        url: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      const status = script.shift() ?? 200;
      response.writeHead(status, { 'content-type': 'text/plain' });
      response.end(status < 300 ? 'thanks' : 'not now');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    answer: (...statuses) => script.push(...statuses),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
