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

export function limitsFor(engine: DatabaseEngine, plan: string): EngineLimits {
  const shape = parsePlan(plan);
  const budget = Math.max(64, Math.floor(shape.memoryMiB / MEMORY_SCALE_DIVISOR));
  // UpCloud reports max_connections growing with memory; 100 for the small plans.
  const maxConnections = Math.min(1000, Math.max(100, Math.floor(shape.memoryMiB / 40)));
  return limitsForBudget(engine, budget, shape.storageMiB, maxConnections);
}

/**
 * An application service's limits (docs/services.md): its `memory` is the budget itself (one
 * application's private instance, not a plan shared out over a host), 100 connections.
 */
export function limitsForMemory(engine: DatabaseEngine, memoryMiB: number, storageMiB = 0): EngineLimits {
  return limitsForBudget(engine, Math.max(32, Math.floor(memoryMiB)), storageMiB, 100);
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
        },
      };
    case 'mysql':
      // InnoDB's buffer pool takes half the budget; the rest is per-connection and server memory.
      return {
        budgetMiB: budget,
        storageMiB,
        maxConnections,
        settings: {
          'innodb-buffer-pool-size': `${Math.max(16, Math.floor(budget / 2))}M`,
          'max-connections': String(maxConnections),
        },
      };
    case 'valkey':
      // UpCloud's key-value plans allow 70 % of memory for data (max_memory_percent: 70).
      return {
        budgetMiB: budget,
        storageMiB: 0,
        maxConnections,
        settings: { maxmemory: `${Math.floor((budget * 70) / 100)}mb`, 'maxmemory-policy': 'noeviction' },
      };
  }
}

/** Base backups kept per plan: UpCloud's pg backup count by node count (3, 15, 31). */
export function baseBackupRetention(plan: string): number {
  const { nodes } = parsePlan(plan);
  return nodes >= 3 ? 31 : nodes === 2 ? 15 : 3;
}
