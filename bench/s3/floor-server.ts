// The least any S3 endpoint written in Node must do for a single-part PUT, in its own process like
// the real endpoint: receive the body over node:http and (header x-floor: md5) hash it with MD5 for
// the ETag. No authentication, no file, no metadata. bench/s3/index.ts measures it beside the endpoint
// to show how much of the file-write baseline is reachable at all on this machine.
import { createHash } from 'node:crypto';
import http from 'node:http';

const server = http.createServer((req, res) => {
  const md5 = req.headers['x-floor'] === 'md5' ? createHash('md5') : undefined;
  req.on('data', (chunk: Buffer) => md5?.update(chunk));
  req.on('end', () => {
    res.writeHead(200, { etag: `"${md5?.digest('hex') ?? ''}"`, 'content-length': 0 });
    res.end();
  });
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`PORT ${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.once('SIGTERM', () => server.close(() => process.exit(0)));
