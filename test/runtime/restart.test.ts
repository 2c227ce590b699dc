// The data plane outlives Berth (issue 25): under a steady load through the edge, a SIGTERM restart of
// Berth and a kill -9 followed by a start each fail no request; the replica and the worker are the same
// processes after both, and the replica's connection to its redis service is the same connection.
// A real `berth serve` process.
import http from 'node:http';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { createRepository } from '../helpers/git-server.js';
import { alive, serveBerth, stopBerth, type BerthProcess, useBerthProcesses } from './berth-process.js';
import { edgeRequest, eventually } from './helpers.js';

/** Answers with its pid and the id of its one redis connection, opened at start and kept. */
const SERVER_JS = `
const http = require('node:http');
const net = require('node:net');
const url = new URL(process.env.REDIS_URL);
const socket = net.connect(Number(url.port), url.hostname);
const waiting = [];
let buffered = '';
socket.on('data', (chunk) => {
  buffered += chunk;
  let end;
  while ((end = buffered.indexOf('\\r\\n')) >= 0) {
    const line = buffered.slice(0, end);
    buffered = buffered.slice(end + 2);
    waiting.shift()?.(line);
  }
});
socket.on('close', () => process.exit(1));
const command = (...args) => new Promise((resolve) => {
  waiting.push(resolve);
  socket.write('*' + args.length + '\\r\\n' + args.map((a) => '$' + Buffer.byteLength(a) + '\\r\\n' + a + '\\r\\n').join(''));
});
command('AUTH', decodeURIComponent(url.username), decodeURIComponent(url.password));
http.createServer(async (req, res) => {
  if (req.url === '/health') return res.end('ok');
  res.end(JSON.stringify({ pid: process.pid, connection: await command('CLIENT', 'ID') }));
}).listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
`;

const DOCUMENT = (url: string) =>
  stringify({
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name: 'steady', team: 'default' },
    spec: {
      application: {
        name: 'steady',
        type: 'nodejs',
        repository: { url, branch: 'main' },
        commands: { build: [], start: 'node server.js' },
        settings: { health_check_path: '/health', replicas: 1, memory: '128Mi' },
      },
      domains: [{ domain: 'steady.test' }],
      services: [
        { name: 'cache', type: 'redis', memory: '64Mi' },
        { name: 'ticker', type: 'worker', command: 'node ticker.js', memory: '64Mi' },
      ],
    },
  });

/** Requests through the edge, one after the other on each of `lanes` keep-alive connections, until stopped. */
function steadyLoad(port: number, lanes: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: lanes });
  const failures: string[] = [];
  const answers: Array<{ pid: number; connection: string }> = [];
  let running = true;
  const lane = async () => {
    while (running) {
      try {
        const answer = await edgeRequest(port, 'steady.test', '/', { agent, timeoutMs: 5000 });
        if (answer.status === 200)
          answers.push(JSON.parse(answer.body) as { pid: number; connection: string });
        else failures.push(`${answer.status} ${answer.body}`);
      } catch (error) {
        failures.push((error as Error).message);
      }
    }
  };
  const done = Promise.all(Array.from({ length: lanes }, lane));
  return {
    failures,
    answers,
    async stop() {
      running = false;
      await done;
      agent.destroy();
    },
  };
}

describe('a restart of Berth under load', () => {
  let berth: BerthProcess | undefined;
  const { dataDir, gitRoot, git } = useBerthProcesses('restart', () => berth);

  it('fails no request, keeps the replica, the worker and the service connection, after SIGTERM and after kill -9', async () => {
    berth = await serveBerth(dataDir);
    const edgePort = berth.edgePort;
    const repository = createRepository(gitRoot, 'steady');
    repository.commit({
      'server.js': SERVER_JS,
      'ticker.js': "setInterval(() => console.log('tick'), 200);",
      'package.json': '{"name":"steady","version":"1.0.0"}',
    });
    const applied = await berth.call<{ application_id: number; deployment_id: number }>(
      'POST',
      '/api/v1/infrastructure/apply',
      DOCUMENT(git().url('steady')),
    );
    const appId = applied.application_id;
    const active = async () => {
      const { data } = await berth!.call<{ data: { status: string } }>(
        'GET',
        `/api/v1/applications/${appId}/status`,
      );
      return data.status === 'active' || undefined;
    };
    await eventually(active, 90_000, 'the application to be active');
    const first = JSON.parse((await edgeRequest(edgePort, 'steady.test', '/')).body) as {
      pid: number;
      connection: string;
    };
    expect(first.connection).toMatch(/^:\d+$/);
    const instances = async () =>
      (
        await berth!.call<{ data: Array<{ name: string; pid: number | null; state: string }> }>(
          'GET',
          `/api/v1/applications/${appId}/instances`,
        )
      ).data
        .map((i) => ({ kind: i.name.split('-')[0], pid: i.pid, state: i.state }))
        .sort((a, b) => a.kind!.localeCompare(b.kind!));
    const processes = await eventually(
      async () => {
        const now = await instances();
        return now.every((i) => i.state === 'running') && now.length === 2 ? now : undefined;
      },
      30_000,
      'the replica and the worker to run',
    );
    expect(processes.map((i) => i.kind)).toEqual(['web', 'worker']);
    const ticks = async () =>
      (
        await berth!.call<{ data: Array<{ source: string; line: string }> }>(
          'GET',
          `/api/v1/applications/${appId}/logs?tail=1000`,
        )
      ).data.filter((line) => line.source.startsWith('worker-') && line.line === 'tick').length;

    const load = steadyLoad(edgePort, 4);
    try {
      for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
        const before = load.answers.length;
        await stopBerth(berth, signal);
        // Down: the application still answers.
        await eventually(
          () => Promise.resolve(load.answers.length > before + 20 || undefined),
          10_000,
          `answers while Berth is down after ${signal}`,
        );
        berth = await serveBerth(dataDir, edgePort);
        await eventually(active, 30_000, `the application to be active after ${signal}`);
        // The same processes, adopted; the worker's output (written while Berth was down too) is read.
        expect(await instances()).toEqual(processes);
        const seen = await ticks();
        await eventually(
          async () => (await ticks()) > seen || undefined,
          10_000,
          'ticks of the adopted worker',
        );
        const after = load.answers.length;
        await eventually(
          () => Promise.resolve(load.answers.length > after + 20 || undefined),
          10_000,
          `answers after the start that followed ${signal}`,
        );
      }
    } finally {
      await load.stop();
    }
    expect(load.failures).toEqual([]);
    expect(new Set(load.answers.map((a) => `${a.pid}/${a.connection}`))).toEqual(
      new Set([`${first.pid}/${first.connection}`]),
    );
    expect(alive(first.pid)).toBe(true);
  }, 240_000);
});
