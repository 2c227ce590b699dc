// A network namespace of the test's own with a veth to the host, outside Berth's pool: "another
// machine" that applications in their own namespaces reach through the NAT, as they reach the internet.
import { execFileSync } from 'node:child_process';

export interface OutsideNetwork {
  /** /run/netns/<name>: a server joins it with `nsenter --net=<namespacePath>`. */
  namespacePath: string;
  /** Its address (10.199.x.2), reached from the host and from applications. */
  address: string;
  close(): void;
}

let made = 0;

export function startOutsideNetwork(): OutsideNetwork {
  made += 1;
  const name = `berthtest-out-${process.pid}-${made}`;
  const veth = `bto${process.pid}${made}`.slice(0, 15);
  const octet = (process.pid * 7 + made) % 250;
  const [host, address] = [`10.199.${octet}.1`, `10.199.${octet}.2`];
  const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });
  ip('netns', 'add', name);
  ip('link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', name);
  ip('addr', 'add', `${host}/30`, 'dev', veth);
  ip('link', 'set', veth, 'up');
  ip('-n', name, 'link', 'set', 'lo', 'up');
  ip('-n', name, 'addr', 'add', `${address}/30`, 'dev', 'eth0');
  ip('-n', name, 'link', 'set', 'eth0', 'up');
  ip('-n', name, 'route', 'add', 'default', 'via', host);
  return {
    namespacePath: `/run/netns/${name}`,
    address,
    close() {
      // The host end first (deleting one end of a veth deletes the pair), then the namespace. The
      // other order raced: a deleted namespace takes its pair with it a moment later, so the link
      // seen a moment before was gone when `ip link delete` ran.
      execFileSync('ip', ['link', 'delete', veth], { stdio: 'ignore' });
      execFileSync('ip', ['netns', 'delete', name], { stdio: 'ignore' });
    },
  };
}
