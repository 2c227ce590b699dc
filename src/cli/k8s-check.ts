// `berth admin k8s-check`: is the cluster of the kubernetes runtime driver reachable with the
// configuration `berth serve` would use (BERTH_KUBECONFIG / --kubeconfig), and does it grant every
// right Berth needs? 0 when both, 1 otherwise; `--json` answers the same for a script.
import type { Config } from '../config/index.js';
import {
  createKubeClient,
  KubernetesApiError,
  KubernetesUnreachableError,
  loadKubeConfig,
} from '../drivers/kubernetes/client.js';
import { checkRights, describeRight, type Right } from '../drivers/kubernetes/rights.js';

export interface K8sCheckAnswer {
  server: string | undefined;
  reachable: boolean;
  version?: string;
  /** How many rights were asked, and those not granted. */
  rights?: number;
  missing?: Array<Right & { description: string }>;
  error?: string;
}

export async function k8sCheck(config: Config): Promise<K8sCheckAnswer> {
  let server: string | undefined;
  try {
    const kc = loadKubeConfig({ kubeconfig: config.kubernetes.kubeconfig });
    const client = createKubeClient(kc);
    server = client.server;
    const check = await checkRights(client);
    return {
      server,
      reachable: true,
      version: check.version,
      rights: check.checked,
      missing: check.missing.map((right) => ({ ...right, description: describeRight(right) })),
    };
  } catch (error) {
    return { server, reachable: false, error: problem(error, config, server) };
  }
}

/** One line naming the server (or the kubeconfig) and what went wrong; never a credential. */
function problem(error: unknown, config: Config, server: string | undefined): string {
  if (error instanceof KubernetesUnreachableError) return error.message;
  if (error instanceof KubernetesApiError)
    return `the Kubernetes API server ${server ?? ''} answered ${error.statusCode}${error.reason ? ` ${error.reason}` : ''}: ${error.message}`;
  const message = error instanceof Error ? error.message : String(error);
  const file = config.kubernetes.kubeconfig;
  return file === undefined
    ? `no cluster: ${message}`
    : `cannot load the kubeconfig ${file} (BERTH_KUBECONFIG): ${message}`;
}

export async function runK8sCheck(
  config: Config,
  options: { json: boolean; stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream },
): Promise<number> {
  const answer = await k8sCheck(config);
  const ok = answer.reachable && answer.missing?.length === 0;
  if (options.json) {
    options.stdout.write(JSON.stringify({ ok, ...answer }, null, 2) + '\n');
    return ok ? 0 : 1;
  }
  if (!answer.reachable) {
    options.stderr.write(`berth: ${answer.error ?? 'the cluster is unreachable'}\n`);
    return 1;
  }
  const lines = [`reachable: ${answer.server} (Kubernetes ${answer.version})`];
  const missing = answer.missing ?? [];
  if (missing.length === 0) lines.push(`all ${answer.rights} rights granted`);
  for (const right of missing) lines.push(`missing: ${right.description}`);
  options.stdout.write(lines.join('\n') + '\n');
  if (missing.length > 0)
    options.stderr.write(
      `berth: the Kubernetes API server ${answer.server} does not grant ${missing.length} of the ${answer.rights} rights Berth needs (docs/runtime.md, "Kubernetes: configuration and rights")\n`,
    );
  return ok ? 0 : 1;
}
