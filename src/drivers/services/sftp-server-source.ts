// The SFTP server as it runs inside its jail (./sftp.ts starts it): `node -e` with this source, as the
// application's OS account, in a bubblewrap jail whose only writable thing is the volume at /data. Plain
// CommonJS so that it runs as is from src (tsx) and dist builds alike; ssh2's path comes in argv[1].
//
// stdin: one JSON object (username, password, host key, port), read to its end, so that no secret is in
// argv or in the environment. stdout: one JSON event per line (listening, login, refused, error) for
// Berth's log; never a password.
//
// Paths are the client's, resolved against `/` = the volume: `..` stops at `/`. Symlinks inside the
// volume are followed only while they stay in it (each operation resolves them first); the jail is what
// holds when that check races with the application changing a link: outside /data there is only a
// read-only /usr, a private /dev and /tmp, and ssh2's read-only modules.
export const SFTP_SERVER_SOURCE = String.raw`
'use strict';
const fs = require('node:fs');
const path = require('node:path').posix;
const crypto = require('node:crypto');
const { Server, utils } = require(process.argv[1]);

const ROOT = '/data';
const { STATUS_CODE, OPEN_MODE } = utils.sftp;
const MAX_READ = 256 * 1024;
const MAX_HANDLES = 256;
const MAX_CLIENTS = 32;
const MAX_AUTH_FAILURES = 5;
const DIR_BATCH = 100;

function emit(event) {
  process.stdout.write(JSON.stringify(event) + '\n');
}

function digest(value) {
  return crypto.createHash('sha256').update(String(value), 'utf8').digest();
}

function readConfig() {
  const chunks = [];
  let size = 0;
  const buffer = Buffer.alloc(65536);
  for (;;) {
    let n;
    try {
      n = fs.readSync(0, buffer, 0, buffer.length, null);
    } catch (error) {
      if (error.code === 'EAGAIN') continue;
      throw error;
    }
    if (n === 0) break;
    size += n;
    if (size > 1024 * 1024) throw new Error('configuration too large');
    chunks.push(Buffer.from(buffer.subarray(0, n)));
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

const config = readConfig();
const expectedUser = digest(config.username);
const expectedPassword = digest(config.password);
delete config.password;

function failure(code, message) {
  const error = new Error(message);
  error.code = code;
  return error;
}

const inside = (real) => real === ROOT || real.startsWith(ROOT + '/');

/** The client's path as a path of the volume: absolute, normalised, never above '/'. */
function virtualPath(raw) {
  if (typeof raw !== 'string' || raw.includes('\0')) throw failure('EINVAL', 'invalid path');
  return path.resolve('/', raw);
}

function hostPath(virtual) {
  return virtual === '/' ? ROOT : ROOT + virtual;
}

/**
 * Where a client's path is under /data, its parent's symlinks resolved (they must stay inside the
 * volume), and the last component's too when follow is set. A link leaving the volume is refused.
 */
function resolve(raw, follow) {
  const virtual = virtualPath(raw);
  if (virtual === '/') return ROOT;
  const target = hostPath(virtual);
  const parent = fs.realpathSync(path.dirname(target));
  if (!inside(parent)) throw failure('EACCES', 'outside the volume');
  const candidate = path.join(parent, path.basename(target));
  if (!follow) return candidate;
  let real;
  try {
    real = fs.realpathSync(candidate);
  } catch (error) {
    if (error.code !== 'ENOENT') throw error;
    // A dangling link would be created through: refused, whatever it names.
    let link = false;
    try {
      link = fs.lstatSync(candidate).isSymbolicLink();
    } catch {}
    if (link) throw failure('EACCES', 'a link that leads nowhere');
    return candidate;
  }
  if (!inside(real)) throw failure('EACCES', 'outside the volume');
  return real;
}

function statusOf(error) {
  switch (error && error.code) {
    case 'ENOENT':
    case 'ENOTDIR':
      return [STATUS_CODE.NO_SUCH_FILE, 'No such file'];
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
    case 'ELOOP':
      return [STATUS_CODE.PERMISSION_DENIED, 'Permission denied'];
    case 'EOPNOTSUPP':
      return [STATUS_CODE.OP_UNSUPPORTED, 'Operation unsupported'];
    default:
      return [STATUS_CODE.FAILURE, (error && error.code) || 'Failure'];
  }
}

function attrsOf(stats) {
  return {
    mode: stats.mode,
    uid: stats.uid,
    gid: stats.gid,
    size: stats.size,
    atime: Math.floor(stats.atimeMs / 1000),
    mtime: Math.floor(stats.mtimeMs / 1000),
  };
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

function longname(name, stats) {
  const type = stats.isDirectory() ? 'd' : stats.isSymbolicLink() ? 'l' : '-';
  let perms = '';
  for (let shift = 6; shift >= 0; shift -= 3) {
    const bits = (stats.mode >> shift) & 7;
    perms += (bits & 4 ? 'r' : '-') + (bits & 2 ? 'w' : '-') + (bits & 1 ? 'x' : '-');
  }
  const date = stats.mtime;
  const when = MONTHS[date.getUTCMonth()] + ' ' + String(date.getUTCDate()).padStart(2) + ' ' +
    String(date.getUTCFullYear()).padStart(5);
  return type + perms + ' 1 ' + stats.uid + ' ' + stats.gid + ' ' + String(stats.size).padStart(10) + ' ' +
    when + ' ' + name;
}

function openFlags(flags) {
  let result;
  const read = flags & OPEN_MODE.READ;
  const write = flags & OPEN_MODE.WRITE;
  if (read && write) result = fs.constants.O_RDWR;
  else if (write) result = fs.constants.O_WRONLY;
  else result = fs.constants.O_RDONLY;
  if (flags & OPEN_MODE.APPEND) result |= fs.constants.O_APPEND;
  if (flags & OPEN_MODE.CREAT) result |= fs.constants.O_CREAT;
  if (flags & OPEN_MODE.TRUNC) result |= fs.constants.O_TRUNC;
  if (flags & OPEN_MODE.EXCL) result |= fs.constants.O_EXCL;
  // resolve() has followed the links it allows; one planted since is not followed.
  return result | fs.constants.O_NOFOLLOW;
}

function applyAttrs(attrs, target, fd) {
  if (!attrs) return;
  if (typeof attrs.size === 'number') {
    if (fd !== undefined) fs.ftruncateSync(fd, attrs.size);
    else fs.truncateSync(target, attrs.size);
  }
  if (typeof attrs.mode === 'number') {
    const mode = attrs.mode & 0o7777 & ~0o6000;
    if (fd !== undefined) fs.fchmodSync(fd, mode);
    else fs.chmodSync(target, mode);
  }
  if (typeof attrs.atime === 'number' && typeof attrs.mtime === 'number') {
    if (fd !== undefined) fs.futimesSync(fd, attrs.atime, attrs.mtime);
    else fs.utimesSync(target, attrs.atime, attrs.mtime);
  }
  // uid and gid: every file is the application's; a change is ignored.
}

function serve(sftp) {
  const handles = new Map();
  let next = 1;

  function newHandle(entry) {
    if (handles.size >= MAX_HANDLES) throw failure('EMFILE', 'too many open handles');
    const id = next++;
    handles.set(id, entry);
    const buffer = Buffer.alloc(4);
    buffer.writeUInt32BE(id, 0);
    return buffer;
  }
  function handleOf(buffer, kind) {
    const entry = buffer.length === 4 ? handles.get(buffer.readUInt32BE(0)) : undefined;
    if (!entry || (kind && entry.kind !== kind)) throw failure('EBADF', 'invalid handle');
    return entry;
  }
  function guard(reqid, work) {
    try {
      work();
    } catch (error) {
      const [code, message] = statusOf(error);
      sftp.status(reqid, code, message);
    }
  }
  const ok = (reqid) => sftp.status(reqid, STATUS_CODE.OK);

  sftp.on('OPEN', (reqid, filename, flags, attrs) =>
    guard(reqid, () => {
      const target = resolve(filename, true);
      const mode = attrs && typeof attrs.mode === 'number' ? attrs.mode & 0o777 : 0o644;
      const fd = fs.openSync(target, openFlags(flags), mode);
      try {
        sftp.handle(reqid, newHandle({ kind: 'file', fd }));
      } catch (error) {
        fs.closeSync(fd);
        throw error;
      }
    }),
  );
  sftp.on('READ', (reqid, handle, offset, length) =>
    guard(reqid, () => {
      const { fd } = handleOf(handle, 'file');
      const buffer = Buffer.alloc(Math.min(length, MAX_READ));
      const n = fs.readSync(fd, buffer, 0, buffer.length, offset);
      if (n === 0) sftp.status(reqid, STATUS_CODE.EOF);
      else sftp.data(reqid, buffer.subarray(0, n));
    }),
  );
  sftp.on('WRITE', (reqid, handle, offset, data) =>
    guard(reqid, () => {
      const { fd } = handleOf(handle, 'file');
      let written = 0;
      while (written < data.length) {
        written += fs.writeSync(fd, data, written, data.length - written, offset + written);
      }
      ok(reqid);
    }),
  );
  sftp.on('FSTAT', (reqid, handle) =>
    guard(reqid, () => {
      const entry = handleOf(handle);
      const stats = entry.kind === 'file' ? fs.fstatSync(entry.fd) : fs.statSync(entry.path);
      sftp.attrs(reqid, attrsOf(stats));
    }),
  );
  sftp.on('FSETSTAT', (reqid, handle, attrs) =>
    guard(reqid, () => {
      applyAttrs(attrs, undefined, handleOf(handle, 'file').fd);
      ok(reqid);
    }),
  );
  sftp.on('CLOSE', (reqid, handle) =>
    guard(reqid, () => {
      const entry = handleOf(handle);
      handles.delete(handle.readUInt32BE(0));
      if (entry.kind === 'file') fs.closeSync(entry.fd);
      ok(reqid);
    }),
  );
  sftp.on('OPENDIR', (reqid, dirPath) =>
    guard(reqid, () => {
      const target = resolve(dirPath, true);
      if (!fs.statSync(target).isDirectory()) throw failure('ENOTDIR', 'not a directory');
      const names = fs.readdirSync(target);
      sftp.handle(reqid, newHandle({ kind: 'dir', path: target, names, index: 0 }));
    }),
  );
  sftp.on('READDIR', (reqid, handle) =>
    guard(reqid, () => {
      const entry = handleOf(handle, 'dir');
      const batch = [];
      while (entry.index < entry.names.length && batch.length < DIR_BATCH) {
        const name = entry.names[entry.index++];
        let stats;
        try {
          stats = fs.lstatSync(path.join(entry.path, name));
        } catch {
          continue; // removed meanwhile
        }
        batch.push({ filename: name, longname: longname(name, stats), attrs: attrsOf(stats) });
      }
      if (batch.length === 0) sftp.status(reqid, STATUS_CODE.EOF);
      else sftp.name(reqid, batch);
    }),
  );
  sftp.on('LSTAT', (reqid, target) => guard(reqid, () => sftp.attrs(reqid, attrsOf(fs.lstatSync(resolve(target, false))))));
  sftp.on('STAT', (reqid, target) => guard(reqid, () => sftp.attrs(reqid, attrsOf(fs.statSync(resolve(target, true))))));
  sftp.on('SETSTAT', (reqid, target, attrs) =>
    guard(reqid, () => {
      applyAttrs(attrs, resolve(target, true), undefined);
      ok(reqid);
    }),
  );
  sftp.on('REMOVE', (reqid, target) =>
    guard(reqid, () => {
      fs.unlinkSync(resolve(target, false));
      ok(reqid);
    }),
  );
  sftp.on('RMDIR', (reqid, target) =>
    guard(reqid, () => {
      const resolved = resolve(target, false);
      if (resolved === ROOT) throw failure('EACCES', 'the volume itself');
      fs.rmdirSync(resolved);
      ok(reqid);
    }),
  );
  sftp.on('MKDIR', (reqid, target, attrs) =>
    guard(reqid, () => {
      const mode = attrs && typeof attrs.mode === 'number' ? attrs.mode & 0o777 : 0o755;
      fs.mkdirSync(resolve(target, false), mode);
      ok(reqid);
    }),
  );
  sftp.on('RENAME', (reqid, from, to) =>
    guard(reqid, () => {
      const source = resolve(from, false);
      const destination = resolve(to, false);
      if (source === ROOT || destination === ROOT) throw failure('EACCES', 'the volume itself');
      // SFTP version 3 (OpenSSH): a rename never replaces an existing file.
      let exists = true;
      try {
        fs.lstatSync(destination);
      } catch {
        exists = false;
      }
      if (exists) throw failure('EEXIST', 'the destination exists');
      fs.renameSync(source, destination);
      ok(reqid);
    }),
  );
  sftp.on('REALPATH', (reqid, target) =>
    guard(reqid, () => {
      let virtual = virtualPath(target);
      try {
        const real = fs.realpathSync(hostPath(virtual));
        if (inside(real)) virtual = real === ROOT ? '/' : real.slice(ROOT.length);
      } catch {}
      sftp.name(reqid, [{ filename: virtual, longname: virtual, attrs: {} }]);
    }),
  );
  sftp.on('READLINK', (reqid, target) =>
    guard(reqid, () => {
      const link = fs.readlinkSync(resolve(target, false));
      sftp.name(reqid, [{ filename: link, longname: link, attrs: {} }]);
    }),
  );
  sftp.on('SYMLINK', (reqid) => sftp.status(reqid, STATUS_CODE.OP_UNSUPPORTED, 'Links are not made over SFTP'));
  sftp.on('EXTENDED', (reqid) => sftp.status(reqid, STATUS_CODE.OP_UNSUPPORTED, 'Operation unsupported'));
  sftp.on('close', () => {
    for (const entry of handles.values()) {
      if (entry.kind === 'file') {
        try {
          fs.closeSync(entry.fd);
        } catch {}
      }
    }
    handles.clear();
  });
}

function refuse(client, what) {
  return (accept, reject) => {
    emit({ event: 'refused', what, username: client.username });
    if (typeof reject === 'function') reject();
  };
}

let clients = 0;
const server = new Server({ hostKeys: [config.hostKey], ident: 'Berth-SFTP' }, (client, info) => {
  clients++;
  const remote = info && info.ip ? info.ip + ':' + info.port : 'unknown';
  client.on('close', () => clients--);
  client.on('error', () => undefined);
  if (clients > MAX_CLIENTS) {
    emit({ event: 'refused', what: 'connection (too many clients)', remote });
    client.end();
    return;
  }
  let failures = 0;
  client.on('authentication', (ctx) => {
    if (ctx.method !== 'password') return ctx.reject(['password']);
    const user = crypto.timingSafeEqual(digest(ctx.username), expectedUser);
    const pass = crypto.timingSafeEqual(digest(ctx.password), expectedPassword);
    const username = String(ctx.username).slice(0, 100);
    if (user && pass) {
      client.username = username;
      emit({ event: 'login', ok: true, username, remote });
      return ctx.accept();
    }
    failures++;
    emit({ event: 'login', ok: false, username, remote });
    ctx.reject(['password']);
    if (failures >= MAX_AUTH_FAILURES) client.end();
  });
  client.on('ready', () => {
    client.on('session', (accept) => {
      const session = accept();
      session.on('sftp', (acceptSftp) => serve(acceptSftp()));
      for (const what of ['exec', 'shell', 'pty', 'x11', 'env', 'auth-agent', 'subsystem', 'signal']) {
        session.on(what, refuse(client, what));
      }
    });
    client.on('tcpip', refuse(client, 'port forwarding'));
    client.on('openssh.streamlocal', refuse(client, 'socket forwarding'));
    client.on('request', refuse(client, 'global request'));
  });
});
// The preferred port when free, else one the kernel picks in the same listen: no port probed beforehand
// that another process could take in between.
let fellBack = config.port === 0;
server.on('error', (error) => {
  if (error && error.code === 'EADDRINUSE' && !fellBack) {
    fellBack = true;
    server.listen(0, '127.0.0.1');
    return;
  }
  emit({ event: 'error', message: String(error && error.message), code: error && error.code });
  process.exit(1);
});
server.on('listening', () => emit({ event: 'listening', port: server.address().port }));
server.listen(config.port, '127.0.0.1');
process.on('SIGTERM', () => {
  server.close();
  process.exit(0);
});
`;
