// The floor of a reverse proxy written on Node's http module, for the edge measurement: every request
// forwarded to one upstream over a keep-alive agent and the answer piped back, nothing else (no routing
// by Host, no header rewriting, no accounting, no retry). Started with fork() by index.ts with the
// upstream's port; sends back the port it listens on, and its CPU time when asked.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const upstreamPort = Number(process.argv[2]);
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

const server = http.createServer((req, res) => {
  const forward = http.request(
    { host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers: req.headers, agent },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  forward.on('error', () => {
    res.statusCode = 502;
    res.end();
  });
  req.pipe(forward);
});

server.listen(0, '127.0.0.1', () => {
  process.send?.({ port: (server.address() as AddressInfo).port });
});

process.on('message', (message) => {
  if (message === 'cpu') process.send?.({ cpu: process.cpuUsage() });
  if (message === 'stop') {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  }
});
