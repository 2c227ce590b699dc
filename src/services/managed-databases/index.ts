// Managed databases after apply. service.ts: the service (provisioning, backups, deletion, power,
// pending changes, stop at close); supervisor.ts: restarts of dead processes; jobs.ts: job names and
// payloads; declared.ts: what a row declares; view.ts: the /1.3 service object; repository.ts: the SQL.
export * from './service.js';
