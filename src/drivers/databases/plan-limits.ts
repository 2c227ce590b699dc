// What a plan name means, and the limits the local driver derives from it. UpCloud plans are named
// `NxCxCPU-MGB[-SGB]`: N nodes of C cores and M GB memory each, S GB storage per node (none for
// key-value plans). One host runs many instances, so the local driver does not hand each one the
// plan's full memory: it gives every instance a budget of plan memory / MEMORY_SCALE_DIVISOR and sets
// the engine's memory settings from that budget (docs/drivers.md, "Plan limits").
import type { DatabaseEngine } from './types.js';

export interface PlanShape {
  nodes: number;
  cores: number;
  memoryMiB: number;
  /** 0 for key-value plans, which have no storage of their own. */
  storageMiB: number;
}

/** Plan memory is divided by this on one host: a 2 GB plan gets 128 MiB, a 64 GB plan 4 GiB. */
export const MEMORY_SCALE_DIVISOR = 16;

const PLAN = /^(\d+)x(\d+)xCPU-(\d+)GB(?:-(\d+)GB)?(?:-\d+D)?$/;

export function parsePlan(plan: string): PlanShape {
  const match = PLAN.exec(plan);
  if (!match) throw new Error(`'${plan}' is not a plan name of the form NxCxCPU-MGB[-SGB]`);
  return {
    nodes: Number(match[1]),
    cores: Number(match[2]),
    memoryMiB: Number(match[3]) * 1024,
    storageMiB: match[4] === undefined ? 0 : Number(match[4]) * 1024,
  };
}

export interface EngineLimits {
  /** The per-instance memory budget on this host. */
  budgetMiB: number;
  /** Engine settings, name → value as the engine's configuration writes it. */
  settings: Record<string, string>;
  /** Storage the plan allows; usage above it is reported (write_block_threshold_exceeded). */
  storageMiB: number;
  maxConnections: number;
}

const mib = (n: number): string => `${Math.max(1, Math.floor(n))}MB`;

/**
 * Connection limits from a node's memory, as UpCloud's managed databases (run by Aiven) size them:
 * PostgreSQL 25 per GiB (UpCloud reports `max_connections` 100 for its 4 GB plans), between 100 and
 * 1000; MySQL 75 per GiB under 4 GiB, 100 per GiB from 4 GiB; Valkey/Redis 4 clients per MB, at
 * least 10,000 (the server lowers it to what its open-files limit allows).
 */
export function connectionLimit(engine: DatabaseEngine, memoryMiB: number): number {
  switch (engine) {
    case 'pg':
      return Math.min(1000, Math.max(100, Math.floor((25 * memoryMiB) / 1024)));
    case 'mysql':
      return Math.max(10, Math.floor(((memoryMiB < 4096 ? 75 : 100) * memoryMiB) / 1024));
    case 'valkey':
      return Math.max(10_000, 4 * memoryMiB);
  }
}

/**
 * How long PostgreSQL waits for a client to finish authenticating. A connection that never answers
 * the password request holds a connection slot for this long (the default, 60 s, let anyone who can
 * reach the port hold every slot with a trickle of connections); a real client answers in milliseconds.
 */
export const PG_AUTHENTICATION_TIMEOUT_S = 10;
/** Slots only superusers (Berth's maintenance account) may take once a session is authenticated. */
export const PG_SUPERUSER_RESERVED_CONNECTIONS = 3;
/** How long MariaDB waits for a client's handshake (its default, stated: UpCloud's too). */
export const MYSQL_CONNECT_TIMEOUT_S = 10;
/** Valkey/Redis closes a connection idle this long: UpCloud's `valkey_timeout`/`redis_timeout` default. */
export const VALKEY_IDLE_TIMEOUT_S = 300;

export function limitsFor(engine: DatabaseEngine, plan: string): EngineLimits {
  const shape = parsePlan(plan);
  const budget = Math.max(64, Math.floor(shape.memoryMiB / MEMORY_SCALE_DIVISOR));
  return limitsForBudget(engine, budget, shape.storageMiB, connectionLimit(engine, shape.memoryMiB));
}

/**
 * An application service's limits (docs/services.md): its `memory` is the budget itself (one
 * application's private instance, not a plan shared out over a host), and the cap its processes run
 * under. Its connections are those of the plan whose budget that memory is (memory ×
 * MEMORY_SCALE_DIVISOR), but never more than the memory holds, so that a flood of connections cannot
 * push the server over its cap: a PostgreSQL backend takes ~1.5 MiB (~0.9 MiB before it has
 * authenticated), so 3/8 of a connection per MiB keeps them in three quarters of the memory; a
 * Valkey client up to ~20 KiB of buffers, so 8 per MiB (at least 128).
 */
export function limitsForMemory(engine: DatabaseEngine, memoryMiB: number, storageMiB = 0): EngineLimits {
  const budget = Math.max(32, Math.floor(memoryMiB));
  const planEquivalent = connectionLimit(engine, budget * MEMORY_SCALE_DIVISOR);
  const connections =
    engine === 'valkey'
      ? Math.min(10_000, Math.max(128, 8 * budget))
      : engine === 'pg'
        ? Math.min(planEquivalent, Math.max(10, Math.floor((3 * budget) / 8)))
        : planEquivalent;
  return limitsForBudget(engine, budget, storageMiB, connections);
}

function limitsForBudget(
  engine: DatabaseEngine,
  budget: number,
  storageMiB: number,
  maxConnections: number,
): EngineLimits {
  switch (engine) {
    case 'pg':
      // The usual PostgreSQL proportions: 25 % shared buffers, 75 % of memory as OS cache.
      return {
        budgetMiB: budget,
        storageMiB,
        maxConnections,
        settings: {
          shared_buffers: mib(Math.max(16, budget / 4)),
          effective_cache_size: mib((budget * 3) / 4),
          work_mem: mib(Math.max(1, budget / 64)),
          maintenance_work_mem: mib(Math.max(8, budget / 16)),
          max_connections: String(maxConnections),
          // Reserved slots hold against the owner's sessions; against connections that never
          // authenticate (they take a slot before the reserved check) only the short timeout helps.
          superuser_reserved_connections: String(PG_SUPERUSER_RESERVED_CONNECTIONS),
          authentication_timeout: `${PG_AUTHENTICATION_TIMEOUT_S}s`,
        },
      };
    case 'mysql':
      // InnoDB's buffer pool takes half the budget; the rest is per-connection and server memory.
      // MariaDB keeps one connection beyond max_connections for CONNECTION ADMIN (Berth's accounts).
      return {
        budgetMiB: budget,
        storageMiB,
        maxConnections,
        settings: {
          'innodb-buffer-pool-size': `${Math.max(16, Math.floor(budget / 2))}M`,
          'max-connections': String(maxConnections),
          'connect-timeout': String(MYSQL_CONNECT_TIMEOUT_S),
        },
      };
    case 'valkey':
      // UpCloud's key-value plans allow 70 % of memory for data (max_memory_percent: 70).
      return {
        budgetMiB: budget,
        storageMiB: 0,
        maxConnections,
        settings: {
          maxmemory: `${Math.floor((budget * 70) / 100)}mb`,
          'maxmemory-policy': 'noeviction',
          maxclients: String(maxConnections),
          // Idle clients are closed (never replicas, subscribers or clients blocked in BLPOP & co.).
          timeout: String(VALKEY_IDLE_TIMEOUT_S),
          'tcp-keepalive': '300',
        },
      };
  }
}

/** Base backups kept per plan: UpCloud's pg backup count by node count (3, 15, 31). */
export function baseBackupRetention(plan: string): number {
  const { nodes } = parsePlan(plan);
  return nodes >= 3 ? 31 : nodes === 2 ? 15 : 3;
}
