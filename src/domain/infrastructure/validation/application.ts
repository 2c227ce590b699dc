// spec.application: type, version, repository, runtime, commands, settings and PHP options.
import type { ApplicationType } from '../../applications.js';
import { APPLICATION_TYPES } from '../../health-checks.js';
import { type DesiredApplication, NODEJS_VERSIONS, PHP_VERSIONS } from '../document.js';
import {
  acceptedRepositoryUrls,
  repositoryUrlProblem,
  type RepositoryUrlRule,
} from '../../repository-urls.js';
import { Checker, isIso8601, normalizeTimestamp, oneOf, versionText } from './checker.js';
import type { ValidationHooks } from './object-storage.js';
import {
  APPLICATION_FIELDS,
  APPLICATION_NAME,
  APPLICATION_NAME_TEXT,
  MAX_REPLICAS,
  type Obj,
  PHP_EXTENSION,
  PHP_SETTING,
  SETTINGS_FIELDS,
  SIZE_MI_GI,
} from './rules.js';

export function validateApplication(
  c: Checker,
  raw: Obj,
  metadataName: string | undefined,
  hooks: ValidationHooks = {},
): DesiredApplication | undefined {
  const path = 'spec.application';
  const label = `Application '${metadataName ?? '?'}'`;
  c.unknownFields(raw, APPLICATION_FIELDS, path, label);
  const name = c.pattern(raw, 'name', path, label, APPLICATION_NAME, APPLICATION_NAME_TEXT);
  if (name !== undefined && metadataName !== undefined && name !== metadataName) {
    c.add(
      `${path}.name`,
      `${label}: field 'name' must match metadata.name ('${metadataName}'); got '${name}'.`,
    );
  }
  const type = c.enumeration<ApplicationType>(
    raw,
    'type',
    path,
    label,
    APPLICATION_TYPES,
    true,
    '; it cannot change after creation',
  );
  const version = c.field(raw, 'version', path, label, 'a version string such as "12"', (v) =>
    versionText(v, false),
  );
  const appLabel = c.string(raw, 'label', path, label);
  const tags = c.stringList(
    raw,
    'tags',
    path,
    label,
    'strings of 1-50 characters',
    (s) => s.length >= 1 && s.length <= 50,
  );

  const app: DesiredApplication = { name: metadataName ?? '', type: type ?? 'laravel', settings: {} };
  if (version !== undefined) app.version = version;
  if (appLabel !== undefined) app.label = appLabel;
  if (tags !== undefined) app.tags = tags;

  const repository = c.mapping(raw, 'repository', path, label, 'url, owner, name, branch');
  if (repository) {
    const p = `${path}.repository`;
    c.unknownFields(repository, ['url', 'owner', 'name', 'branch'], p, `${label} repository`);
    const url = repositoryUrl(c, repository, p, `${label} repository`, {
      allowFileUrls: hooks.allowFileRepositoryUrls === true,
    });
    const owner = c.string(repository, 'owner', p, `${label} repository`);
    const repoName = c.string(repository, 'name', p, `${label} repository`);
    const branch = c.string(repository, 'branch', p, `${label} repository`);
    app.repository = {
      ...(url !== undefined ? { url } : {}),
      ...(owner !== undefined ? { owner } : {}),
      ...(repoName !== undefined ? { name: repoName } : {}),
      ...(branch !== undefined ? { branch } : {}),
    };
  }

  const runtime = c.mapping(raw, 'runtime', path, label, 'php_version, nodejs_version');
  if (runtime) {
    const p = `${path}.runtime`;
    c.unknownFields(runtime, ['php_version', 'nodejs_version'], p, `${label} runtime`);
    const php = c.field(runtime, 'php_version', p, `${label} runtime`, oneOf(PHP_VERSIONS), (v) => {
      const text = versionText(v, true);
      return text !== undefined && (PHP_VERSIONS as readonly string[]).includes(text) ? text : undefined;
    });
    const node = c.field(runtime, 'nodejs_version', p, `${label} runtime`, oneOf(NODEJS_VERSIONS), (v) => {
      const text = versionText(v, false);
      return text !== undefined && (NODEJS_VERSIONS as readonly string[]).includes(text) ? text : undefined;
    });
    app.runtime = {
      ...(php !== undefined ? { php_version: php } : {}),
      ...(node !== undefined ? { nodejs_version: node } : {}),
    };
  }

  const commands = c.mapping(raw, 'commands', path, label, 'build, init, start');
  if (commands) {
    const p = `${path}.commands`;
    c.unknownFields(commands, ['build', 'init', 'start'], p, `${label} commands`);
    const build = c.stringList(
      commands,
      'build',
      p,
      `${label} commands`,
      'shell commands (non-empty strings)',
      (s) => s.trim() !== '' && s.length <= 2000,
    );
    const init = c.stringList(
      commands,
      'init',
      p,
      `${label} commands`,
      'shell commands (non-empty strings)',
      (s) => s.trim() !== '' && s.length <= 2000,
    );
    const start = c.field(commands, 'start', p, `${label} commands`, 'a non-empty shell command', (v) =>
      typeof v === 'string' && v.trim() !== '' && v.length <= 2000 ? v : undefined,
    );
    app.commands = {
      ...(build !== undefined ? { build } : {}),
      ...(init !== undefined ? { init } : {}),
      ...(start !== undefined ? { start } : {}),
    };
  }

  const settings = c.mapping(raw, 'settings', path, label, SETTINGS_FIELDS.join(', '));
  if (settings) {
    const p = `${path}.settings`;
    const l = `${label} settings`;
    c.unknownFields(settings, SETTINGS_FIELDS, p, l);
    const enabled = c.boolean(settings, 'health_check_enabled', p, l);
    const hasPath = settings.health_check_path !== undefined && settings.health_check_path !== null;
    // Rule 8b: disabling and naming a path at once is contradictory.
    if (enabled === false && hasPath) {
      c.add(
        `${p}.health_check_path`,
        `${l}: field 'health_check_path' cannot be set together with health_check_enabled: false; remove the path or enable health checks.`,
      );
    } else {
      // Rule 8c: a non-empty path starting with '/'.
      const checkPath = c.field(
        settings,
        'health_check_path',
        p,
        l,
        "a non-empty path starting with '/' (for example /health)",
        (v) =>
          typeof v === 'string' && v.startsWith('/') && v.length <= 255 && !/\s/.test(v) ? v : undefined,
      );
      if (checkPath !== undefined) app.settings.health_check_path = checkPath;
    }
    if (settings.health_check_path === null) {
      c.add(
        `${p}.health_check_path`,
        `${l}: field 'health_check_path' must be a non-empty path starting with '/'; got an empty value.`,
      );
    }
    if (enabled !== undefined) app.settings.health_check_enabled = enabled;
    const scheduler = c.boolean(settings, 'scheduler_enabled', p, l);
    if (scheduler !== undefined) app.settings.scheduler_enabled = scheduler;
    const replicas = c.field(settings, 'replicas', p, l, `an integer from 1 to ${MAX_REPLICAS}`, (v) =>
      typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= MAX_REPLICAS ? v : undefined,
    );
    if (replicas !== undefined) app.settings.replicas = replicas;
    const memory = c.pattern(
      settings,
      'memory',
      p,
      l,
      SIZE_MI_GI,
      'a memory size with unit suffix Mi or Gi, such as 1024Mi or 2Gi',
    );
    if (memory !== undefined) app.settings.memory = memory;
    const deletion = c.field(
      settings,
      'scheduled_deletion_at',
      p,
      l,
      'an ISO 8601 timestamp such as 2026-12-01T00:00:00Z',
      (v) => (typeof v === 'string' && isIso8601(v) ? normalizeTimestamp(v) : undefined),
    );
    if (deletion !== undefined) app.settings.scheduled_deletion_at = deletion;
  }

  const php = c.mapping(raw, 'php', path, label, 'extensions, settings');
  if (php) {
    const p = `${path}.php`;
    c.unknownFields(php, ['extensions', 'settings'], p, `${label} php`);
    const extensions = c.stringList(
      php,
      'extensions',
      p,
      `${label} php`,
      'extension names (letters, digits, "_" and "-")',
      (s) => PHP_EXTENSION.test(s),
    );
    const phpSettings = c.stringList(
      php,
      'settings',
      p,
      `${label} php`,
      'entries of the form <directive>=<value> (for example memory_limit=512M)',
      (s) => PHP_SETTING.test(s) && s.length <= 1000,
    );
    app.php = {
      ...(extensions !== undefined ? { extensions } : {}),
      ...(phpSettings !== undefined ? { settings: phpSettings } : {}),
    };
  }
  return type === undefined ? undefined : app;
}

/**
 * `repository.url` by the rule fetch applies (domain/repository-urls.ts). The message names what is
 * wrong and what is accepted but never repeats the URL, which may hold credentials.
 */
function repositoryUrl(
  c: Checker,
  repository: Obj,
  path: string,
  label: string,
  rule: RepositoryUrlRule,
): string | undefined {
  const value = repository.url;
  if (value === undefined || value === null) return undefined;
  const problem = typeof value === 'string' ? repositoryUrlProblem(value, rule) : 'must be a string';
  if (problem === undefined) return value as string;
  c.add(`${path}.url`, `${label}: field 'url' ${problem}; expected ${acceptedRepositoryUrls(rule)}.`);
  return undefined;
}
