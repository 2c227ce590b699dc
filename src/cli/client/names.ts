// The client's commands and one line on each: read by `berth --help` and the dispatcher without
// loading the client itself (server and admin commands start as fast as before).
export const CLIENT_COMMANDS: ReadonlyArray<readonly [string, string]> = [
  ['login', 'store a Berth URL and credentials as a profile'],
  ['logout', 'forget a profile'],
  ['whoami', 'the signed-in user, profile and teams'],
  ['teams', 'your teams'],
  ['apply', 'apply an infrastructure document (-f FILE|-), show the plan as a diff'],
  ['diff', 'show what applying a document would change (a dry run)'],
  ['export', 'export a team or an application as a document'],
  ['apps', 'list applications'],
  ['status', "an application's status, replicas and health"],
  ['deploy', 'deploy an application, or upload its source (--source DIR|FILE)'],
  ['rollback', 'roll back to an earlier release'],
  ['deployments', "an application's deployments"],
  ['logs', "an application's logs (-f follows)"],
  ['exec', 'run a one-off command in an application (berth exec APP -- CMD…)'],
  ['suspend', 'stop an application; its domains answer 503'],
  ['resume', 'run a suspended application again'],
  ['delete', 'delete an application and its data'],
  ['schedule-deletion', 'schedule (--at T) or cancel (--cancel) the deletion of an application'],
  ['git-webhook', "push to deploy: an application's webhook URL and secret (--rotate)"],
  ['db', 'managed databases (/1.3, or the API token): list, show, clone, upgrade, migrate, connect, …'],
  ['storage', 'object storage: list, credentials'],
  ['tools', 'tools API: balance, pdf, merge, screenshot'],
  ['completion', 'shell completion script (bash, zsh, fish)'],
];

export const CLIENT_COMMAND_NAMES: ReadonlySet<string> = new Set(CLIENT_COMMANDS.map(([name]) => name));
