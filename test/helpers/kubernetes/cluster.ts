// A real Kubernetes control plane for tests: etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler v1.20.2 (built once by scripts/install-kubernetes-testenv.sh) plus the fake kubelet
// (fake-kubelet.ts), on free loopback ports in a directory of its own. Start one per test file.
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import yaml from 'js-yaml';
import { execFileAsync, freePort } from '../processes.js';

/** The cache scripts/install-kubernetes-testenv.sh builds into. */
export const K8S_CACHE = process.env.BERTH_K8S_CACHE ?? '/var/cache/berth-k8s';
export const K8S_BIN = path.join(K8S_CACHE, 'bin');
export const ETCD = '/usr/bin/etcd';
/** The storage class whose claims the fake kubelet provisions, and the ingress class that exists. */
export const TEST_STORAGE_CLASS = 'berth-test';
export const TEST_INGRESS_CLASS = 'berth-test';
export const FAKE_NODE = 'fake-node-1';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '../../..');

/** One line of the API server's audit log (audit.k8s.io/v1 Event), the fields tests read. */
export interface AuditEvent {
  level: string;
  auditID: string;
  stage: string;
  requestURI: string;
  verb: string;
  user: { username: string; groups?: string[] };
  objectRef?: {
    resource?: string;
    namespace?: string;
    name?: string;
    apiGroup?: string;
    apiVersion?: string;
    subresource?: string;
  };
  responseStatus?: { code?: number; reason?: string; message?: string };
  requestObject?: unknown;
  responseObject?: unknown;
  annotations?: Record<string, string>;
}

export interface TestCluster {
  /** kubeconfig file of the admin user (system:masters), token auth */
  kubeconfigPath: string;
  /** kubeconfig of a user with no RBAC rights at all (for k8s-check tests) and its user name */
  restrictedKubeconfigPath: string;
  restrictedUser: string;
  /** the admin user's name, as the audit log names it */
  adminUser: string;
  server: string; // https://127.0.0.1:<free port>
  /** the API server's audit log, parsed (one object per line, audit.k8s.io/v1 Event) */
  audit(): Promise<AuditEvent[]>;
  /** the processes of the cluster (etcd, the three control-plane binaries, the fake kubelet) */
  pids: number[];
  /** the cluster's own directory (logs, certificates, audit log); removed by stop() */
  dir: string;
  stop(): Promise<void>;
}

const ADMIN_USER = 'admin';
const RESTRICTED_USER = 'berth-restricted';

export interface TestClusterOptions {
  /** more kube-apiserver flags (feature gates, admission plugins…), after the helper's own */
  apiServerFlags?: string[];
}

/** Starts a cluster; a port taken between asking for it and binding it makes one more try. */
export async function startTestCluster(options: TestClusterOptions = {}): Promise<TestCluster> {
  for (const binary of ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler']) {
    if (!fs.existsSync(path.join(K8S_BIN, binary)))
      throw new Error(`${path.join(K8S_BIN, binary)} is missing: run scripts/install-kubernetes-testenv.sh`);
  }
  try {
    return await startOnce(options);
  } catch (error) {
    if (!(error instanceof Error) || !/address already in use/.test(error.message)) throw error;
    return startOnce(options);
  }
}

interface Proc {
  name: string;
  child: ChildProcess;
  log: string;
  exited: Promise<void>;
  exitCode?: number | null;
}

async function startOnce(options: TestClusterOptions): Promise<TestCluster> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-k8s-'));
  const procs: Proc[] = [];
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    // Every process at once: SIGTERM, then SIGKILL whatever still runs after 5 s.
    await Promise.all(procs.map((p) => stopProcess(p)));
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    const pki = path.join(dir, 'pki');
    await makeCertificates(pki);
    const adminToken = crypto.randomBytes(16).toString('hex');
    const restrictedToken = crypto.randomBytes(16).toString('hex');
    const componentToken = crypto.randomBytes(16).toString('hex');
    const kubeletToken = crypto.randomBytes(16).toString('hex');
    // The components and the fake kubelet are users of their own, in system:masters, so that the audit
    // log holds only what tests send (the policy below logs the admin and restricted users).
    fs.writeFileSync(
      path.join(pki, 'tokens.csv'),
      [
        `${adminToken},${ADMIN_USER},uid-admin,"system:masters"`,
        `${restrictedToken},${RESTRICTED_USER},uid-restricted`,
        `${componentToken},berth-test-components,uid-components,"system:masters"`,
        `${kubeletToken},berth-fake-kubelet,uid-kubelet,"system:masters"`,
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
    const auditPolicy = path.join(dir, 'audit-policy.yaml');
    fs.writeFileSync(
      auditPolicy,
      yaml.dump({
        apiVersion: 'audit.k8s.io/v1',
        kind: 'Policy',
        omitStages: ['RequestReceived'],
        rules: [{ level: 'RequestResponse', users: [ADMIN_USER, RESTRICTED_USER] }, { level: 'None' }],
      }),
    );
    const auditLog = path.join(dir, 'audit.log');

    const ports = await distinctFreePorts(5);
    const [etcdPort, peerPort, apiPort, kcmPort, schedulerPort] = ports as [
      number,
      number,
      number,
      number,
      number,
    ];
    const server = `https://127.0.0.1:${apiPort}`;
    const caPath = path.join(pki, 'ca.crt');

    const kubeconfigPath = path.join(dir, 'admin.kubeconfig');
    const restrictedKubeconfigPath = path.join(dir, 'restricted.kubeconfig');
    const componentKubeconfig = path.join(dir, 'components.kubeconfig');
    const kubeletKubeconfig = path.join(dir, 'kubelet.kubeconfig');
    writeKubeconfig(kubeconfigPath, server, caPath, ADMIN_USER, adminToken);
    writeKubeconfig(restrictedKubeconfigPath, server, caPath, RESTRICTED_USER, restrictedToken);
    writeKubeconfig(componentKubeconfig, server, caPath, 'berth-test-components', componentToken);
    writeKubeconfig(kubeletKubeconfig, server, caPath, 'berth-fake-kubelet', kubeletToken);

    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    const peerUrl = `http://127.0.0.1:${peerPort}`;
    procs.push(
      launch(dir, 'etcd', ETCD, [
        '--name=t',
        `--data-dir=${path.join(dir, 'etcd')}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=t=${peerUrl}`,
        '--listen-metrics-urls=',
        '--log-level=warn',
      ]),
    );
    // The API server waits for etcd itself: starting both at once saves a second.
    procs.push(
      launch(dir, 'kube-apiserver', path.join(K8S_BIN, 'kube-apiserver'), [
        `--etcd-servers=${etcdUrl}`,
        '--bind-address=127.0.0.1',
        '--advertise-address=127.0.0.1',
        `--secure-port=${apiPort}`,
        '--insecure-port=0',
        '--endpoint-reconciler-type=none',
        `--tls-cert-file=${path.join(pki, 'apiserver.crt')}`,
        `--tls-private-key-file=${path.join(pki, 'apiserver.key')}`,
        `--client-ca-file=${caPath}`,
        `--token-auth-file=${path.join(pki, 'tokens.csv')}`,
        '--authorization-mode=Node,RBAC',
        `--service-account-key-file=${path.join(pki, 'sa.pub')}`,
        `--service-account-signing-key-file=${path.join(pki, 'sa.key')}`,
        '--service-account-issuer=https://kubernetes.default.svc',
        '--service-cluster-ip-range=10.96.0.0/16',
        '--allow-privileged=true',
        `--cert-dir=${path.join(dir, 'apiserver-certs')}`,
        `--audit-policy-file=${auditPolicy}`,
        `--audit-log-path=${auditLog}`,
        // pods/log and pods/exec reach the fake kubelet at the node's InternalIP; its certificate is
        // self-signed and, without --kubelet-certificate-authority, not verified.
        '--kubelet-preferred-address-types=InternalIP',
        '--profiling=false',
        ...(options.apiServerFlags ?? []),
      ]),
    );
    // The fake kubelet's start (tsx) overlaps the API server's; it registers the node once it answers.
    procs.push(
      launch(
        dir,
        'fake-kubelet',
        process.execPath,
        ['--import', 'tsx', path.join(HERE, 'fake-kubelet.ts')],
        {
          KUBECONFIG: kubeletKubeconfig,
          BERTH_FAKE_KUBELET_DIR: path.join(dir, 'kubelet'),
          // The API server does not verify the kubelet's certificate: its own one will do.
          BERTH_FAKE_KUBELET_TLS_CERT: path.join(pki, 'apiserver.crt'),
          BERTH_FAKE_KUBELET_TLS_KEY: path.join(pki, 'apiserver.key'),
        },
        REPO,
      ),
    );
    await waitUntil(
      procs,
      async () => (await httpsGet(`${server}/readyz`, caPath, adminToken)) === 200,
      30_000,
    );

    const componentAuth = [
      `--kubeconfig=${componentKubeconfig}`,
      `--authentication-kubeconfig=${componentKubeconfig}`,
      `--authorization-kubeconfig=${componentKubeconfig}`,
      '--bind-address=127.0.0.1',
      '--port=0',
      '--leader-elect=false',
    ];
    procs.push(
      launch(dir, 'kube-controller-manager', path.join(K8S_BIN, 'kube-controller-manager'), [
        ...componentAuth,
        `--secure-port=${kcmPort}`,
        // No kubelet heartbeats: the node-lifecycle controller would taint the fake node.
        '--controllers=*,-nodelifecycle',
        '--pvclaimbinder-sync-period=1s',
        `--service-account-private-key-file=${path.join(pki, 'sa.key')}`,
        `--root-ca-file=${caPath}`,
        `--cert-dir=${path.join(dir, 'kcm-certs')}`,
      ]),
      launch(dir, 'kube-scheduler', path.join(K8S_BIN, 'kube-scheduler'), [
        ...componentAuth,
        `--secure-port=${schedulerPort}`,
        `--cert-dir=${path.join(dir, 'scheduler-certs')}`,
      ]),
    );

    const kc = new k8s.KubeConfig();
    kc.loadFromFile(kubeconfigPath);
    await bootstrapObjects(kc);
    const core = kc.makeApiClient(k8s.CoreV1Api);
    await waitUntil(
      procs,
      async () => {
        // Healthy controllers and scheduler, the node registered and untainted, and the service account
        // controller done with `default` (pods are refused without their service account).
        const [kcm, scheduler] = await Promise.all([
          httpsGet(`https://127.0.0.1:${kcmPort}/healthz`),
          httpsGet(`https://127.0.0.1:${schedulerPort}/healthz`),
        ]);
        if (kcm !== 200 || scheduler !== 200) return false;
        const node = await core.readNode({ name: FAKE_NODE });
        if ((node.spec?.taints ?? []).length > 0) return false;
        await core.readNamespacedServiceAccount({ name: 'default', namespace: 'default' });
        return true;
      },
      30_000,
    );

    return {
      kubeconfigPath,
      restrictedKubeconfigPath,
      restrictedUser: RESTRICTED_USER,
      adminUser: ADMIN_USER,
      server,
      dir,
      pids: procs.map((p) => p.child.pid ?? 0),
      async audit() {
        const text = await fs.promises.readFile(auditLog, 'utf8').catch(() => '');
        return text
          .split('\n')
          .filter((line) => line.trim() !== '')
          .map((line) => JSON.parse(line) as AuditEvent);
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** The objects a cluster's operator would have made: the ingress class, the storage class, the controller's namespace. */
async function bootstrapObjects(kc: k8s.KubeConfig): Promise<void> {
  const objects = k8s.KubernetesObjectApi.makeApiClient(kc);
  const manifests: k8s.KubernetesObject[] = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'ingress-nginx' } },
    {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'IngressClass',
      // Default classes, as a cluster's usually are: objects that name none get these.
      metadata: {
        name: TEST_INGRESS_CLASS,
        annotations: { 'ingressclass.kubernetes.io/is-default-class': 'true' },
      },
      spec: { controller: 'k8s.io/ingress-nginx' },
    } as k8s.KubernetesObject,
    {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'StorageClass',
      metadata: {
        name: TEST_STORAGE_CLASS,
        annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' },
      },
      // The fake kubelet is this class's (external) provisioner.
      provisioner: 'berth.dev/fake-kubelet',
      reclaimPolicy: 'Delete',
      volumeBindingMode: 'Immediate',
    } as k8s.KubernetesObject,
  ];
  for (const manifest of manifests) await objects.create(manifest);
}

function launch(
  dir: string,
  name: string,
  command: string,
  args: string[],
  env: Record<string, string> = {},
  cwd: string = dir,
): Proc {
  const log = path.join(dir, `${name}.log`);
  const fd = fs.openSync(log, 'a');
  // A parent-death signal: a test process that dies without stop() (killed, timed out) takes its
  // cluster with it.
  const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', command, ...args], {
    cwd,
    detached: false,
    stdio: ['ignore', fd, fd],
    env: { ...process.env, ...env },
  });
  fs.closeSync(fd);
  const proc: Proc = { name, child, log, exited: Promise.resolve() };
  proc.exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      proc.exitCode = code ?? (signal ? -1 : null);
      resolve();
    });
    child.once('error', () => {
      proc.exitCode = -1;
      resolve();
    });
  });
  return proc;
}

async function stopProcess(proc: Proc): Promise<void> {
  if (proc.exitCode !== undefined || proc.child.pid === undefined) return;
  proc.child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const killed = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      proc.child.kill('SIGKILL');
      resolve();
    }, 5_000);
  });
  await Promise.race([proc.exited, killed]);
  clearTimeout(timer);
  await proc.exited;
}

/** Polls `ready` until it answers true; a process that dies meanwhile fails the start with its log's tail. */
async function waitUntil(procs: Proc[], ready: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    const dead = procs.find((p) => p.exitCode !== undefined);
    if (dead) {
      const where = path.dirname(dead.log);
      throw new Error(
        `${dead.name} exited (${dead.exitCode}) while the test cluster in ${where} started:\n${tail(dead.log)}`,
      );
    }
    try {
      if (await ready()) return;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      const logs = procs.map((p) => `--- ${p.name}\n${tail(p.log, 10)}`).join('\n');
      throw new Error(`the test cluster was not ready after ${timeoutMs} ms:\n${logs}`, { cause: lastError });
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

function tail(file: string, lines = 30): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** The HTTP status of a GET, verifying the server with `ca` when given (else not at all: self-signed healthz). */
function httpsGet(url: string, ca?: string, token?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = https.get(
      url,
      {
        ...(ca ? { ca: fs.readFileSync(ca) } : { rejectUnauthorized: false }),
        headers: token ? { authorization: `Bearer ${token}` } : {},
        timeout: 2_000,
      },
      (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      },
    );
    request.on('timeout', () => request.destroy(new Error('timeout')));
    request.on('error', reject);
  });
}

async function distinctFreePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

function writeKubeconfig(file: string, server: string, ca: string, user: string, token: string): void {
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'berth-test', cluster: { server, 'certificate-authority': ca } }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: 'berth-test', context: { cluster: 'berth-test', user } }],
    'current-context': 'berth-test',
  };
  fs.writeFileSync(file, yaml.dump(config), { mode: 0o600 });
}

/** A CA, the API server's certificate (127.0.0.1, localhost) and the service-account key pair. */
async function makeCertificates(pki: string): Promise<void> {
  fs.mkdirSync(pki, { recursive: true, mode: 0o700 });
  const at = (name: string): string => path.join(pki, name);
  const openssl = (...args: string[]): Promise<unknown> => execFileAsync('openssl', args, { cwd: pki });
  await Promise.all([
    openssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      at('ca.key'),
      '-out',
      at('ca.crt'),
      '-days',
      '2',
      '-subj',
      '/CN=berth-test-ca',
    ),
    openssl(
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      at('apiserver.key'),
      '-out',
      at('apiserver.csr'),
      '-subj',
      '/CN=kube-apiserver',
    ),
    openssl('genrsa', '-out', at('sa.key'), '2048'),
  ]);
  fs.writeFileSync(at('ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  await Promise.all([
    openssl(
      'x509',
      '-req',
      '-in',
      at('apiserver.csr'),
      '-CA',
      at('ca.crt'),
      '-CAkey',
      at('ca.key'),
      '-CAcreateserial',
      '-out',
      at('apiserver.crt'),
      '-days',
      '2',
      '-extfile',
      at('ext.cnf'),
    ),
    openssl('rsa', '-in', at('sa.key'), '-pubout', '-out', at('sa.pub')),
  ]);
}
