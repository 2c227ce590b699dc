import http from 'node:http';
import { connect } from './db.js';

const db = connect();

const server = http.createServer((req, res) => {
  if (req.url === '/health') {
    res.end('ok');
    return;
  }
  void (async () => {
    await db.query('INSERT INTO visits () VALUES ()');
    const [rows] = await db.query('SELECT COUNT(*) AS n FROM visits');
    const visits = Number((rows as Array<{ n: number }>)[0]?.n);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ visits, node_env: process.env.NODE_ENV }) + '\n');
  })().catch((error: unknown) => {
    res.statusCode = 500;
    res.end(`${String(error)}\n`);
  });
});

// Berth gives the port; the edge reaches the replica on loopback, so nothing else needs to.
const port = Number(process.env.PORT ?? 3000);
server.listen(port, '127.0.0.1', () => console.log(`shop listening on 127.0.0.1:${port}`));

// A replica being replaced gets SIGTERM: finish the requests under way, then leave.
process.on('SIGTERM', () => server.close(() => void db.end().then(() => process.exit(0))));
