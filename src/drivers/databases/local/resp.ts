// Just enough of the Redis protocol (RESP2) for the driver's own calls: AUTH, PING, INFO, ACL LOAD.
// Berth's runtime dependencies stay free of a Redis client library for a handful of commands.
import net from 'node:net';

export type RespValue = string | number | null | RespValue[] | Error;

function encode(args: string[]): Buffer {
  const parts = [`*${args.length}\r\n`];
  for (const arg of args) parts.push(`$${Buffer.byteLength(arg)}\r\n${arg}\r\n`);
  return Buffer.from(parts.join(''));
}

/** Parses one reply at `offset`; undefined when the buffer does not yet hold all of it. */
function parse(buffer: Buffer, offset: number): { value: RespValue; next: number } | undefined {
  const end = buffer.indexOf('\r\n', offset);
  if (end < 0) return undefined;
  const type = String.fromCharCode(buffer[offset] ?? 0);
  const line = buffer.toString('utf8', offset + 1, end);
  switch (type) {
    case '+':
      return { value: line, next: end + 2 };
    case '-':
      return { value: new Error(line), next: end + 2 };
    case ':':
      return { value: Number(line), next: end + 2 };
    case '$': {
      const length = Number(line);
      if (length < 0) return { value: null, next: end + 2 };
      if (buffer.length < end + 2 + length + 2) return undefined;
      return { value: buffer.toString('utf8', end + 2, end + 2 + length), next: end + 2 + length + 2 };
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return { value: null, next: end + 2 };
      const items: RespValue[] = [];
      let next = end + 2;
      for (let i = 0; i < count; i += 1) {
        const item = parse(buffer, next);
        if (!item) return undefined;
        items.push(item.value);
        next = item.next;
      }
      return { value: items, next };
    }
    default:
      throw new Error(`unexpected RESP reply type '${type}'`);
  }
}

/** Sends the commands on one connection and resolves with one reply per command. */
export function respCommands(port: number, commands: string[][], timeoutMs = 5000): Promise<RespValue[]> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    let buffer = Buffer.alloc(0);
    const replies: RespValue[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no reply from 127.0.0.1:${port} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    // The server may close the connection (ACL LOAD drops clients of changed users).
    socket.once('close', () => {
      clearTimeout(timer);
      if (replies.length < commands.length) reject(new Error(`connection to 127.0.0.1:${port} closed`));
    });
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      let offset = 0;
      for (;;) {
        const parsed = parse(buffer, offset);
        if (!parsed) break;
        replies.push(parsed.value);
        offset = parsed.next;
      }
      buffer = buffer.subarray(offset);
      if (replies.length >= commands.length) {
        clearTimeout(timer);
        socket.destroy();
        resolve(replies);
      }
    });
    socket.once('connect', () => socket.write(Buffer.concat(commands.map(encode))));
  });
}
