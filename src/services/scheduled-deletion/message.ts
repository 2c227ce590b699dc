// The text of a deletion warning. Plain text: it must read well in any mail client and in the outbox API.
import { describeTimeLeft, formatUtc } from './policy.js';

export interface ApplicationInventory {
  id: number;
  name: string;
  teamId: number;
  teamName: string;
  scheduledAt: string;
  domains: string[];
  services: string[];
  volumes: string[];
  secrets: number;
  deployments: number;
}

export function warningMessage(
  app: ApplicationInventory,
  now: Date,
  publicUrl: string,
): { subject: string; body: string } {
  const when = formatUtc(app.scheduledAt);
  const left = describeTimeLeft(new Date(app.scheduledAt).getTime() - now.getTime());
  const subject = `Application "${app.name}" (team ${app.teamName}) will be deleted on ${when}`;
  const list = (items: string[]) => (items.length > 0 ? items.join(', ') : 'none');
  const body = [
    `The application "${app.name}" (id ${app.id}) of team "${app.teamName}" is scheduled for deletion.`,
    '',
    `Deletion time: ${when} (${app.scheduledAt}), in ${left}.`,
    '',
    'At that time the application and all its data are removed permanently and cannot be restored:',
    `- services and their databases and files: ${list(app.services)}`,
    `- volumes and their files: ${list(app.volumes)}`,
    `- secrets: ${app.secrets}`,
    `- domains (they become free for others): ${list(app.domains)}`,
    `- deployments and their logs: ${app.deployments}`,
    '- anything the platform runs for the application',
    "The team's managed databases and object storage are not part of the application and stay.",
    '',
    'To cancel the deletion:',
    `  curl -X PATCH ${publicUrl}/api/v1/applications/${app.id} \\`,
    "    -H 'Authorization: Bearer <your API token>' -H 'Content-Type: application/json' \\",
    `    -d '{"scheduled_deletion_at": null}'`,
    `or move it to another time with {"scheduled_deletion_at": "<ISO 8601 time>"}, or remove`,
    '`scheduled_deletion_at` from your Infrastructure document and apply it again.',
    '',
    'You receive this message because you are an owner of the team.',
  ].join('\n');
  return { subject, body };
}

/** The record of a deletion that happened, to the team's owners. */
export function deletedMessage(
  app: ApplicationInventory,
  deletedAt: Date,
): { subject: string; body: string } {
  const when = formatUtc(deletedAt.toISOString());
  const list = (items: string[]) => (items.length > 0 ? items.join(', ') : 'none');
  const subject = `Application "${app.name}" (team ${app.teamName}) was deleted on ${when}`;
  const body = [
    `The application "${app.name}" (id ${app.id}) of team "${app.teamName}" was deleted on ${when},`,
    `as scheduled for ${app.scheduledAt}. It cannot be restored. What was removed:`,
    `- services and their databases and files: ${list(app.services)}`,
    `- volumes and their files: ${list(app.volumes)}`,
    `- secrets: ${app.secrets}`,
    `- domains (now free for others): ${list(app.domains)}`,
    `- deployments and their logs: ${app.deployments}`,
    "The team's managed databases and object storage were not part of the application and stay.",
    '',
    'You receive this message because you are an owner of the team.',
  ].join('\n');
  return { subject, body };
}
